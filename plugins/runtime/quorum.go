package runtime

import (
	"maps"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/phalanx-sched/phalanx/internal/gang"
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
	pods map[gang.Ref]map[types.UID]*v1.Pod
	// woken: gangs whose quorum woke them.
	woken map[gang.Ref]bool
	// leads: gangs woken through one member, the others asleep in pods
	// until the gang is woken whole (g.wake): by its plan, by the lead's
	// refusal for any other reason (Refused), by the lead's or the
	// representative's deletion, or after LeadWait (sweep).
	leads map[gang.Ref]lead
}

type lead struct {
	uid   types.UID
	since time.Time
}

func newQuorumWaiters() quorumWaiters {
	return quorumWaiters{pods: map[gang.Ref]map[types.UID]*v1.Pod{}, woken: map[gang.Ref]bool{}, leads: map[gang.Ref]lead{}}
}

// mayWaitForQuorum records the pod before PreEnqueue counts its gang's
// members. Recording before counting closes the race with the completing
// member: either the count sees that member in the informer's index, or its
// wake sees this pod here (and the scheduling queue, which runs PreEnqueue
// under its lock, moves the pod once it is turned away).
func (g *Gangs) mayWaitForQuorum(ref gang.Ref, pod *v1.Pod) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.quorum.pods[ref] == nil {
		g.quorum.pods[ref] = map[types.UID]*v1.Pod{}
	}
	g.quorum.pods[ref][pod.UID] = pod
}

// turnedAwayForQuorum reports whether PreEnqueue turned members of the gang
// away for lack of members, and they still wait.
func (g *Gangs) turnedAwayForQuorum(ref gang.Ref) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.quorum.pods[ref]) > 0 && !g.quorum.woken[ref]
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
func (g *Gangs) quorumMet(ref gang.Ref, uid types.UID) bool {
	unplanned := g.Lifecycle.Untouched(ref)
	rep := g.Lifecycle.Representative(ref)
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.quorum.woken[ref] {
		g.quorum.woken[ref] = true
		g.forgetQuorumWaiterLocked(ref, uid)
		if g.rt.Leader.LoopStarted() {
			g.quorum.leads[ref] = lead{uid: uid, since: g.rt.clock.Now()}
		}
		return true
	}
	if l, led := g.quorum.leads[ref]; led && unplanned && l.uid != uid && rep != uid {
		return false // asleep in quorum.pods (mayWaitForQuorum)
	}
	g.forgetQuorumWaiterLocked(ref, uid)
	return true
}

func (g *Gangs) forgetQuorumWaiterLocked(ref gang.Ref, uid types.UID) {
	if m := g.quorum.pods[ref]; m != nil {
		delete(m, uid)
		if len(m) == 0 {
			delete(g.quorum.pods, ref)
		}
	}
}

// quorumShort: the gang is short of members again; the next member that
// completes it wakes a lead again.
func (g *Gangs) quorumShort(ref gang.Ref) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.quorum.woken, ref)
	delete(g.quorum.leads, ref)
}

// forgetQuorumLocked drops the gang's records (its group object is gone).
func (g *Gangs) forgetQuorumLocked(ref gang.Ref) {
	delete(g.quorum.pods, ref)
	delete(g.quorum.woken, ref)
	delete(g.quorum.leads, ref)
}

