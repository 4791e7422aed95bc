package runtime

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/phalanx-sched/phalanx/internal/gang"
)

// quorumWaiters is what the member that completes a gang's quorum wakes.
// The first such member wakes every pending member; later ones wake only the
// members PreEnqueue may have turned away since. A gang listed whole at the
// scheduler's start would otherwise wake all its members again for each
// member after the quorum (size² queue moves; in the 1000-node scale bench
// those wakes were a fifth of the CPU of the start).
type quorumWaiters struct {
	// pods: per gang, the members PreEnqueue counted for.
	pods map[gang.Ref]map[types.UID]*v1.Pod
	// woken: gangs whose pending members were all woken at their quorum.
	woken map[gang.Ref]bool
}

func newQuorumWaiters() quorumWaiters {
	return quorumWaiters{pods: map[gang.Ref]map[types.UID]*v1.Pod{}, woken: map[gang.Ref]bool{}}
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

// quorumMet forgets a pod that PreEnqueue let through.
func (g *Gangs) quorumMet(ref gang.Ref, uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.forgetQuorumWaiterLocked(ref, uid)
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
// completes it wakes every pending member.
func (g *Gangs) quorumShort(ref gang.Ref) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.quorum.woken, ref)
}

// forgetQuorumLocked drops the gang's records (its group object is gone).
func (g *Gangs) forgetQuorumLocked(ref gang.Ref) {
	delete(g.quorum.pods, ref)
	delete(g.quorum.woken, ref)
}

// wakeAtQuorum moves the gang's pending members back to the active queue:
// all of them the first time, then those PreEnqueue counted for since.
func (g *Gangs) wakeAtQuorum(ref gang.Ref) {
	g.mu.Lock()
	first := !g.quorum.woken[ref]
	g.quorum.woken[ref] = true
	waiting := g.quorum.pods[ref]
	delete(g.quorum.pods, ref)
	g.mu.Unlock()
	if _, err := g.Spec(ref); err != nil {
		// Its group object is gone, and its delete handler may have run
		// before the mark above: drop it.
		g.mu.Lock()
		g.forgetQuorumLocked(ref)
		g.mu.Unlock()
	}
	if first {
		g.wake(ref)
		return
	}
	g.activate(waiting)
}
