package lifecycle

import (
	"sort"
	"time"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// ReservationRequest asks to hold nodes for a gang that cannot be placed yet.
type ReservationRequest struct {
	Kind ReservationKind
	// Queue, Priority and Created order gangs that compete for a queue's one
	// starvation reservation: higher priority first, then older.
	Queue    string
	Priority int32
	Created  time.Time
	// Plan places the gang on capacity that is busy now; its slots become
	// holds against pods of equal or lower priority.
	Plan   *planner.Plan
	Shapes map[string]resources.List
	// TTL ends the reservation if the gang is not planned by then (0: none).
	TTL time.Duration
	// ReadyBy is the latest the reserved room is free (zero: unknown); a
	// claimant that ends by then backfills it (HeldFrom).
	ReadyBy time.Time
}

// Reservation describes what a reserving gang holds.
type Reservation struct {
	Kind     ReservationKind
	Since    time.Time
	Priority int32
	// Slots: node -> shape -> members the reservation holds room for.
	Slots  map[string]map[string]int
	Shapes map[string]resources.List
}

// Reserve holds the nodes of req.Plan for the gang. Starvation reservations
// are one per queue: the gang that goes first in the queue's order (Compare:
// priority, then age, then names) keeps it; a gang ahead of the holder displaces it. granted is false
// when another gang of the queue keeps the reservation.
func (lc *Lifecycle) Reserve(ref ident.Ref, req ReservationRequest) (granted bool, displaced ident.Ref) {
	lc.mu.Lock()
	defer lc.unlock()
	if req.Kind == ReservationStarved {
		for other, g := range lc.gangs {
			if other == ref || g.phase != PhaseReserving || g.kind != ReservationStarved || g.queue != req.Queue {
				continue
			}
			if goesFirst(g.priority, g.created, other, req.Priority, req.Created, ref) {
				return false, ident.Ref{}
			}
			lc.clearReservationLocked(g)
			displaced = other
		}
	}
	g := lc.gang(ref)
	since := lc.clock.Now()
	if g.phase == PhaseReserving && g.kind == req.Kind {
		since = g.since
	}
	lc.clearHoldsLocked(g)
	lc.setSlotsLocked(g, req.Plan, req.Shapes)
	g.phase = PhaseReserving
	g.kind, g.queue, g.priority, g.created, g.since = req.Kind, req.Queue, req.Priority, req.Created, since
	if !g.readyBy.Equal(req.ReadyBy) {
		// The expected start is published with the holds.
		lc.holdsChangedLocked(ref)
	}
	g.readyBy = req.ReadyBy
	if req.TTL > 0 {
		gen := g.generation
		g.timer = lc.clock.AfterFunc(req.TTL, func() { go lc.expire(ref, gen) })
	}
	return true, displaced
}

// goesFirst reports whether gang a goes before gang b of the same queue:
// Compare without queue shares.
func goesFirst(prioA int32, createdA time.Time, a ident.Ref, prioB int32, createdB time.Time, b ident.Ref) bool {
	c, _ := ident.Compare(
		ident.Order{Priority: prioA, Created: createdA, Namespace: a.Namespace, Name: a.Name, Source: a.Source},
		ident.Order{Priority: prioB, Created: createdB, Namespace: b.Namespace, Name: b.Name, Source: b.Source}, nil)
	return c < 0
}

// DropReservation ends the gang's reservation, if it holds one.
func (lc *Lifecycle) DropReservation(ref ident.Ref) {
	lc.mu.Lock()
	defer lc.unlock()
	if g := lc.gangs[ref]; g != nil && g.phase == PhaseReserving {
		lc.clearReservationLocked(g)
	}
}

// ReservationOf returns the gang's reservation, if it holds one.
func (lc *Lifecycle) ReservationOf(ref ident.Ref) (Reservation, bool) {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gangs[ref]
	if g == nil || g.phase != PhaseReserving {
		return Reservation{}, false
	}
	slots := make(map[string]map[string]int, len(g.slots))
	for node, byShape := range g.slots {
		slots[node] = make(map[string]int, len(byShape))
		for s, n := range byShape {
			slots[node][s] = n
		}
	}
	return Reservation{Kind: g.kind, Since: g.since, Priority: g.priority, Slots: slots, Shapes: g.shapes}, true
}

// ExpectedStart is when the gang's starvation reservation expects it to
// start: the reserved room is free by then, by the limits and estimates of
// the pods it waits for (zero: no reservation, or unknown).
func (lc *Lifecycle) ExpectedStart(ref ident.Ref) time.Time {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if g := lc.gangs[ref]; g != nil && g.phase == PhaseReserving && g.kind == ReservationStarved {
		return g.readyBy
	}
	return time.Time{}
}

// Reservations lists the gangs that hold a reservation.
func (lc *Lifecycle) Reservations() []ident.Ref {
	lc.mu.Lock()
	defer lc.unlock()
	var out []ident.Ref
	for ref, g := range lc.gangs {
		if g.phase == PhaseReserving {
			out = append(out, ref)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// ReservationsOn lists the gangs whose reservation holds room on node.
func (lc *Lifecycle) ReservationsOn(node string) []ident.Ref {
	lc.mu.Lock()
	defer lc.unlock()
	var out []ident.Ref
	for ref, g := range lc.gangs {
		if _, ok := g.slots[node]; ok && g.phase == PhaseReserving {
			out = append(out, ref)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

func (lc *Lifecycle) clearReservationLocked(g *gangState) {
	lc.clearHoldsLocked(g)
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
	g.phase = PhaseIdle
	g.slots, g.nodes, g.kind, g.readyBy = nil, nil, "", time.Time{}
	lc.generation++
	g.generation = lc.generation
	lc.version++
}
