package lifecycle

import (
	"math"
	"reflect"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// recorder is a Listener that records teardowns.
type recorder struct {
	mu       sync.Mutex
	released []release
}

func (r *recorder) Released(ref ident.Ref, reserved []types.UID, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.released = append(r.released, release{ref: ref, reserved: reserved, reason: reason, message: message})
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.released)
}

var g1 = ident.Ref{Namespace: "ns", Name: "g"}

func twoNodePlan() *planner.Plan {
	return &planner.Plan{Slots: map[string]map[string]int{"a": {"w": 2}, "b": {"w": 1}}}
}

func newTestLifecycle() (*Lifecycle, *testingclock.FakeClock, *recorder) {
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	rec := &recorder{}
	lc := NewLifecycle(clk, rec)
	lc.SetSpec(g1, 3, time.Minute)
	return lc, clk, rec
}

var cpuShapes = map[string]resources.List{"w": {v1.ResourceCPU: 1000}}

func TestLifecycleHoldsAndSteering(t *testing.T) {
	lc, _, _ := newTestLifecycle()
	lc.CommitPlan(g1, twoNodePlan(), cpuShapes, time.Minute)

	held, pods := lc.Held("a", ident.Ref{}, 0)
	if held[v1.ResourceCPU] != 2000 || pods != 2 {
		t.Fatalf("held on a = %v/%d, want 2000m/2", held, pods)
	}
	if held, _ := lc.Held("a", g1, 0); held != nil {
		t.Fatalf("a gang's own holds must not block it, got %v", held)
	}
	// Members are steered to the plan's nodes in order, one slot each.
	for i, want := range []string{"a", "a", "b"} {
		node, live := lc.NextSlot(g1, "w")
		if !live || node != want {
			t.Fatalf("member %d: NextSlot = %q live=%v, want %q", i, node, live, want)
		}
		lc.MemberReserved(g1, types.UID(rune('1'+i)), node, "w")
	}
	if node, live := lc.NextSlot(g1, "w"); !live || node != "" {
		t.Fatalf("plan full: NextSlot = %q live=%v, want \"\" live", node, live)
	}
	if lc.HoldsAnywhere() {
		t.Fatal("every slot is reserved: nothing is held any more")
	}
	reached, first, placed := lc.Quorum(g1, 3)
	if !reached || !first || placed != 3 {
		t.Fatalf("Quorum = %v %v %d, want true true 3", reached, first, placed)
	}
	if _, _, placed := lc.Quorum(g1, 3); placed != 3 {
		t.Fatal("quorum is idempotent")
	}
	if _, first, _ := lc.Quorum(g1, 3); first {
		t.Fatal("first is reported once")
	}
}

// A plan ends once, with one reason, however many members are released.
func TestLifecycleTeardownOnce(t *testing.T) {
	lc, _, rec := newTestLifecycle()
	lc.CommitPlan(g1, twoNodePlan(), cpuShapes, time.Minute)
	lc.MemberReserved(g1, "u1", "a", "w")
	lc.MemberReserved(g1, "u2", "a", "w")

	lc.MemberUnreserved(g1, "u1", "m1")
	if rec.count() != 1 {
		t.Fatalf("teardowns = %d, want 1", rec.count())
	}
	r := rec.released[0]
	if r.reason != ReasonPlanBroken || len(r.reserved) != 1 || r.reserved[0] != "u2" {
		t.Fatalf("teardown %+v, want PlanBroken with the other reserved member to reject", r)
	}
	// The other member, rejected by the teardown, comes back through
	// Unreserve: no second teardown.
	lc.MemberUnreserved(g1, "u2", "m2")
	if rec.count() != 1 {
		t.Fatalf("teardowns = %d after the sibling's unreserve, want 1", rec.count())
	}
	if lc.Placed(g1) != 0 || lc.HoldsAnywhere() {
		t.Fatalf("after teardown placed=%d holds=%v", lc.Placed(g1), lc.HoldsAnywhere())
	}
	if lc.Release(g1, ReasonPlanBroken, "again") {
		t.Fatal("Release after teardown released something")
	}
}

// Released members do not count toward the quorum while they wait for the
// framework's Unreserve.
func TestLifecycleReleasedMembersDoNotCount(t *testing.T) {
	lc, _, _ := newTestLifecycle()
	lc.CommitPlan(g1, twoNodePlan(), cpuShapes, time.Minute)
	lc.MemberReserved(g1, "u1", "a", "w")
	lc.MemberReserved(g1, "u2", "a", "w")
	lc.Release(g1, ReasonPlanBroken, "x")
	lc.MemberReserved(g1, "u3", "b", "w")
	if reached, _, placed := lc.Quorum(g1, 3); reached || placed != 1 {
		t.Fatalf("Quorum = %v with %d placed, want false with 1", reached, placed)
	}
}

