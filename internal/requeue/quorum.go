package requeue

import (
	"maps"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/metrics"
)

// LeadWait bounds how long a gang's members sleep behind the member its
// quorum woke (quorumWaiters.leads) while that member has been neither
// planned nor refused: then they are all woken (the sweep checks it).
const LeadWait = 30 * time.Second

// quorumWaiters is what the member that completes a gang's quorum wakes.
// The first such member wakes one pending member, the lead: its cycle plans
// the gang, and the plan wakes the rest. Woken whole, every member of a gang
// that did not fit was refused in turn, each refusal a pod status write
// inside the scheduling loop, while jobs behind it that fit waited
// (docs/benchmarks.md). Later quorums wake only the members PreEnqueue may
// have turned away since, and only once the gang was woken whole: a gang
// listed whole at the scheduler's start would otherwise wake all its members
// again for each member after the quorum (size² queue moves).
type quorumWaiters struct {
	// pods: per gang, the members PreEnqueue counted for.
	pods map[ident.Ref]map[types.UID]*v1.Pod
	// woken: gangs whose quorum woke them.
	woken map[ident.Ref]bool
	// leads: gangs woken through one member, the others asleep in pods
	// until the gang is woken whole (Wake): by its plan, by the lead's
	// refusal for any other reason (Refused), by the lead's or the
	// representative's deletion, or after LeadWait (sweep).
	leads map[ident.Ref]Lead
}

// Lead is the member a gang's sleepers wait behind, and since when.
type Lead struct {
	UID   types.UID
	Since time.Time
}

func newQuorumWaiters() quorumWaiters {
	return quorumWaiters{pods: map[ident.Ref]map[types.UID]*v1.Pod{}, woken: map[ident.Ref]bool{}, leads: map[ident.Ref]Lead{}}
}

// mayWaitForQuorum records the pod before PreEnqueue counts its gang's
// members. Recording before counting closes the race with the completing
// member: either the count sees that member in the informer's index, or its
// wake sees this pod here (and the scheduling queue, which runs PreEnqueue
// under its lock, moves the pod once it is turned away).
func (w *Waker) Offered(ref ident.Ref, pod *v1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.quorum.pods[ref] == nil {
		w.quorum.pods[ref] = map[types.UID]*v1.Pod{}
	}
	w.quorum.pods[ref][pod.UID] = pod
}

// turnedAwayForQuorum reports whether PreEnqueue turned members of the gang
// away for lack of members, and they still wait.
func (w *Waker) TurnedAwayForQuorum(ref ident.Ref) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.quorum.pods[ref]) > 0 && !w.quorum.woken[ref]
}

// quorumMet decides for a member of a gang whose quorum exists whether
// PreEnqueue lets it through. The first to pass (the member completing the
// quorum) leads its gang: the members turned away before it, and those that
// come after it while the gang has no plan, sleep until its cycle plans the
// gang. Let through as they came, the members of a gang listed faster than
// the scheduling queue's adds (the informer's index runs ahead of its
// handlers) entered the active queue before the plan, and kept the places
// they entered at after it: behind thousands of pods, until the plan timed
// out. The lead and the member that stands for a failed plan pass; every
// member passes once the gang is planned, partly placed, or woken whole.
// Before the scheduling loop has run, no member sleeps: nothing plans until
// it runs, and the queue checks each pod it holds turned away against every
// node event, so kube-scheduler's start, which lists every node after the
// pods, cost nodes × sleepers hint checks (12 s before readiness with one
// 1,024-member gang on 4,096 nodes, against 0.8 s for stock).
func (w *Waker) QuorumMet(ref ident.Ref, uid types.UID) bool {
	unplanned := w.Lifecycle.Untouched(ref)
	rep := w.Lifecycle.Representative(ref)
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.quorum.woken[ref] {
		w.quorum.woken[ref] = true
		w.forgetQuorumWaiterLocked(ref, uid)
		if w.LoopStarted() {
			w.quorum.leads[ref] = Lead{UID: uid, Since: w.Clock.Now()}
		}
		return true
	}
	if l, led := w.quorum.leads[ref]; led && unplanned && l.UID != uid && rep != uid {
		return false // asleep in quorum.pods (mayWaitForQuorum)
	}
	w.forgetQuorumWaiterLocked(ref, uid)
	return true
}

func (w *Waker) forgetQuorumWaiterLocked(ref ident.Ref, uid types.UID) {
	if m := w.quorum.pods[ref]; m != nil {
		delete(m, uid)
		if len(m) == 0 {
			delete(w.quorum.pods, ref)
		}
	}
}

// quorumShort: the gang is short of members again; the next member that
// completes it wakes a lead again.
func (w *Waker) QuorumShort(ref ident.Ref) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.quorum.woken, ref)
	delete(w.quorum.leads, ref)
}

// forgetQuorumLocked drops the gang's records (its group object is gone).
func (w *Waker) forgetQuorumLocked(ref ident.Ref) {
	delete(w.quorum.pods, ref)
	delete(w.quorum.woken, ref)
	delete(w.quorum.leads, ref)
}