// wakeAtQuorum moves the gang's lead to the active queue the first time,
// then, once the gang was woken whole, the members PreEnqueue turned away
// since.
func (g *Gangs) wakeAtQuorum(ref gang.Ref) {
	g.mu.Lock()
	first := !g.quorum.woken[ref]
	g.quorum.woken[ref] = true
	waiting := g.quorum.pods[ref]
	var wake map[types.UID]*v1.Pod
	whole := false
	switch _, asleep := g.quorum.leads[ref]; {
	case first && (len(waiting) == 0 || !g.rt.Leader.LoopStarted()):
		// None was turned away for the quorum (the completing member
		// passed, or they were never offered), or the loop has not
		// started (quorumMet): wake every pending member.
		whole = true
	case first:
		l := g.leadLocked(ref)
		wake = map[types.UID]*v1.Pod{l.UID: l}
	case !asleep:
		wake = waiting
		delete(g.quorum.pods, ref)
	}
	g.mu.Unlock()
	if _, err := g.Spec(ref); err != nil {
		// Its group object is gone, and its delete handler may have run
		// before the marks above: drop it.
		g.mu.Lock()
		g.forgetQuorumLocked(ref)
		g.mu.Unlock()
	}
	if whole {
		g.wake(metrics.WokenQuorum, ref)
		return
	}
	g.activate(metrics.WokenQuorum, wake)
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
// (gang.Compare). Before the scheduling loop has run, none sleeps
// (quorumMet).
func (g *Gangs) wakeLead(reason string, ref gang.Ref) {
	pending := g.Pending(ref)
	if len(pending) < 2 || !g.rt.Leader.LoopStarted() {
		g.wake(reason, ref)
		return
	}
	asleep := make(map[types.UID]*v1.Pod, len(pending))
	for _, m := range pending {
		asleep[m.UID] = m
	}
	g.mu.Lock()
	g.quorum.woken[ref] = true
	g.quorum.pods[ref] = asleep
	l := g.leadLocked(ref)
	g.mu.Unlock()
	g.activate(reason, map[types.UID]*v1.Pod{l.UID: l})
}

// leadLocked makes the oldest of the gang's sleepers its lead, no longer
// asleep, and returns it; there is at least one.
func (g *Gangs) leadLocked(ref gang.Ref) *v1.Pod {
	l := gang.Oldest(slices.Collect(maps.Values(g.quorum.pods[ref])))
	g.quorum.leads[ref] = lead{uid: l.UID, since: g.rt.clock.Now()}
	g.forgetQuorumWaiterLocked(ref, l.UID)
	return l
}

// asleep reports whether the member sleeps behind its gang's lead: the
// scheduling queue's events do not move it (SkipFailedGang).
func (g *Gangs) asleep(ref gang.Ref, uid types.UID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.quorum.leads[ref]; !ok {
		return false
	}
	_, ok := g.quorum.pods[ref][uid]
	return ok
}

// leadOf returns the gang's lead while members sleep behind it.
func (g *Gangs) leadOf(ref gang.Ref) (lead, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	l, ok := g.quorum.leads[ref]
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
func (g *Gangs) Refused(pod *v1.Pod) {
	ref, ok := g.RefOf(pod)
	if !ok {
		return
	}
	if _, ok := g.leadOf(ref); ok && !g.queueRefused(ref) {
		g.wake(metrics.WokenLeadRefused, ref)
	}
}

// queueRefused reports whether the gang's queue refused it admission and
// has not admitted it since.
func (g *Gangs) queueRefused(ref gang.Ref) bool {
	q := g.rt.queues.Load()
	return q != nil && q.blockedGang(ref)
}

// wakeOverdueLeads passes the lead on in the gangs whose lead has stood for
// them longer than LeadWait without a plan or a failure: something may keep
// it out of the scheduling loop (another plugin's PreEnqueue, a gate), or it
// waits its turn in a long queue. A lead its queue refused was tried; it is
// retried as the queue's share moves.
func (g *Gangs) wakeOverdueLeads() {
	now := g.rt.clock.Now()
	var overdue []gang.Ref
	g.mu.Lock()
	for ref, l := range g.quorum.leads {
		if now.Sub(l.since) >= LeadWait {
			overdue = append(overdue, ref)
		}
	}
	g.mu.Unlock()
	gang.SortRefs(overdue)
	for _, ref := range overdue {
		if g.Lifecycle.Representative(ref) == "" && !g.queueRefused(ref) {
			g.passLead(ref)
		}
	}
}

// passLead makes the gang's next sleeper its lead, the overdue one staying
// where it is. Woken whole, a gang whose lead merely waited its turn in a
// long queue put every member into the queue ahead of its plan, where
// they kept their places after it.
func (g *Gangs) passLead(ref gang.Ref) {
	g.mu.Lock()
	if len(g.quorum.pods[ref]) == 0 {
		g.mu.Unlock()
		g.wake(metrics.WokenLeadOverdue, ref)
		return
	}
	l := g.leadLocked(ref)
	g.mu.Unlock()
	g.activate(metrics.WokenLeadOverdue, map[types.UID]*v1.Pod{l.UID: l})
}