// The plan's timer, on the injected clock, ends a plan that ran out of time.
func TestLifecycleExpiry(t *testing.T) {
	lc, clk, rec := newTestLifecycle()
	lc.CommitPlan(g1, twoNodePlan(), cpuShapes, time.Minute)
	lc.MemberReserved(g1, "u1", "a", "w")
	if got := lc.Remaining(g1); got != time.Minute {
		t.Fatalf("Remaining = %v", got)
	}
	clk.Step(time.Minute)
	deadline := time.Now().Add(5 * time.Second)
	for rec.count() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if rec.count() != 1 || rec.released[0].reason != ReasonTimeout {
		t.Fatalf("teardowns %+v, want one ScheduleTimeout", rec.released)
	}
	if lc.Phase(g1) != PhaseIdle || lc.HoldsAnywhere() {
		t.Fatalf("after expiry phase %s holds %v", lc.Phase(g1), lc.HoldsAnywhere())
	}
	// The member timed out in Permit at the same moment: no second teardown.
	lc.MemberUnreserved(g1, "u1", "m1")
	if rec.count() != 1 {
		t.Fatalf("teardowns = %d, want 1", rec.count())
	}
}

// A member lost after the plan was made (its pod deleted) breaks the plan;
// a pending member leaving does not.
func TestLifecycleMemberDeleted(t *testing.T) {
	lc, _, rec := newTestLifecycle()
	lc.ObserveMember(g1, "p1", "")
	lc.CommitPlan(g1, twoNodePlan(), cpuShapes, time.Minute)
	lc.MemberDeleted(g1, "p1")
	if rec.count() != 0 {
		t.Fatal("a pending member leaving must not break the plan")
	}
	lc.MemberReserved(g1, "u1", "a", "w")
	lc.MemberDeleted(g1, "u1")
	if rec.count() != 1 || rec.released[0].reason != ReasonPlanBroken {
		t.Fatalf("teardowns %+v, want PlanBroken", rec.released)
	}
}

func TestLifecycleFailureCache(t *testing.T) {
	lc, clk, _ := newTestLifecycle()
	lc.Fail(g1, "p1", "no room")
	if reason, ok := lc.Failed(g1); !ok || reason != "no room" {
		t.Fatalf("Failed = %q %v", reason, ok)
	}
	since := lc.WaitingSince(g1)
	clk.Step(time.Second)
	lc.Changed()
	if _, ok := lc.Failed(g1); ok {
		t.Fatal("failure survived a capacity change")
	}
	lc.Fail(g1, "p1", "still no room")
	if lc.WaitingSince(g1) != since {
		t.Fatal("waiting counts from the first failure")
	}
	lc.Retry(g1)
	if _, ok := lc.Failed(g1); ok {
		t.Fatal("Retry must void the gang's cached failure")
	}
	lc.CommitPlan(g1, twoNodePlan(), cpuShapes, time.Minute)
	if !lc.WaitingSince(g1).IsZero() {
		t.Fatal("a plan ends the wait")
	}
}