// wakeAtQuorum moves the gang's lead to the active queue the first time,
// then, once the gang was woken whole, the members PreEnqueue turned away
// since.
func (w *Waker) WakeAtQuorum(ref ident.Ref) {
	w.mu.Lock()
	first := !w.quorum.woken[ref]
	w.quorum.woken[ref] = true
	waiting := w.quorum.pods[ref]
	var wake map[types.UID]*v1.Pod
	whole := false
	switch _, asleep := w.quorum.leads[ref]; {
	case first && (len(waiting) == 0 || !w.LoopStarted()):
		// None was turned away for the quorum (the completing member
		// passed, or they were never offered), or the loop has not
		// started (quorumMet): wake every pending member.
		whole = true
	case first:
		l := w.leadLocked(ref)
		wake = map[types.UID]*v1.Pod{l.UID: l}
	case !asleep:
		wake = waiting
		delete(w.quorum.pods, ref)
	}
	w.mu.Unlock()
	if !w.Directory.Exists(ref) {
		// Its group object is gone, and its delete handler may have run
		// before the marks above: drop it.
		w.mu.Lock()
		w.forgetQuorumLocked(ref)
		w.mu.Unlock()
	}
	if whole {
		w.Wake(metrics.WokenQuorum, ref)
		return
	}
	w.WakePods(metrics.WokenQuorum, wake)
}

// wakeLead moves the gang's oldest pending member to the active queue; the
// others sleep behind it, as behind the lead its quorum woke, until its plan
// wakes them (or its refusal for anything but a failed plan or its queue,
// or LeadWait). Every retry of a gang without a plan goes through it (a
// pause's end, its queue's share moved, room freed). Woken whole after a
// timed-out plan's pause, the members of a large gang entered the queue
// behind every pod already there, and the plan its first member made held
// the gang's nodes while the rest came one by one: on the 512-node trace
// such plans timed out again, over and over, on an empty cluster. Members
// woken by a plan enter the queue as a planned gang's, at its front
// (ident.Compare). Before the scheduling loop has run, none sleeps
// (quorumMet).
func (w *Waker) WakeLead(reason string, ref ident.Ref) {
	pending := w.Directory.Pending(ref)
	if len(pending) < 2 || !w.LoopStarted() {
		w.Wake(reason, ref)
		return
	}
	asleep := make(map[types.UID]*v1.Pod, len(pending))
	for _, m := range pending {
		asleep[m.UID] = m
	}
	w.mu.Lock()
	w.quorum.woken[ref] = true
	w.quorum.pods[ref] = asleep
	l := w.leadLocked(ref)
	w.mu.Unlock()
	w.WakePods(reason, map[types.UID]*v1.Pod{l.UID: l})
}

// leadLocked makes the oldest of the gang's sleepers its lead, no longer
// asleep, and returns it; there is at least one.
func (w *Waker) leadLocked(ref ident.Ref) *v1.Pod {
	l := ident.Oldest(slices.Collect(maps.Values(w.quorum.pods[ref])))
	w.quorum.leads[ref] = Lead{UID: l.UID, Since: w.Clock.Now()}
	w.forgetQuorumWaiterLocked(ref, l.UID)
	return l
}

// asleep reports whether the member sleeps behind its gang's lead: the
// scheduling queue's events do not move it (SkipFailedGang).
func (w *Waker) Asleep(ref ident.Ref, uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.quorum.leads[ref]; !ok {
		return false
	}
	_, ok := w.quorum.pods[ref][uid]
	return ok
}

// leadOf returns the gang's lead while members sleep behind it.
func (w *Waker) LeadOf(ref ident.Ref) (Lead, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	l, ok := w.quorum.leads[ref]
	return l, ok
}

// Refused runs when a member's cycle ends without a node (Coscheduling's
// PostFilter, or the scheduler's status write on the pod). Members asleep
// behind the gang's lead are woken unless its queue refused it (admission
// is the whole gang's: each member would be refused in turn; the lead is
// retried as the queue's share moves, wakeBlocked): what refused the member
// was not the gang's (another plugin, a member of its own short of
// something), and each member must be tried itself; or the gang's plan
// failed, and each member is turned down once by the cached failure, its
// PodScheduled condition saying why (users and the Workload API's status
// read every member's), then stays out of the queue until the member that
// stands for the gang plans it (SkipFailedGang).
func (w *Waker) Refused(pod *v1.Pod) {
	ref, ok := w.Directory.RefOf(pod)
	if !ok {
		return
	}
	if _, ok := w.LeadOf(ref); ok && !w.queueRefused(ref) {
		w.Wake(metrics.WokenLeadRefused, ref)
	}
}

// queueRefused reports whether the gang's queue refused it admission and
// has not admitted it since.
func (w *Waker) queueRefused(ref ident.Ref) bool {
	return w.QueueRefused != nil && w.QueueRefused(ref)
}

// wakeOverdueLeads passes the lead on in the gangs whose lead has stood for
// them longer than LeadWait without a plan or a failure: something may keep
// it out of the scheduling loop (another plugin's PreEnqueue, a gate), or it
// waits its turn in a long queue. A lead its queue refused was tried; it is
// retried as the queue's share moves.
func (w *Waker) WakeOverdueLeads() {
	now := w.Clock.Now()
	var overdue []ident.Ref
	w.mu.Lock()
	for ref, l := range w.quorum.leads {
		if now.Sub(l.Since) >= LeadWait {
			overdue = append(overdue, ref)
		}
	}
	w.mu.Unlock()
	ident.SortRefs(overdue)
	for _, ref := range overdue {
		if w.Lifecycle.Representative(ref) == "" && !w.queueRefused(ref) {
			w.passLead(ref)
		}
	}
}

// passLead makes the gang's next sleeper its lead, the overdue one staying
// where it is. Woken whole, a gang whose lead merely waited its turn in a
// long queue put every member into the queue ahead of its plan, where
// they kept their places after it.
func (w *Waker) passLead(ref ident.Ref) {
	w.mu.Lock()
	if len(w.quorum.pods[ref]) == 0 {
		w.mu.Unlock()
		w.Wake(metrics.WokenLeadOverdue, ref)
		return
	}
	l := w.leadLocked(ref)
	w.mu.Unlock()
	w.WakePods(metrics.WokenLeadOverdue, map[types.UID]*v1.Pod{l.UID: l})
}
