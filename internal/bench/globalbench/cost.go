package globalbench

import (
	"context"
	"math/rand/v2"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/phalanx-sched/phalanx/internal/global"
)

// costResult is the wall time of one pass over a fixed world.
type costResult struct {
	Dispatcher       string
	Members, Waiting int
	Seed             uint64
	Passes           int
	PerPass          time.Duration
	// Verdicts and Dispatched are per pass.
	Verdicts, Dispatched int
}

// costWorld is members half full of running jobs and waiting jobs
// submitted over the last hour, of every team.
func costWorld(o Options, members, waiting int, seed uint64) (global.World, *standIns, time.Time) {
	r := rand.New(rand.NewPCG(seed, 0x5851f42d4c957f2d))
	s := newStandIns(members, o.GPUs)
	var jobs []*global.Job
	i := 0
	for _, m := range s.members {
		for {
			size := drawSize(r)
			if s.used[m.Name][gpu]+size > o.GPUs/2 {
				break
			}
			j := newJob(i, r.IntN(len(o.Weights)), size, 0, time.Hour)
			i++
			j.Member, j.Started, j.Since = m.Name, true, epoch
			s.used[m.Name].Add(j.Request)
			jobs = append(jobs, j.Job)
		}
	}
	for range waiting {
		submit := time.Hour + time.Duration(r.Int64N(int64(time.Hour)))
		jobs = append(jobs, newJob(i, r.IntN(len(o.Weights)), drawSize(r), submit.Round(time.Second), time.Hour).Job)
		i++
	}
	return global.World{Queues: teamQueues(o.Weights), Members: s.members, Jobs: jobs}, s, epoch.Add(2 * time.Hour)
}

// passCost repeats one dispatcher's pass over the same world for
// o.CostTime (at least three passes); a pass does not change the world.
func passCost(ctx context.Context, o Options, members, waiting int, seed uint64, mk func(*clocktesting.FakePassiveClock) dispatcher) costResult {
	w, est, now := costWorld(o, members, waiting, seed)
	d := mk(clocktesting.NewFakePassiveClock(now))
	res := costResult{Dispatcher: d.Name(), Members: members, Waiting: waiting, Seed: seed}
	start := time.Now()
	for res.Passes < 3 || time.Since(start) < o.CostTime {
		verdicts := d.Pass(ctx, w, est)
		res.Passes++
		res.Verdicts, res.Dispatched = len(verdicts), 0
		for _, v := range verdicts {
			if v.Reason == global.Dispatched {
				res.Dispatched++
			}
		}
	}
	res.PerPass = time.Since(start) / time.Duration(res.Passes)
	return res
}
