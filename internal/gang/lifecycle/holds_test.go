package lifecycle

import (
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
)

// TestLifecycleHeldFrom: a plan holds against every pod; a reservation
// against equal or lower priority; a starvation reservation not against a
// claimant sure to be gone before its room frees (backfill).
func TestLifecycleHeldFrom(t *testing.T) {
	lc, clk, _ := newTestLifecycle()
	now := clk.Now()
	readyBy := now.Add(time.Hour)
	starved := ident.Ref{Namespace: "ns", Name: "starved"}
	preempting := ident.Ref{Namespace: "ns", Name: "preempting"}
	onA := &planner.Plan{Slots: map[string]map[string]int{"a": {"w": 1}}}
	onB := &planner.Plan{Slots: map[string]map[string]int{"b": {"w": 1}}}
	onC := &planner.Plan{Slots: map[string]map[string]int{"c": {"w": 1}}}
	lc.CommitPlan(g1, onA, cpuShapes, time.Minute)
	lc.Reserve(starved, ReservationRequest{Kind: ReservationStarved, Queue: "q", Priority: 5, Plan: onB, Shapes: cpuShapes, ReadyBy: readyBy})
	lc.Reserve(preempting, ReservationRequest{Kind: ReservationPreempting, Priority: 5, Plan: onC, Shapes: cpuShapes, ReadyBy: readyBy})
	tests := []struct {
		name  string
		node  string
		c     Claimant
		pods  int64
		owner bool
	}{
		{name: "a plan holds against a higher priority", node: "a", c: Claimant{Priority: 100}, pods: 1},
		{name: "but not against its own gang", node: "a", c: Claimant{Ref: g1}, pods: 0},
		{name: "a reservation holds against equal priority", node: "b", c: Claimant{Priority: 5}, pods: 1},
		{name: "not against higher", node: "b", c: Claimant{Priority: 6}, pods: 0},
		{name: "not against its own gang", node: "b", c: Claimant{Ref: starved, Priority: 0}, pods: 0},
		{name: "backfill: a claimant gone by readyBy", node: "b", c: Claimant{Priority: 0, Ends: readyBy}, pods: 0},
		{name: "a claimant gone after readyBy is held off", node: "b", c: Claimant{Priority: 0, Ends: readyBy.Add(time.Second)}, pods: 1},
		{name: "a claimant without a deadline is held off", node: "b", c: Claimant{Priority: 0}, pods: 1},
		{name: "a preemption's room is no backfill", node: "c", c: Claimant{Priority: 0, Ends: now}, pods: 1},
		{name: "a node nobody holds", node: "d", c: Claimant{}, pods: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			held, pods := lc.HeldFrom(tt.node, tt.c)
			if pods != tt.pods {
				t.Errorf("HeldFrom(%s) = %v/%d pods, want %d", tt.node, held, pods, tt.pods)
			}
			if (held != nil) != (tt.pods > 0) || (held != nil && held[v1.ResourceCPU] != 1000*tt.pods) {
				t.Errorf("HeldFrom(%s) = %v, want %d× 1000m", tt.node, held, tt.pods)
			}
		})
	}
}

// TestLifecycleHeldAhead: a starving gang may claim the room of the queue's
// starvation reservations it goes before, never any other hold.
func TestLifecycleHeldAhead(t *testing.T) {
	lc, clk, _ := newTestLifecycle()
	t0 := clk.Now()
	holder := ident.Ref{Namespace: "ns", Name: "holder"}
	onA := &planner.Plan{Slots: map[string]map[string]int{"a": {"w": 2}}}
	lc.Reserve(holder, ReservationRequest{Kind: ReservationStarved, Queue: "q", Priority: 5, Created: t0, Plan: onA, Shapes: cpuShapes})
	ahead := ident.Ref{Namespace: "ns", Name: "ahead"}
	tests := []struct {
		name string
		req  ReservationRequest
		pods int64
	}{
		{name: "higher priority of the queue goes first", req: ReservationRequest{Kind: ReservationStarved, Queue: "q", Priority: 6, Created: t0}, pods: 0},
		{name: "older at equal priority goes first", req: ReservationRequest{Kind: ReservationStarved, Queue: "q", Priority: 5, Created: t0.Add(-time.Second)}, pods: 0},
		{name: "newer waits behind", req: ReservationRequest{Kind: ReservationStarved, Queue: "q", Priority: 5, Created: t0.Add(time.Second)}, pods: 2},
		{name: "another queue's gang", req: ReservationRequest{Kind: ReservationStarved, Queue: "q2", Priority: 9, Created: t0}, pods: 2},
		{name: "a preemption", req: ReservationRequest{Kind: ReservationPreempting, Queue: "q", Priority: 9, Created: t0}, pods: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, pods := lc.HeldAhead("a", tt.req, ahead); pods != tt.pods {
				t.Errorf("HeldAhead = %d pods, want %d", pods, tt.pods)
			}
		})
	}
	if _, pods := lc.HeldAhead("a", ReservationRequest{Kind: ReservationStarved, Queue: "q"}, holder); pods != 0 {
		t.Errorf("the holder's own room is held against it: %d pods", pods)
	}
}

