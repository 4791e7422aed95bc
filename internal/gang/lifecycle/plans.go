package lifecycle

import (
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// CommitPlan records a plan for the gang and holds its capacity until ttl
// passes, the quorum is reached or the plan breaks. A reservation the gang
// held is replaced. Members reserved before keep their reservations.
func (lc *Lifecycle) CommitPlan(ref ident.Ref, plan *planner.Plan, shapes map[string]resources.List, ttl time.Duration) {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gang(ref)
	lc.clearHoldsLocked(g)
	lc.setSlotsLocked(g, plan, shapes)
	g.growth = g.min > 0 && placedLocked(g) >= g.min
	g.phase = PhasePlanned
	g.expires, g.ttl = lc.clock.Now().Add(ttl), ttl
	g.failed, g.reason = false, ""
	g.waitingSince, g.partialSince = time.Time{}, time.Time{}
	gen := g.generation
	g.timer = lc.clock.AfterFunc(ttl, func() { go lc.expire(ref, gen) })
}

func (lc *Lifecycle) setSlotsLocked(g *gangState, plan *planner.Plan, shapes map[string]resources.List) {
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
	lc.generation++
	g.generation = lc.generation
	g.shapes = shapes
	g.slots = make(map[string]map[string]int, len(plan.Slots))
	g.nodes = g.nodes[:0]
	for node, byShape := range plan.Slots {
		open := make(map[string]int, len(byShape))
		for shape, n := range byShape {
			if n > 0 {
				open[shape] = n
			}
		}
		if len(open) == 0 {
			continue
		}
		g.slots[node] = open
		g.nodes = append(g.nodes, node)
		if lc.holds[node] == nil {
			lc.holds[node] = map[ident.Ref]*gangState{}
		}
		lc.holds[node][g.ref] = g
		lc.holdsChangedLocked(g.ref)
	}
	sort.Strings(g.nodes)
}

// expire ends a plan that ran out of time before its quorum.
func (lc *Lifecycle) expire(ref ident.Ref, generation uint64) {
	lc.mu.Lock()
	g := lc.gangs[ref]
	var rel *release
	if g != nil && g.generation == generation {
		g.timer = nil // it fired
		switch g.phase {
		case PhasePlanned:
			rel = lc.releaseLocked(g, ReasonTimeout, timeoutMessage(g))
		case PhaseReserving:
			lc.clearReservationLocked(g)
		}
	}
	lc.unlock()
	lc.notify(rel)
}

func timeoutMessage(g *gangState) string {
	return "only " + itoa(placedLocked(g)) + " of " + itoa(g.min) + " members were placed within " +
		g.ttl.String() + "; all members released"
}

// Phase returns the gang's phase.
func (lc *Lifecycle) Phase(ref ident.Ref) Phase {
	lc.mu.Lock()
	defer lc.unlock()
	if g := lc.gangs[ref]; g != nil {
		return g.phase
	}
	return PhaseIdle
}

// NextSlot returns the node the next member of the shape goes to under the
// gang's plan. live is false when the gang has no plan; node is "" when the
// plan has no open slot for the shape (the member is beyond the plan).
func (lc *Lifecycle) NextSlot(ref ident.Ref, shape string) (node string, live bool) {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gangs[ref]
	if g == nil || g.phase != PhasePlanned {
		return "", false
	}
	for _, n := range g.nodes {
		if g.slots[n][shape] > 0 {
			return n, true
		}
	}
	return "", true
}

// Remaining is how long the gang's plan has left; zero without one.
func (lc *Lifecycle) Remaining(ref ident.Ref) time.Duration {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gangs[ref]
	if g == nil || g.phase != PhasePlanned {
		return 0
	}
	return g.expires.Sub(lc.clock.Now())
}

// Quorum reports whether the gang has at least min members placed. The first
// time it does, the plan is consumed (its holds are gone: every planned member
// is assumed) and first is true. A gang below its quorum again (a member lost
// after starting) is no longer Started.
func (lc *Lifecycle) Quorum(ref ident.Ref, min int) (reached, first bool, placed int) {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gang(ref)
	placed = placedLocked(g)
	if placed < min {
		if g.phase == PhaseStarted {
			g.phase = PhaseIdle
		}
		return false, false, placed
	}
	if g.phase == PhaseStarted {
		return true, false, placed
	}
	if g.phase == PhasePlanned && g.growth && openSlotsLocked(g) > 0 {
		// A plan beyond the quorum (a sub-group that grows a started gang)
		// goes through whole, too.
		return false, false, placed
	}
	lc.clearHoldsLocked(g)
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
	g.phase = PhaseStarted
	g.startedWith = min
	g.waitingSince, g.partialSince = time.Time{}, time.Time{}
	lc.endPauseLocked(g)
	g.timeouts = 0
	return true, true, placed
}

// Release tears the gang's plan or reservation down, once: holds are freed,
// reserved members are released for the caller to reject, and the listener
// hears the reason. It reports whether there was anything to release.
func (lc *Lifecycle) Release(ref ident.Ref, reason, message string) bool {
	lc.mu.Lock()
	g := lc.gangs[ref]
	var rel *release
	if g != nil {
		switch g.phase {
		case PhasePlanned:
			rel = lc.releaseLocked(g, reason, message)
		case PhaseReserving:
			lc.clearReservationLocked(g)
			lc.unlock()
			return true
		}
	}
	lc.unlock()
	lc.notify(rel)
	return rel != nil
}

type release struct {
	ref             ident.Ref
	reserved        []types.UID
	reason, message string
}

func (lc *Lifecycle) releaseLocked(g *gangState, reason, message string) *release {
	rel := &release{ref: g.ref, reserved: reservedLocked(g), reason: reason, message: message}
	for _, m := range g.members {
		if m.state == memberReserved {
			g.setState(m, memberReleased)
		}
	}
	lc.clearHoldsLocked(g)
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
	g.phase = PhaseIdle
	g.slots, g.nodes = nil, nil
	lc.generation++
	g.generation = lc.generation
	lc.version++
	if reason == ReasonTimeout {
		pause := lc.pauseLocked(g)
		rel.message += "; planning again after " + pause.String() + " (holding nothing meanwhile)"
	}
	return rel
}
