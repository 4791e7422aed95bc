package lifecycle

import (
	"reflect"
	"testing"
	"time"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
)

// TestReservationOrderIsCompare: of two gangs of one queue asking for its
// starvation reservation, the one Compare puts first keeps it; at equal
// priority and time, by namespace and name, as the queue sort does.
func TestReservationOrderIsCompare(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	a := ident.Ref{Namespace: "team", Name: "a"}
	b := ident.Ref{Namespace: "team", Name: "b"}
	if !goesFirst(0, t0, a, 0, t0, b) || goesFirst(0, t0, b, 0, t0, a) {
		t.Error("same priority and time: a should go before b")
	}
	if !goesFirst(0, t0, b, 0, t0.Add(time.Second), a) {
		t.Error("the older gang should go first")
	}
	if !goesFirst(5, t0.Add(time.Hour), b, 0, t0, a) {
		t.Error("the higher priority should go first")
	}
	w := ident.Ref{Source: ident.SourceWorkload, Namespace: "team", Name: "a"}
	if c1, c2 := goesFirst(0, t0, a, 0, t0, w), goesFirst(0, t0, w, 0, t0, a); c1 == c2 {
		t.Errorf("gangs of two sources with one name must be ordered one way: %v, %v", c1, c2)
	}
}

// TestLifecycleReservationOf: a reservation's description is a copy, keeps
// its start while renewed with the same kind, and ends with DropReservation.
func TestLifecycleReservationOf(t *testing.T) {
	lc, clk, _ := newTestLifecycle()
	if _, ok := lc.ReservationOf(g1); ok {
		t.Fatal("a gang without a reservation has one")
	}
	start := clk.Now()
	plan := &planner.Plan{Slots: map[string]map[string]int{"a": {"w": 2}, "b": {"w": 1}}}
	lc.Reserve(g1, ReservationRequest{Kind: ReservationStarved, Queue: "q", Priority: 3, Plan: plan, Shapes: cpuShapes})
	r, ok := lc.ReservationOf(g1)
	if !ok || r.Kind != ReservationStarved || r.Priority != 3 || !r.Since.Equal(start) || lc.Phase(g1) != PhaseReserving {
		t.Fatalf("ReservationOf = %+v, %v", r, ok)
	}
	if !reflect.DeepEqual(r.Slots, plan.Slots) {
		t.Errorf("slots = %v, want the plan's %v", r.Slots, plan.Slots)
	}
	r.Slots["a"]["w"] = 0
	if again, _ := lc.ReservationOf(g1); again.Slots["a"]["w"] != 2 {
		t.Error("changing the description changed the reservation")
	}

	clk.Step(time.Minute)
	lc.Reserve(g1, ReservationRequest{Kind: ReservationStarved, Queue: "q", Priority: 3, Plan: plan, Shapes: cpuShapes})
	if r, _ := lc.ReservationOf(g1); !r.Since.Equal(start) {
		t.Errorf("renewed: since %v, want %v", r.Since, start)
	}
	lc.Reserve(g1, ReservationRequest{Kind: ReservationPreempting, Priority: 3, Plan: plan, Shapes: cpuShapes})
	if r, _ := lc.ReservationOf(g1); !r.Since.Equal(clk.Now()) || r.Kind != ReservationPreempting {
		t.Errorf("another kind: %+v, want one starting now", r)
	}

	v := lc.Version()
	lc.DropReservation(g1)
	if _, ok := lc.ReservationOf(g1); ok || lc.Phase(g1) != PhaseIdle || lc.HoldsAnywhere() {
		t.Error("DropReservation left the reservation or its holds")
	}
	if lc.Version() != v+1 {
		t.Error("dropping a reservation is a capacity change")
	}
	lc.DropReservation(g1) // without one: nothing happens
	if lc.Version() != v+1 {
		t.Error("dropping no reservation changed the version")
	}
}

// TestLifecycleReservationsListed: the reserving gangs, in name order, and
// those holding room on a node.
func TestLifecycleReservationsListed(t *testing.T) {
	lc, _, _ := newTestLifecycle()
	b := ident.Ref{Namespace: "ns", Name: "b"}
	a := ident.Ref{Namespace: "ns", Name: "a"}
	onX := &planner.Plan{Slots: map[string]map[string]int{"x": {"w": 1}}}
	onXY := &planner.Plan{Slots: map[string]map[string]int{"x": {"w": 1}, "y": {"w": 1}}}
	lc.Reserve(b, ReservationRequest{Kind: ReservationMoved, Plan: onXY, Shapes: cpuShapes})
	lc.Reserve(a, ReservationRequest{Kind: ReservationPreempting, Plan: onX, Shapes: cpuShapes})
	lc.CommitPlan(g1, onXY, cpuShapes, time.Minute) // a plan is no reservation
	if got := lc.Reservations(); !reflect.DeepEqual(got, []ident.Ref{a, b}) {
		t.Errorf("Reservations = %v, want a, b", got)
	}
	if got := lc.ReservationsOn("x"); !reflect.DeepEqual(got, []ident.Ref{a, b}) {
		t.Errorf("ReservationsOn(x) = %v, want a, b", got)
	}
	if got := lc.ReservationsOn("y"); !reflect.DeepEqual(got, []ident.Ref{b}) {
		t.Errorf("ReservationsOn(y) = %v, want b", got)
	}
	// A reservation replaces the gang's plan and its holds.
	lc.Reserve(g1, ReservationRequest{Kind: ReservationPreempting, Plan: onX, Shapes: cpuShapes})
	if lc.Phase(g1) != PhaseReserving {
		t.Errorf("phase %s, want Reserving", lc.Phase(g1))
	}
	if got := lc.ReservationsOn("y"); !reflect.DeepEqual(got, []ident.Ref{b}) {
		t.Errorf("ReservationsOn(y) = %v: the plan's hold on y outlived it", got)
	}
	if _, pods := lc.Held("y", ident.Ref{}, 0); pods != 1 {
		t.Errorf("held on y = %d pods, want b's one", pods)
	}
}
