// Package requeue decides when a waiting pod or gang goes back to the
// scheduling queue: every wake of the phalanx plugins (a quorum met, a plan
// made or failed, capacity freed, a lead overdue), their pacing, and the
// memory of what was turned away. "Capacity changed" has one entry,
// CapacityChanged. It reads the gang directory and lifecycle through its
// ports and never writes to the API.
package requeue

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/lifecycle"
	"github.com/phalanx-sched/phalanx/internal/metrics"
)

// MaxTurnedAway bounds the memory of plain pods kept for waking.
const MaxTurnedAway = 10000

// Directory is what the waker reads of the gang directory.
type Directory interface {
	Members(ref ident.Ref) []*v1.Pod
	Pending(ref ident.Ref) []*v1.Pod
	RefOf(pod *v1.Pod) (ident.Ref, bool)
	// Exists reports whether the gang's group object is known.
	Exists(ref ident.Ref) bool
}

// Ports are what the waker takes from the process.
type Ports struct {
	Directory Directory
	Lifecycle *lifecycle.Lifecycle
	Clock     clock.WithDelayedExecution
	// Activate moves pods (by namespace/name) to the active queue, past
	// any backoff, counting them under reason.
	Activate func(reason string, pods map[string]*v1.Pod)
	// AwaitQueue returns once the scheduling queue's event pass under way
	// when it was called is over.
	AwaitQueue func()
	// LoopStarted reports whether the scheduling loop has run a cycle.
	LoopStarted func() bool
	// QueueRefused reports whether the gang's queue refused it admission
	// and has not admitted it since (nil: no queues).
	QueueRefused func(ref ident.Ref) bool
}

// Waker holds what waits to be woken, under its own lock; it calls its
// ports only without it.
type Waker struct {
	Ports

	mu sync.Mutex
	// turnedAway: plain pods a phalanx plugin rejected; woken on Changed.
	turnedAway map[types.UID]*v1.Pod
	// quorum: what a member completing its gang's quorum wakes.
	quorum quorumWaiters
	// failedWakes paces the wakes of gangs whose plans failed.
	failedWakes failedWakes
	// gone: bound pods that left and nodes that changed lately (GoneBound,
	// NodeChanged).
	gone       map[changeKey]goneAt
	staleWakes staleWakes
}

// New returns a waker over the ports.
func New(p Ports) *Waker {
	return &Waker{Ports: p, turnedAway: map[types.UID]*v1.Pod{}, quorum: newQuorumWaiters(),
		gone: map[changeKey]goneAt{}, staleWakes: staleWakes{pods: map[string]*v1.Pod{}}}
}

// Wake moves the pending members of the gangs back to the active queue,
// those asleep behind a lead too.
func (w *Waker) Wake(reason string, refs ...ident.Ref) {
	w.mu.Lock()
	for _, ref := range refs {
		delete(w.quorum.leads, ref)
		delete(w.quorum.pods, ref)
	}
	w.mu.Unlock()
	pods := map[string]*v1.Pod{}
	for _, ref := range refs {
		for _, m := range w.Directory.Members(ref) {
			if m.Spec.NodeName == "" && m.DeletionTimestamp == nil {
				pods[m.Namespace+"/"+m.Name] = m
			}
		}
	}
	w.Activate(reason, pods)
}

// WakeOne moves a gang back to the active queue through one member: the
// one that stands for its failed plan, or a lead (wakeLead) when none does;
// its plan wakes the others. Woken whole, a 128-member gang that reserved
// nodes re-entered the queue whole each time a pod on them finished.
func (w *Waker) WakeOne(reason string, ref ident.Ref) {
	w.wakeOneFor(reason, ref, w.Lifecycle.Representative(ref))
}

// RetryFailed voids the gang's cached failure and wakes it through one
// member, as WakeOne. The failure goes first: voided after the wake, it
// could turn away the member woken to retry it, and with the failure gone
// nothing would wake the gang again.
func (w *Waker) RetryFailed(reason string, ref ident.Ref) {
	rep := w.Lifecycle.Representative(ref)
	w.Lifecycle.Retry(ref)
	w.wakeOneFor(reason, ref, rep)
}

// wakeOneFor is WakeOne through rep, the member that stood for the gang's
// failed plan ("" for none).
func (w *Waker) wakeOneFor(reason string, ref ident.Ref, rep types.UID) {
	if rep == "" {
		w.WakeLead(reason, ref)
		return
	}
	for _, m := range w.Directory.Members(ref) {
		if m.UID == rep {
			w.Activate(reason, map[string]*v1.Pod{m.Namespace + "/" + m.Name: m})
			return
		}
	}
	w.Wake(reason, ref)
}

// CapacityChanged voids cached plan failures, wakes the plain pods phalanx
// plugins turned away, and wakes the gangs that failed to plan (paced:
// failedWakes).
func (w *Waker) CapacityChanged() {
	w.Lifecycle.Changed()
	w.Changed()
}

// Changed wakes what a capacity change may let through, once the
// lifecycle's version has moved: turned-away plain pods at once, failed
// gangs paced.
func (w *Waker) Changed() {
	w.mu.Lock()
	away := w.turnedAway
	w.turnedAway = map[types.UID]*v1.Pod{}
	w.mu.Unlock()
	w.WakePods(metrics.WokenTurnedAway, away)
	w.wakeFailedGangs()
}

// WakePods moves the pods back to the active queue.
func (w *Waker) WakePods(reason string, pods map[types.UID]*v1.Pod) {
	if len(pods) == 0 {
		return
	}
	byKey := make(map[string]*v1.Pod, len(pods))
	for _, p := range pods {
		byKey[p.Namespace+"/"+p.Name] = p
	}
	w.Activate(reason, byKey)
}

// TurnedAway remembers a plain pod a phalanx plugin rejected for a reason
// that changes without an event the scheduling queue sees, so Changed wakes it.
func (w *Waker) TurnedAway(pod *v1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.turnedAway) < MaxTurnedAway {
		w.turnedAway[pod.UID] = pod
	}
}

// ForgetPod drops what is kept of a deleted pod (member: of gang ref).
func (w *Waker) ForgetPod(ref ident.Ref, member bool, uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if member {
		w.forgetQuorumWaiterLocked(ref, uid)
	}
	delete(w.turnedAway, uid)
}

// ForgetGang drops the gang's records (its group object is gone; the
// caller wakes its members).
func (w *Waker) ForgetGang(ref ident.Ref) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.forgetQuorumLocked(ref)
}

// Sizes are the lengths of what the waker keeps, for tests of its bounds.
func (w *Waker) Sizes() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return map[string]int{"turnedAway": len(w.turnedAway), "quorumPods": len(w.quorum.pods),
		"quorumWoken": len(w.quorum.woken), "quorumLeads": len(w.quorum.leads), "gone": len(w.gone)}
}
