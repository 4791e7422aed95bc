package lifecycle

import (
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
)

// notePartialLocked tracks gangs that are partly bound without a plan: some
// members bound, fewer than the quorum, others still pending (a crash during
// binding, a member that failed to bind after the quorum).
func (lc *Lifecycle) notePartialLocked(g *gangState) {
	bound, pending := g.count[memberBound], g.count[memberPending]
	partial := g.min > 0 && bound > 0 && bound < g.min && pending > 0
	if g.startedWith > 0 && bound >= g.startedWith {
		// Running as it started; a raised minimum waits for more members
		// without taking the running ones away.
		partial = false
	}
	switch {
	case !partial:
		g.partialSince = time.Time{}
	case g.partialSince.IsZero():
		g.partialSince = lc.clock.Now()
	}
}

// Stranded returns gangs that have been partly bound, with no plan and no
// reservation, for longer than their timeout, and that cannot be completed:
// their last plan failed, or fewer members exist than the quorum. They hold
// capacity they cannot use, so their bound members should go.
func (lc *Lifecycle) Stranded(defaultTimeout time.Duration) []ident.Ref {
	lc.mu.Lock()
	defer lc.unlock()
	now := lc.clock.Now()
	var out []ident.Ref
	for ref, g := range lc.gangs {
		if g.partialSince.IsZero() || g.phase == PhasePlanned || g.phase == PhaseReserving {
			continue
		}
		if !g.failed && len(g.members) >= g.min {
			continue
		}
		timeout := g.timeout
		if timeout <= 0 {
			timeout = defaultTimeout
		}
		if now.Sub(g.partialSince) >= timeout {
			out = append(out, ref)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// BoundMembers returns the members the API shows bound.
func (lc *Lifecycle) BoundMembers(ref ident.Ref) []types.UID {
	lc.mu.Lock()
	defer lc.unlock()
	var out []types.UID
	if g := lc.gangs[ref]; g != nil {
		for uid, m := range g.members {
			if m.state == memberBound {
				out = append(out, uid)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
