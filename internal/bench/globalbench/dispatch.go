package globalbench

import (
	"context"
	"sort"

	"k8s.io/utils/clock"

	"github.com/phalanx-sched/phalanx/internal/global"
)

// dispatcher decides one pass over the world.
type dispatcher interface {
	Name() string
	Pass(ctx context.Context, w global.World, est global.Estimator) []global.Verdict
}

// tierConfig is phalanx-global's default tuning (cmd/phalanx-global).
var tierConfig = global.Config{StarvedAfter: tierStarvedAfter, MovesPerHour: 6}

type tierDispatcher struct{ tier *global.Tier }

func newTier(clk clock.PassiveClock) dispatcher {
	return tierDispatcher{tier: global.New(tierConfig, clk)}
}

func (tierDispatcher) Name() string { return "phalanx-global" }

func (d tierDispatcher) Pass(ctx context.Context, w global.World, est global.Estimator) []global.Verdict {
	return d.tier.Pass(ctx, w, est)
}

// karmadaDefault is what Karmada does without the tier: every waiting job,
// first come first served and independently of the others (a job that
// fits nowhere does not hold back the next), goes whole to the member with
// the most free GPUs among those where a whole set starts now (the spread
// constraint on clusters by available replicas). No queues. The members
// are asked with the jobs dispatched and not started yet (Karmada's
// SchedulingOvercommitProtection), so it never sends more than a member
// holds either.
type karmadaDefault struct{}

func (karmadaDefault) Name() string { return "karmada-default" }

func (karmadaDefault) Pass(ctx context.Context, w global.World, est global.Estimator) []global.Verdict {
	assumed := map[string][]*global.Job{}
	var waiting []*global.Job
	for _, j := range w.Jobs {
		switch {
		case j.Done:
		case j.Member != "":
			if !j.Started {
				assumed[j.Member] = append(assumed[j.Member], j)
			}
		default:
			waiting = append(waiting, j)
		}
	}
	sort.SliceStable(waiting, func(a, b int) bool {
		if !waiting[a].Created.Equal(waiting[b].Created) {
			return waiting[a].Created.Before(waiting[b].Created)
		}
		return waiting[a].Key < waiting[b].Key
	})
	asks := make([]global.Ask, 0, len(w.Members))
	out := make([]global.Verdict, 0, len(waiting))
	for _, j := range waiting {
		asks = asks[:0]
		for _, m := range w.Members {
			if m.Ready {
				asks = append(asks, global.Ask{Member: m.Name, Assumed: assumed[m.Name]})
			}
		}
		sets := est.Sets(ctx, j, asks)
		free := est.Sets(ctx, &global.Job{Request: gpus(1)}, asks) // available replicas of one GPU
		best := ""
		for _, a := range asks {
			if s := sets[a.Member]; s.Err != nil || s.Sets < 1 {
				continue
			}
			if best == "" || free[a.Member].Sets > free[best].Sets {
				best = a.Member
			}
		}
		if best == "" {
			out = append(out, global.Verdict{Job: j, Reason: global.NoMemberFitsNow})
			continue
		}
		assumed[best] = append(assumed[best], j)
		out = append(out, global.Verdict{Job: j, Member: best, Reason: global.Dispatched})
	}
	return out
}