// TestLifecycleHeldByGang: each holding gang's open slots, once across its
// nodes, and nothing once they are taken.
func TestLifecycleHeldByGang(t *testing.T) {
	lc, _, _ := newTestLifecycle()
	other := ident.Ref{Namespace: "ns", Name: "other"}
	lc.CommitPlan(g1, twoNodePlan(), cpuShapes, time.Minute)
	lc.Reserve(other, ReservationRequest{Kind: ReservationPreempting, Plan: &planner.Plan{Slots: map[string]map[string]int{"a": {"w": 1}}}, Shapes: cpuShapes})
	by := lc.HeldByGang()
	if len(by) != 2 || by[g1][v1.ResourceCPU] != 3000 || by[other][v1.ResourceCPU] != 1000 {
		t.Fatalf("HeldByGang = %v, want g 3000m and other 1000m", by)
	}
	if got := lc.HeldOf(g1); got[v1.ResourceCPU] != 3000 {
		t.Errorf("HeldOf = %v, want 3000m", got)
	}
	for i, node := range []string{"a", "a", "b"} {
		lc.MemberReserved(g1, types.UID(rune('1'+i)), node, "w")
	}
	if got := lc.HeldOf(g1); got != nil {
		t.Errorf("HeldOf = %v once every slot is taken, want nil", got)
	}
	if _, ok := lc.HeldByGang()[g1]; ok {
		t.Error("a gang whose slots are all taken is listed as holding")
	}
	if lc.HeldOf(ident.Ref{Name: "unknown"}) != nil {
		t.Error("an unknown gang holds something")
	}
}

// holdsRecorder hears which gangs' holds changed.
type holdsRecorder struct {
	recorder
	mu      sync.Mutex
	changed map[ident.Ref]int
}

func (h *holdsRecorder) HoldsChanged(ref ident.Ref) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.changed[ref]++
}

func (h *holdsRecorder) take() map[ident.Ref]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.changed
	h.changed = map[ident.Ref]int{}
	return out
}

// TestLifecycleHoldsChanged: the HoldsListener hears of a gang whose holds
// changed — a plan, a slot taken, a teardown — once per call.
func TestLifecycleHoldsChanged(t *testing.T) {
	h := &holdsRecorder{changed: map[ident.Ref]int{}}
	lc := NewLifecycle(testingclock.NewFakeClock(time.Unix(1000, 0)), h)
	lc.SetSpec(g1, 3, time.Minute)
	lc.CommitPlan(g1, twoNodePlan(), cpuShapes, time.Minute)
	if got := h.take(); got[g1] != 1 {
		t.Errorf("after CommitPlan heard %v, want g1 once", got)
	}
	lc.MemberReserved(g1, "u1", "b", "w")
	if got := h.take(); got[g1] != 1 {
		t.Errorf("after a slot was taken heard %v, want g1 once", got)
	}
	lc.ObserveMember(g1, "p", "")
	if got := h.take(); len(got) != 0 {
		t.Errorf("a pending member changed no hold, heard %v", got)
	}
	lc.Release(g1, ReasonPlanBroken, "test")
	if got := h.take(); got[g1] != 1 {
		t.Errorf("after a teardown heard %v, want g1 once", got)
	}
}
