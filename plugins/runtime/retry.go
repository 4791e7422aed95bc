package runtime

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/phalanx-sched/phalanx/internal/metrics"
)

// MaxFailedWakeInterval bounds how long a change waits before the gangs
// whose plans failed are woken to plan again (see failedWakes).
const MaxFailedWakeInterval = 30 * time.Second

// failedWakes paces the wakes of gangs whose plans failed. Each wake
// re-plans every such gang, and a plan that fails costs what the gang's
// last failed plan cost (at 10,000 nodes, 0.1–0.4 s and its reservation's
// pass over every node's pods).
// Changes come far more often in a full cluster: every gang that starts,
// every hold given up. Woken on each, the failed gangs — ahead in the
// queue's order — kept the scheduler re-planning them while the gangs and
// pods behind them, which fit, were never tried. So after a wake the next
// one waits as long as the failed plans took: re-planning them takes at
// most half the scheduler's time.
type failedWakes struct {
	// next is the earliest time of the next wake; pending: a wake is set
	// for then, or under way.
	next    time.Time
	pending bool
}

// wakeFailedGangs wakes the gangs whose plans failed (their representative
// members), now or, within the pace, once at its end. The lifecycle is read
// outside g.mu: the two locks are never held together.
func (g *Gangs) wakeFailedGangs() {
	now := g.rt.clock.Now()
	g.mu.Lock()
	if g.failedWakes.pending {
		g.mu.Unlock()
		return
	}
	g.failedWakes.pending = true
	wait := g.failedWakes.next.Sub(now)
	g.mu.Unlock()
	if wait > 0 {
		g.rt.clock.AfterFunc(wait, func() {
			go g.wakeFailedGangsNow() // a fake clock calls back under its lock
		})
		return
	}
	g.wakeFailedGangsNow()
}

// wakeFailedGangsNow wakes them and sets when the next wake may come.
func (g *Gangs) wakeFailedGangsNow() {
	refs, cost := g.Lifecycle.FailedGangs()
	g.mu.Lock()
	g.failedWakes.next = g.rt.clock.Now().Add(min(cost, MaxFailedWakeInterval))
	g.failedWakes.pending = false
	g.mu.Unlock()
	for _, ref := range refs {
		g.wakeOne(metrics.WokenFailedRetry, ref)
	}
}

// goneKept is how long a pod that left is remembered (goneBound): the
// scheduler's cache drops it milliseconds after the runtime saw it go.
const goneKept = time.Minute

// maxGone bounds goneBound between sweeps.
const maxGone = 100_000

// goneBound records that a bound pod left its node while the capacity
// version was v. The runtime's pod handler and the scheduler's cache each
// get the deletion on their own, in either order: a gang the handler woke
// may plan from a snapshot that still holds the pod, fail, and skip the
// scheduling queue's event for it (paced gangs ignore capacity events),
// the last one that would wake it. retryStaleFailure finds those.
func (g *Gangs) goneBound(uid types.UID, v uint64) {
	now := g.rt.clock.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.gone) >= maxGone {
		g.forgetGoneLocked(now)
		if len(g.gone) >= maxGone {
			clear(g.gone)
		}
	}
	g.gone[uid] = goneAt{version: v, at: now}
}

// goneAt is when a pod left: the capacity version, and the time (to forget it).
type goneAt struct {
	version uint64
	at      time.Time
}

// forgetGone drops the pods that left longer than goneKept ago.
func (g *Gangs) forgetGone() {
	now := g.rt.clock.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.forgetGoneLocked(now)
}

func (g *Gangs) forgetGoneLocked(now time.Time) {
	for uid, a := range g.gone {
		if now.Sub(a.at) > goneKept {
			delete(g.gone, uid)
		}
	}
}

// retryStaleFailure reports whether obj, a pod whose leaving the
// scheduler's cache has just counted, was gone before pod's gang last
// failed to plan, pod standing for the gang: that plan may not have seen
// the room it freed. If so, pod is woken to plan again (wakeStale).
func (g *Gangs) retryStaleFailure(pod *v1.Pod, obj any) bool {
	left, ok := obj.(*v1.Pod)
	if !ok || left.Spec.NodeName == "" {
		return false
	}
	g.mu.Lock()
	a, ok := g.gone[left.UID]
	g.mu.Unlock()
	if !ok {
		// The cache counted it first: the runtime's wake comes after.
		return false
	}
	ref, ok := g.RefOf(pod)
	if !ok || !g.Lifecycle.FailedSince(ref, pod.UID, a.version) {
		return false
	}
	if _, paused := g.Lifecycle.Paused(ref); paused {
		return false
	}
	g.wakeStale(pod)
	return true
}

// wakeStale voids the gang's failure, so that pod plans rather than being
// turned away by it, and moves pod to the active queue once the scheduling
// queue's event pass that found the failure stale is over, with every
// other pod that pass found, in one call: the queue's order, not the order
// of the pass nor the backoff queue's, decides which gang goes first.
// Until then the pass sees the failure stand, and skips the gang's other
// members.
func (g *Gangs) wakeStale(pod *v1.Pod) {
	g.mu.Lock()
	g.staleWakes.pods[pod.Namespace+"/"+pod.Name] = pod
	start := !g.staleWakes.running
	g.staleWakes.running = true
	g.mu.Unlock()
	if start {
		go g.flushStaleWakes()
	}
}

func (g *Gangs) flushStaleWakes() {
	g.rt.awaitQueue()
	for {
		g.mu.Lock()
		pods := g.staleWakes.pods
		if len(pods) == 0 {
			g.staleWakes.running = false
			g.mu.Unlock()
			return
		}
		g.staleWakes.pods = map[string]*v1.Pod{}
		g.mu.Unlock()
		for _, pod := range pods {
			if ref, ok := g.RefOf(pod); ok {
				g.Lifecycle.Retry(ref)
			}
		}
		g.rt.Activate(metrics.WokenStaleFailure, pods)
	}
}

// staleWakes: members to wake after a queue event pass (wakeStale).
type staleWakes struct {
	pods    map[string]*v1.Pod
	running bool
}
