package lifecycle

import (
	"sort"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
)

// ObserveMember records a member as the API shows it: bound to node, or
// pending when node is "". A member that the scheduler reserved stays
// reserved until the API shows it bound.
func (lc *Lifecycle) ObserveMember(ref ident.Ref, uid types.UID, node string) {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gang(ref)
	m := g.member(uid)
	if node != "" && m.state != memberBound {
		g.setState(m, memberBound)
		m.node = node
	}
	lc.notePartialLocked(g)
}

// MemberDeleted forgets a member that is gone or terminating. A member of a
// gang still short of its quorum breaks the gang's plan.
func (lc *Lifecycle) MemberDeleted(ref ident.Ref, uid types.UID) {
	lc.mu.Lock()
	g := lc.gangs[ref]
	if g == nil || g.members[uid] == nil {
		lc.unlock()
		return
	}
	m := g.members[uid]
	delete(g.members, uid)
	g.count[m.state]--
	var rel *release
	if m.state != memberPending && m.state != memberReleased && g.phase == PhasePlanned {
		rel = lc.releaseLocked(g, ReasonPlanBroken, "a placed member was deleted before the gang was complete; replanning")
	}
	if m.state == memberBound {
		lc.version++
	}
	lc.notePartialLocked(g)
	lc.unlock()
	lc.notify(rel)
}

// MemberReserved records that the scheduler assumed a member on node. It
// takes a planned slot for the member's shape when one is open there.
func (lc *Lifecycle) MemberReserved(ref ident.Ref, uid types.UID, node, shape string) {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gang(ref)
	m := g.member(uid)
	if m.state == memberReserved || m.state == memberBound {
		return
	}
	g.setState(m, memberReserved)
	m.node, m.shape, m.planned = node, shape, false
	if g.phase == PhasePlanned && g.slots[node][shape] > 0 {
		g.slots[node][shape]--
		m.planned = true
		lc.holdsChangedLocked(ref)
		if g.slots[node][shape] == 0 {
			lc.dropHoldIfEmptyLocked(g, node)
		}
	}
}

// MemberUnreserved undoes MemberReserved (the member was rejected, timed out
// in Permit or failed to bind). Before the quorum that breaks the plan: the
// whole gang is torn down, once, with the reason.
func (lc *Lifecycle) MemberUnreserved(ref ident.Ref, uid types.UID, name string) {
	lc.mu.Lock()
	g := lc.gangs[ref]
	if g == nil {
		lc.unlock()
		return
	}
	m := g.members[uid]
	if m == nil || m.state == memberBound || m.state == memberPending {
		lc.unlock()
		return
	}
	wasReleased := m.state == memberReleased
	g.setState(m, memberPending)
	m.node, m.planned = "", false
	var rel *release
	if !wasReleased && g.phase == PhasePlanned {
		if !lc.clock.Now().Before(g.expires) {
			rel = lc.releaseLocked(g, ReasonTimeout, timeoutMessage(g))
		} else {
			rel = lc.releaseLocked(g, ReasonPlanBroken, "member "+name+" was released before the gang was complete; replanning")
		}
	}
	lc.unlock()
	lc.notify(rel)
}

// Placed is the number of members that count toward the quorum: bound, or
// reserved by this scheduler.
func (lc *Lifecycle) Placed(ref ident.Ref) int {
	lc.mu.Lock()
	defer lc.unlock()
	if g := lc.gangs[ref]; g != nil {
		return placedLocked(g)
	}
	return 0
}

// Untouched reports whether the gang has no plan or reservation and no
// member placed: nothing of it has begun.
func (lc *Lifecycle) Untouched(ref ident.Ref) bool {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gangs[ref]
	return g == nil || (g.phase == PhaseIdle && placedLocked(g) == 0)
}

func placedLocked(g *gangState) int {
	return g.count[memberReserved] + g.count[memberBound]
}

func (g *gangState) setState(m *member, s memberState) {
	g.count[m.state]--
	m.state = s
	g.count[s]++
}

// Incomplete reports whether the gang has a plan, or members bound or
// reserved, and fewer than its quorum placed: it holds capacity it cannot
// use until it is complete, so its members go first. A plan counts from
// the moment it is made: it wakes the members before the first of them is
// reserved, and the scheduling queue orders a pod when it enters, not
// after.
func (lc *Lifecycle) Incomplete(ref ident.Ref) bool {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gangs[ref]
	if g == nil {
		return false
	}
	placed := placedLocked(g)
	return placed < g.min && (placed > 0 || g.phase == PhasePlanned)
}

// IsPlaced reports whether the member is bound or reserved.
func (lc *Lifecycle) IsPlaced(ref ident.Ref, uid types.UID) bool {
	lc.mu.Lock()
	defer lc.unlock()
	if g := lc.gangs[ref]; g != nil {
		if m := g.members[uid]; m != nil {
			return m.state == memberReserved || m.state == memberBound
		}
	}
	return false
}

// PlacedUIDs returns the members that count toward the quorum.
func (lc *Lifecycle) PlacedUIDs(ref ident.Ref) sets.Set[types.UID] {
	lc.mu.Lock()
	defer lc.unlock()
	out := sets.New[types.UID]()
	if g := lc.gangs[ref]; g != nil {
		for uid, m := range g.members {
			if m.state == memberReserved || m.state == memberBound {
				out.Insert(uid)
			}
		}
	}
	return out
}

// PlacedShapes counts the gang's reserved members by shape (bound members
// the API shows carry no shape: they count under "").
func (lc *Lifecycle) PlacedShapes(ref ident.Ref) map[string]int {
	lc.mu.Lock()
	defer lc.unlock()
	out := map[string]int{}
	if g := lc.gangs[ref]; g != nil {
		for _, m := range g.members {
			if m.state == memberReserved || m.state == memberBound {
				out[m.shape]++
			}
		}
	}
	return out
}

// PlacedNodes returns the nodes of the gang's bound and reserved members, in
// no particular order: it is asked once per member's cycle, and sorting a
// 1024-member gang's nodes each time was a tenth of the scheduler's CPU.
func (lc *Lifecycle) PlacedNodes(ref ident.Ref) []string {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gangs[ref]
	if g == nil {
		return nil
	}
	out := make([]string, 0, placedLocked(g))
	for _, m := range g.members {
		if m.state == memberReserved || m.state == memberBound {
			out = append(out, m.node)
		}
	}
	return out
}

// Reserved returns the members reserved by this scheduler and not yet bound.
func (lc *Lifecycle) Reserved(ref ident.Ref) []types.UID {
	lc.mu.Lock()
	defer lc.unlock()
	if g := lc.gangs[ref]; g != nil {
		return reservedLocked(g)
	}
	return nil
}

func reservedLocked(g *gangState) []types.UID {
	var out []types.UID
	for uid, m := range g.members {
		if m.state == memberReserved {
			out = append(out, uid)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// member returns the member uid, added as pending when it is new.
func (g *gangState) member(uid types.UID) *member {
	m := g.members[uid]
	if m == nil {
		m = &member{state: memberPending}
		g.members[uid] = m
		g.count[memberPending]++
	}
	return m
}
