package requeue

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
// outside w.mu: the two locks are never held together.
func (w *Waker) wakeFailedGangs() {
	now := w.Clock.Now()
	w.mu.Lock()
	if w.failedWakes.pending {
		w.mu.Unlock()
		return
	}
	w.failedWakes.pending = true
	wait := w.failedWakes.next.Sub(now)
	w.mu.Unlock()
	if wait > 0 {
		w.Clock.AfterFunc(wait, func() {
			go w.wakeFailedGangsNow() // a fake clock calls back under its lock
		})
		return
	}
	w.wakeFailedGangsNow()
}

// wakeFailedGangsNow wakes them and sets when the next wake may come.
func (w *Waker) wakeFailedGangsNow() {
	refs, cost := w.Lifecycle.FailedGangs()
	w.mu.Lock()
	w.failedWakes.next = w.Clock.Now().Add(min(cost, MaxFailedWakeInterval))
	w.failedWakes.pending = false
	w.mu.Unlock()
	for _, ref := range refs {
		w.WakeOne(metrics.WokenFailedRetry, ref)
	}
}

// goneKept is how long a change is remembered (GoneBound, NodeChanged):
// the scheduler's cache has it milliseconds after the runtime saw it.
const goneKept = time.Minute

// maxGone bounds goneBound between sweeps.
const maxGone = 100_000

// goneBound records that a bound pod left its node while the capacity
// version was v. The runtime's pod handler and the scheduler's cache each
// get the deletion on their own, in either order: a gang the handler woke
// may plan from a snapshot that still holds the pod, fail, and skip the
// scheduling queue's event for it (paced gangs ignore capacity events),
// the last one that would wake it. retryStaleFailure finds those.
func (w *Waker) GoneBound(uid types.UID, v uint64) { w.recordChange(changeKey{uid: uid}, v) }

// NodeChanged records that the node (this version of it) was added, or
// changed what it offers, while the capacity version was v: as with a pod
// that left (GoneBound), the runtime's node handler may wake a failed gang
// whose plan then runs on a snapshot without the change, and the
// scheduling queue's event for it, which comes once the snapshot has it,
// is skipped for the failed gang.
func (w *Waker) NodeChanged(node *v1.Node, v uint64) { w.recordChange(nodeKey(node), v) }

func (w *Waker) recordChange(key changeKey, v uint64) {
	now := w.Clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.gone) >= maxGone {
		w.forgetGoneLocked(now)
		if len(w.gone) >= maxGone {
			clear(w.gone)
		}
	}
	w.gone[key] = goneAt{version: v, at: now}
}

// changeKey names a change the runtime saw: a pod that left (its UID), or
// one version of a node (UID and resourceVersion: a node changes many
// times under one UID, and an older change must not make a later failure
// look stale).
type changeKey struct {
	uid             types.UID
	resourceVersion string
}

func nodeKey(n *v1.Node) changeKey {
	return changeKey{uid: n.UID, resourceVersion: n.ResourceVersion}
}

// changeKeyOf is the key of the object a capacity event carries: a bound
// pod that left, or a node.
func changeKeyOf(obj any) (changeKey, bool) {
	switch o := obj.(type) {
	case *v1.Pod:
		return changeKey{uid: o.UID}, o.Spec.NodeName != ""
	case *v1.Node:
		return nodeKey(o), true
	}
	return changeKey{}, false
}

// goneAt is when a change was seen: the capacity version, and the time (to forget it).
type goneAt struct {
	version uint64
	at      time.Time
}

// forgetGone drops the pods that left longer than goneKept ago.
func (w *Waker) ForgetGone() {
	now := w.Clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.forgetGoneLocked(now)
}

func (w *Waker) forgetGoneLocked(now time.Time) {
	for uid, a := range w.gone {
		if now.Sub(a.at) > goneKept {
			delete(w.gone, uid)
		}
	}
}

// retryStaleFailure reports whether obj, a pod whose leaving (or a node
// whose change) the scheduler's cache has just counted, was seen by the
// runtime before pod's gang last failed to plan, pod standing for the gang:
// that plan may not have seen the room it freed or added. If so, pod is
// woken to plan again (wakeStale).
func (w *Waker) RetryStaleFailure(pod *v1.Pod, obj any) bool {
	key, ok := changeKeyOf(obj)
	if !ok {
		return false
	}
	w.mu.Lock()
	a, ok := w.gone[key]
	w.mu.Unlock()
	if !ok {
		// The cache counted it first: the runtime's wake comes after.
		return false
	}
	ref, ok := w.Directory.RefOf(pod)
	if !ok || !w.Lifecycle.FailedSince(ref, pod.UID, a.version) {
		return false
	}
	if _, paused := w.Lifecycle.Paused(ref); paused {
		return false
	}
	w.wakeStale(pod)
	return true
}

// wakeStale voids the gang's failure, so that pod plans rather than being
// turned away by it, and moves pod to the active queue once the scheduling
// queue's event pass that found the failure stale is over, with every
// other pod that pass found, in one call: the queue's order, not the order
// of the pass nor the backoff queue's, decides which gang goes first.
// Until then the pass sees the failure stand, and skips the gang's other
// members.
func (w *Waker) wakeStale(pod *v1.Pod) {
	w.mu.Lock()
	w.staleWakes.pods[pod.Namespace+"/"+pod.Name] = pod
	start := !w.staleWakes.running
	w.staleWakes.running = true
	w.mu.Unlock()
	if start {
		go w.flushStaleWakes()
	}
}

func (w *Waker) flushStaleWakes() {
	w.AwaitQueue()
	for {
		w.mu.Lock()
		pods := w.staleWakes.pods
		if len(pods) == 0 {
			w.staleWakes.running = false
			w.mu.Unlock()
			return
		}
		w.staleWakes.pods = map[string]*v1.Pod{}
		w.mu.Unlock()
		for _, pod := range pods {
			if ref, ok := w.Directory.RefOf(pod); ok {
				w.Lifecycle.Retry(ref)
			}
		}
		w.Activate(metrics.WokenStaleFailure, pods)
	}
}

// staleWakes: members to wake after a queue event pass (wakeStale).
type staleWakes struct {
	pods    map[string]*v1.Pod
	running bool
}
