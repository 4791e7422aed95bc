package lifecycle

import (
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
)

// Changed records that capacity may have changed (a pod left a node, a node
// or the topology changed). Cached plan failures from before are void. It
// returns the new capacity version.
func (lc *Lifecycle) Changed() uint64 {
	lc.mu.Lock()
	defer lc.unlock()
	lc.version++
	return lc.version
}

// Version is the capacity version: it moves with every capacity change.
func (lc *Lifecycle) Version() uint64 {
	lc.mu.Lock()
	defer lc.unlock()
	return lc.version
}

// Fail caches why the gang could not be planned (by member uid's cycle): its
// members are turned away with this reason, without planning again, until
// capacity changes.
func (lc *Lifecycle) Fail(ref ident.Ref, uid types.UID, reason string) {
	lc.FailAt(ref, uid, reason, lc.Version())
}

// FailAt is Fail for a plan that saw capacity version version: a change
// since (a node added while the gang was planned) voids the failure at once.
func (lc *Lifecycle) FailAt(ref ident.Ref, uid types.UID, reason string, version uint64) {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gang(ref)
	g.failed, g.failedAt, g.failedTime, g.reason = true, version, lc.clock.Now(), reason
	g.representative = uid
	if g.waitingSince.IsZero() {
		g.waitingSince = g.failedTime
	}
}

// Failed returns the cached failure of the gang if nothing changed since.
func (lc *Lifecycle) Failed(ref ident.Ref) (string, bool) {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gangs[ref]
	if g == nil || !g.failed || g.failedAt != lc.version {
		return "", false
	}
	return g.reason, true
}

// Representative returns the member that stands for a gang whose plan
// failed (zero when the gang has not failed or that member is gone): cluster
// events retry it alone, and its plan wakes the others.
func (lc *Lifecycle) Representative(ref ident.Ref) types.UID {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gangs[ref]
	if g == nil || !g.failed {
		return ""
	}
	if m := g.members[g.representative]; m == nil || m.state != memberPending {
		return ""
	}
	return g.representative
}

// FailedSince reports whether uid stands for the gang (Representative) and
// the gang's failed plan began at capacity version v or later.
func (lc *Lifecycle) FailedSince(ref ident.Ref, uid types.UID, v uint64) bool {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gangs[ref]
	if g == nil || !g.failed || g.representative != uid || g.failedAt < v {
		return false
	}
	m := g.members[uid]
	return m != nil && m.state == memberPending
}

// Retry voids the gang's cached failure, so its next member plans again.
func (lc *Lifecycle) Retry(ref ident.Ref) {
	lc.mu.Lock()
	defer lc.unlock()
	if g := lc.gangs[ref]; g != nil {
		g.failed = false
	}
}

// FailedBefore lists the gangs whose last plan failed longer than age ago:
// what changed since may not have produced a capacity change (another
// queue's demand, a victim growing old enough to reclaim), so they are
// planned again now and then.
func (lc *Lifecycle) FailedBefore(age time.Duration) []ident.Ref {
	lc.mu.Lock()
	defer lc.unlock()
	now := lc.clock.Now()
	var out []ident.Ref
	for ref, g := range lc.gangs {
		if g.failed && now.Sub(g.failedTime) >= age {
			out = append(out, ref)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// FailedCycleOverhead is what a failed cycle costs beyond the plan: the
// framework writes the member's PodScheduled condition, and its message
// changes with the numbers in it, so it is rarely skipped. The write runs
// inside the scheduling loop unless SchedulerAsyncAPICalls is on, which
// moves it out of the loop but not off the API server. At 64 nodes a
// failed plan takes a millisecond or two; counted alone, it let a few dozen
// gangs that did not fit be retried on every pod that finished, each retry
// with its write, and the loop spent its time there (docs/benchmarks.md).
// 20 ms is above the writes measured on the 2-core test machine (about
// 10 ms each under a trace replay).
const FailedCycleOverhead = 20 * time.Millisecond

// FailCost records what the gang's failed plan cost the scheduling loop.
func (lc *Lifecycle) FailCost(ref ident.Ref, d time.Duration) {
	lc.mu.Lock()
	defer lc.unlock()
	if g := lc.gangs[ref]; g != nil && g.failed {
		g.failedCost = d
	}
}

// FailedGangs lists the gangs whose last plan failed, and what their failed
// plans took together.
func (lc *Lifecycle) FailedGangs() (refs []ident.Ref, cost time.Duration) {
	lc.mu.Lock()
	defer lc.unlock()
	for ref, g := range lc.gangs {
		if g.failed {
			refs = append(refs, ref)
			cost += g.failedCost
		}
	}
	ident.SortRefs(refs)
	return refs, cost
}

// Stalled lists the gangs whose last plan failed while nothing has changed
// since (Failed holds for each), and the gangs paused after a timed-out plan:
// they cannot use room that is free now.
func (lc *Lifecycle) Stalled() []ident.Ref {
	lc.mu.Lock()
	defer lc.unlock()
	var out []ident.Ref
	now := lc.clock.Now()
	for ref, g := range lc.gangs {
		if (g.failed && g.failedAt == lc.version) || now.Before(g.pausedUntil) {
			out = append(out, ref)
		}
	}
	ident.SortRefs(out)
	return out
}

// WaitingSince is when the gang started failing to plan (zero if it is not
// waiting).
func (lc *Lifecycle) WaitingSince(ref ident.Ref) time.Time {
	lc.mu.Lock()
	defer lc.unlock()
	if g := lc.gangs[ref]; g != nil {
		return g.waitingSince
	}
	return time.Time{}
}
