package lifecycle

import (
	"time"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Held returns the capacity that gangs other than except hold on node
// against a pod of the given priority: the open slots of plans (against
// every pod) and of reservations of equal or higher priority.
func (lc *Lifecycle) Held(node string, except ident.Ref, priority int32) (resources.List, int64) {
	return lc.HeldFrom(node, Claimant{Ref: except, Priority: priority})
}

// Claimant is who asks for room: its gang (zero for a plain pod), its
// priority, and when it is sure to be gone (its pods' activeDeadlineSeconds
// from now; zero: no limit).
type Claimant struct {
	Ref      ident.Ref
	Priority int32
	Ends     time.Time
}

// HeldFrom is Held for a claimant that may end in time: a starvation
// reservation whose room is sure to be free only after the claimant ends
// (readyBy) does not hold against it — it backfills without delaying the
// reservation (conservative backfill, on run-time limits).
func (lc *Lifecycle) HeldFrom(node string, c Claimant) (resources.List, int64) {
	return lc.held(node, func(ref ident.Ref, g *gangState) bool {
		switch {
		case ref == c.Ref:
			return true
		case g.phase != PhaseReserving:
			return false // a plan holds against every pod
		case c.Priority > g.priority:
			return true
		}
		return g.kind == ReservationStarved && !g.readyBy.IsZero() && !c.Ends.IsZero() && !c.Ends.After(g.readyBy)
	})
}

// HeldAhead returns what a starving gang that asks for a reservation must
// leave alone on node: every hold but its own and the starvation
// reservations of its queue that it goes before (Reserve would displace
// them, so their room is the gang's to claim).
func (lc *Lifecycle) HeldAhead(node string, req ReservationRequest, ref ident.Ref) (resources.List, int64) {
	return lc.held(node, func(other ident.Ref, g *gangState) bool {
		return other == ref || (g.phase == PhaseReserving && g.kind == ReservationStarved && req.Kind == ReservationStarved &&
			g.queue == req.Queue && goesFirst(req.Priority, req.Created, ref, g.priority, g.created, other))
	})
}

func (lc *Lifecycle) held(node string, skip func(ident.Ref, *gangState) bool) (resources.List, int64) {
	lc.mu.Lock()
	defer lc.unlock()
	var held resources.List
	var pods int64
	for ref, g := range lc.holds[node] {
		if skip(ref, g) {
			continue
		}
		for shape, n := range g.slots[node] {
			if n <= 0 {
				continue
			}
			if held == nil {
				held = resources.List{}
			}
			held.AddScaled(g.shapes[shape], int64(n))
			pods += int64(n)
		}
	}
	return held, pods
}

// HoldsAnywhere reports whether any gang holds capacity (a cheap guard for
// the Filter fast path).
func (lc *Lifecycle) HoldsAnywhere() bool {
	lc.mu.Lock()
	defer lc.unlock()
	return len(lc.holds) > 0
}

// HeldByGang returns, per gang that holds capacity, the resources its open
// slots hold: queue accounting charges them to the gang's queue.
func (lc *Lifecycle) HeldByGang() map[ident.Ref]resources.List {
	lc.mu.Lock()
	defer lc.unlock()
	out := map[ident.Ref]resources.List{}
	for _, byGang := range lc.holds {
		for ref, g := range byGang {
			if _, seen := out[ref]; !seen {
				out[ref] = heldLocked(g)
			}
		}
	}
	return out
}

// HeldOf returns what HeldByGang says of one gang: nil when it holds nothing.
func (lc *Lifecycle) HeldOf(ref ident.Ref) resources.List {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gangs[ref]
	if g == nil {
		return nil
	}
	for node := range g.slots {
		if lc.holds[node][ref] == g {
			if sum := heldLocked(g); !sum.IsZero() {
				return sum
			}
			return nil
		}
	}
	return nil
}

// openSlotsLocked counts the plan's members not placed yet.
func openSlotsLocked(g *gangState) int {
	n := 0
	for _, byShape := range g.slots {
		for _, c := range byShape {
			n += c
		}
	}
	return n
}

// heldLocked sums the gang's open slots.
func heldLocked(g *gangState) resources.List {
	sum := resources.List{}
	for _, byShape := range g.slots {
		for shape, n := range byShape {
			sum.AddScaled(g.shapes[shape], int64(n))
		}
	}
	return sum
}

// clearHoldsLocked gives up every open slot of the gang: capacity no member
// took is free again (the FreedListener hears of it).
func (lc *Lifecycle) clearHoldsLocked(g *gangState) {
	for node, byShape := range g.slots {
		if lc.holds[node][g.ref] == g {
			for _, n := range byShape {
				if n > 0 {
					lc.freed = true
				}
			}
		}
		lc.removeHoldLocked(g, node)
	}
}

func (lc *Lifecycle) dropHoldIfEmptyLocked(g *gangState, node string) {
	for _, n := range g.slots[node] {
		if n > 0 {
			return
		}
	}
	lc.removeHoldLocked(g, node)
}

func (lc *Lifecycle) removeHoldLocked(g *gangState, node string) {
	if byGang := lc.holds[node]; byGang != nil && byGang[g.ref] == g {
		delete(byGang, g.ref)
		if len(byGang) == 0 {
			delete(lc.holds, node)
		}
		lc.holdsChangedLocked(g.ref)
	}
}