// Reservations hold capacity against gangs of equal or lower priority only,
// and a queue's one starvation reservation goes to the gang first in its
// order.
func TestLifecycleReservations(t *testing.T) {
	lc, clk, _ := newTestLifecycle()
	older := ident.Ref{Namespace: "ns", Name: "older"}
	t0 := clk.Now()
	plan := &planner.Plan{Slots: map[string]map[string]int{"a": {"w": 1}}}
	granted, _ := lc.Reserve(g1, ReservationRequest{Kind: ReservationStarved, Queue: "q", Priority: 10, Created: t0.Add(time.Second), Plan: plan, Shapes: cpuShapes})
	if !granted {
		t.Fatal("first reservation of the queue not granted")
	}
	if held, _ := lc.Held("a", ident.Ref{}, 10); held[v1.ResourceCPU] != 1000 {
		t.Fatalf("equal priority must be held off, held %v", held)
	}
	if held, _ := lc.Held("a", ident.Ref{}, 11); held != nil {
		t.Fatalf("higher priority passes a reservation, held %v", held)
	}
	if held, _ := lc.Held("a", ident.Ref{}, math.MinInt32); held == nil {
		t.Fatal("MinInt32 sees every hold")
	}
	// A newer gang of the same queue and priority waits behind it.
	newer := ident.Ref{Namespace: "ns", Name: "newer"}
	if granted, _ := lc.Reserve(newer, ReservationRequest{Kind: ReservationStarved, Queue: "q", Priority: 10, Created: t0.Add(2 * time.Second), Plan: plan, Shapes: cpuShapes}); granted {
		t.Fatal("a gang behind the holder got the queue's reservation")
	}
	// An older one displaces it.
	granted, displaced := lc.Reserve(older, ReservationRequest{Kind: ReservationStarved, Queue: "q", Priority: 10, Created: t0, Plan: plan, Shapes: cpuShapes})
	if !granted || displaced != g1 {
		t.Fatalf("older gang: granted %v displaced %v", granted, displaced)
	}
	// A pod leaving node a concerns the reservation on it, not others.
	if on, off := lc.ReservationsOn("a"), lc.ReservationsOn("b"); !reflect.DeepEqual(on, []ident.Ref{older}) || len(off) != 0 {
		t.Fatalf("reservations on a %v, on b %v; want [%v] and none", on, off, older)
	}
	if _, ok := lc.ReservationOf(g1); ok {
		t.Fatal("the displaced gang still holds a reservation")
	}
	// Another queue has its own.
	other := ident.Ref{Namespace: "ns", Name: "other"}
	if granted, _ := lc.Reserve(other, ReservationRequest{Kind: ReservationStarved, Queue: "q2", Priority: 0, Created: t0, Plan: plan, Shapes: cpuShapes}); !granted {
		t.Fatal("a second queue's reservation refused")
	}
	// A plan replaces the reservation.
	lc.CommitPlan(older, plan, cpuShapes, time.Minute)
	if _, ok := lc.ReservationOf(older); ok || lc.Phase(older) != PhasePlanned {
		t.Fatal("CommitPlan must replace the reservation")
	}
	// A TTL ends a preemption's reservation.
	lc.Reserve(g1, ReservationRequest{Kind: ReservationPreempting, Priority: 5, Plan: plan, Shapes: cpuShapes, TTL: time.Minute})
	clk.Step(time.Minute)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, ok := lc.ReservationOf(g1); !ok {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the preemption reservation outlived its TTL")
}

// A gang partly bound without a plan for longer than its timeout is
// stranded; completing it or planning it is not.
func TestLifecycleStranded(t *testing.T) {
	lc, clk, _ := newTestLifecycle()
	lc.ObserveMember(g1, "b1", "n1")
	lc.ObserveMember(g1, "p1", "")
	lc.ObserveMember(g1, "p2", "")
	if got := lc.Stranded(time.Hour); len(got) != 0 {
		t.Fatalf("stranded at once: %v", got)
	}
	clk.Step(time.Minute)
	if got := lc.Stranded(time.Hour); len(got) != 0 {
		t.Fatalf("a partial gang not tried yet is stranded: %v", got)
	}
	lc.Fail(g1, "p1", "no room for the rest")
	if got := lc.Stranded(time.Hour); len(got) != 1 || got[0] != g1 {
		t.Fatalf("Stranded = %v, want [%v]", got, g1)
	}
	if got := lc.BoundMembers(g1); len(got) != 1 || got[0] != "b1" {
		t.Fatalf("BoundMembers = %v", got)
	}
	lc.ObserveMember(g1, "p1", "n2")
	lc.ObserveMember(g1, "p2", "n3")
	if got := lc.Stranded(time.Hour); len(got) != 0 {
		t.Fatalf("a complete gang is stranded: %v", got)
	}
}

// pauseRecorder also hears resumes and freed holds.
type pauseRecorder struct {
	recorder
	resumed []ident.Ref
	freed   int
}

func (r *pauseRecorder) Resumed(ref ident.Ref) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resumed = append(r.resumed, ref)
}

func (r *pauseRecorder) HoldsFreed() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.freed++
}

func (r *pauseRecorder) state() (resumed, freed int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.resumed), r.freed
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLifecyclePauseAfterTimeout: a plan that ends at its timeout pauses the
// gang (it holds nothing and is not planned again) for half the timeout, then
// twice as long after each further timeout in a row; the listener hears when
// a pause ends; a gang that starts forgets its timeouts.
func TestLifecyclePauseAfterTimeout(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	rec := &pauseRecorder{}
	lc := NewLifecycle(clk, rec)
	lc.SetSpec(g1, 3, 10*time.Second)

	expire := func(n int) {
		t.Helper()
		lc.CommitPlan(g1, twoNodePlan(), cpuShapes, 10*time.Second)
		lc.MemberReserved(g1, "u1", "a", "w")
		clk.Step(10 * time.Second)
		waitFor(t, "the plan's timeout", func() bool { return rec.count() == n })
		lc.MemberUnreserved(g1, "u1", "m1")
	}
	for i, want := range []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second} {
		expire(i + 1)
		until, paused := lc.Paused(g1)
		if !paused || until.Sub(clk.Now()) != want {
			t.Fatalf("timeout %d: paused %v for %v, want %v", i+1, paused, until.Sub(clk.Now()), want)
		}
		if lc.HoldsAnywhere() {
			t.Fatalf("timeout %d: a paused gang holds capacity", i+1)
		}
		if stalled := lc.Stalled(); len(stalled) != 1 || stalled[0] != g1 {
			t.Fatalf("timeout %d: Stalled = %v, want the paused gang", i+1, stalled)
		}
		clk.Step(want - time.Millisecond)
		if _, paused := lc.Paused(g1); !paused {
			t.Fatalf("timeout %d: pause ended early", i+1)
		}
		clk.Step(time.Millisecond)
		waitFor(t, "the pause's end", func() bool { r, _ := rec.state(); return r == i+1 })
		if _, paused := lc.Paused(g1); paused {
			t.Fatalf("timeout %d: still paused after %v", i+1, want)
		}
	}
	if msg := rec.released[0].message; msg != "only 1 of 3 members were placed within 10s; all members released; planning again after 5s (holding nothing meanwhile)" {
		t.Fatalf("timeout message %q", msg)
	}
	// Starting resets the count: the next timeout pauses for half the timeout again.
	lc.CommitPlan(g1, twoNodePlan(), cpuShapes, 10*time.Second)
	for i, node := range []string{"a", "a", "b"} {
		lc.MemberReserved(g1, types.UID(rune('1'+i)), node, "w")
	}
	if reached, _, _ := lc.Quorum(g1, 3); !reached {
		t.Fatal("quorum not reached")
	}
	for i := range 3 {
		lc.MemberUnreserved(g1, types.UID(rune('1'+i)), "m")
	}
	lc.Quorum(g1, 3)
	expire(4)
	if until, _ := lc.Paused(g1); until.Sub(clk.Now()) != 5*time.Second {
		t.Fatalf("after a start the pause is %v, want 5s", until.Sub(clk.Now()))
	}
	if got := TimeoutPause(time.Hour, 1); got != maxTimeoutPause {
		t.Fatalf("TimeoutPause(1h, 1) = %v, want the cap %v", got, maxTimeoutPause)
	}
	if got := TimeoutPause(time.Second, 1); got != minTimeoutPause {
		t.Fatalf("TimeoutPause(1s, 1) = %v, want the floor %v", got, minTimeoutPause)
	}
}

// TestLifecycleHoldsFreed: the listener hears when held capacity is given up
// (a teardown, an expired or dropped reservation), not when members take
// their slots.
func TestLifecycleHoldsFreed(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	rec := &pauseRecorder{}
	lc := NewLifecycle(clk, rec)
	lc.SetSpec(g1, 3, time.Minute)
	freed := func() int { _, f := rec.state(); return f }

	lc.CommitPlan(g1, twoNodePlan(), cpuShapes, time.Minute)
	for i, node := range []string{"a", "a", "b"} {
		lc.MemberReserved(g1, types.UID(rune('1'+i)), node, "w")
	}
	lc.Quorum(g1, 3)
	if freed() != 0 {
		t.Fatalf("members taking every slot freed capacity %d times", freed())
	}

	g2 := ident.Ref{Namespace: "ns", Name: "g2"}
	lc.SetSpec(g2, 3, time.Minute)
	lc.CommitPlan(g2, twoNodePlan(), cpuShapes, time.Minute)
	lc.MemberReserved(g2, "v1", "a", "w")
	lc.Release(g2, ReasonPlanBroken, "broken")
	if freed() != 1 {
		t.Fatalf("a teardown with open slots: freed %d times, want 1", freed())
	}

	if granted, _ := lc.Reserve(g2, ReservationRequest{Kind: ReservationStarved, Plan: twoNodePlan(), Shapes: cpuShapes}); !granted {
		t.Fatal("reservation not granted")
	}
	lc.DropReservation(g2)
	if freed() != 2 {
		t.Fatalf("a dropped reservation: freed %d times, want 2", freed())
	}
}

// TestLifecycleIncomplete: a gang's members go first (Order.Incomplete)
// from the moment its plan holds capacity, before any member is reserved
// (the plan wakes them, and the queue orders a pod when it enters), until
// its quorum is placed.
func TestLifecycleIncomplete(t *testing.T) {
	lc, _, _ := newTestLifecycle()
	if lc.Incomplete(g1) || !lc.Untouched(g1) {
		t.Fatal("a gang without a plan or placed members is untouched, not incomplete")
	}
	lc.CommitPlan(g1, twoNodePlan(), cpuShapes, time.Minute)
	if !lc.Incomplete(g1) || lc.Untouched(g1) {
		t.Fatal("a planned gang with no member reserved yet must go first, and is no longer untouched")
	}
	for i, node := range []string{"a", "a", "b"} {
		lc.MemberReserved(g1, types.UID(rune('1'+i)), node, "w")
	}
	lc.Quorum(g1, 3)
	if lc.Incomplete(g1) || lc.Untouched(g1) {
		t.Fatal("a gang with its quorum placed no longer goes first, and stays touched")
	}
}
