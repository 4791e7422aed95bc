package lifecycle

import (
	"reflect"
	"sort"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
)

// TestLifecycleMemberQueries: what the lifecycle says of a gang's members as
// they are reserved, bound and released.
func TestLifecycleMemberQueries(t *testing.T) {
	lc, _, _ := newTestLifecycle()
	if !lc.Untouched(g1) || lc.Placed(g1) != 0 {
		t.Fatal("a gang without members or plan is untouched")
	}
	lc.ObserveMember(g1, "pending", "")
	lc.ObserveMember(g1, "bound", "c")
	lc.CommitPlan(g1, twoNodePlan(), cpuShapes, time.Minute)
	lc.MemberReserved(g1, "r1", "a", "w")
	lc.MemberReserved(g1, "r2", "z", "other") // off the plan: takes no slot

	if lc.Untouched(g1) {
		t.Error("a planned gang is not untouched")
	}
	if got := lc.Placed(g1); got != 3 {
		t.Errorf("Placed = %d, want 3 (one bound, two reserved)", got)
	}
	for uid, want := range map[types.UID]bool{"pending": false, "bound": true, "r1": true, "r2": true, "unknown": false} {
		if got := lc.IsPlaced(g1, uid); got != want {
			t.Errorf("IsPlaced(%s) = %v, want %v", uid, got, want)
		}
	}
	if got := sorted(lc.PlacedUIDs(g1).UnsortedList()); !reflect.DeepEqual(got, []string{"bound", "r1", "r2"}) {
		t.Errorf("PlacedUIDs = %v", got)
	}
	if got := lc.PlacedShapes(g1); !reflect.DeepEqual(got, map[string]int{"": 1, "w": 1, "other": 1}) {
		t.Errorf("PlacedShapes = %v, want the bound member's unknown shape, w and other", got)
	}
	nodes := lc.PlacedNodes(g1)
	sort.Strings(nodes)
	if !reflect.DeepEqual(nodes, []string{"a", "c", "z"}) {
		t.Errorf("PlacedNodes = %v", nodes)
	}
	if got := lc.Reserved(g1); !reflect.DeepEqual(got, []types.UID{"r1", "r2"}) {
		t.Errorf("Reserved = %v, want the reserved members in order", got)
	}
	// The off-plan member left the plan's slots alone.
	if held, pods := lc.Held("a", ident.Ref{}, 0); pods != 1 || held == nil {
		t.Errorf("held on a = %v/%d, want one open slot", held, pods)
	}
	if lc.Placed(ident.Ref{Name: "other"}) != 0 || lc.Reserved(ident.Ref{Name: "other"}) != nil || lc.PlacedNodes(ident.Ref{Name: "other"}) != nil {
		t.Error("an unknown gang has members")
	}
}

func sorted(uids []types.UID) []string {
	out := make([]string, len(uids))
	for i, u := range uids {
		out[i] = string(u)
	}
	sort.Strings(out)
	return out
}

// TestLifecycleReservedTwice: a member reserved again, or bound, keeps its
// one slot.
func TestLifecycleReservedTwice(t *testing.T) {
	lc, _, _ := newTestLifecycle()
	lc.CommitPlan(g1, twoNodePlan(), cpuShapes, time.Minute)
	lc.MemberReserved(g1, "u1", "a", "w")
	lc.MemberReserved(g1, "u1", "a", "w")
	lc.ObserveMember(g1, "u1", "a")
	lc.MemberReserved(g1, "u1", "a", "w")
	if _, pods := lc.Held("a", ident.Ref{}, 0); pods != 1 {
		t.Errorf("open slots on a = %d, want 1 (the member took one)", pods)
	}
	if lc.Placed(g1) != 1 {
		t.Errorf("Placed = %d, want 1", lc.Placed(g1))
	}
	// A bound member is not unreserved.
	lc.MemberUnreserved(g1, "u1", "m1")
	if !lc.IsPlaced(g1, "u1") || lc.Phase(g1) != PhasePlanned {
		t.Error("unreserving a bound member changed the gang")
	}
}

// TestLifecycleMemberDeletedCounts: deleting a bound member is a capacity
// change; deleting a pending one is not, and ends no plan.
func TestLifecycleMemberDeletedCounts(t *testing.T) {
	lc, _, rec := newTestLifecycle()
	lc.ObserveMember(g1, "pending", "")
	lc.ObserveMember(g1, "bound", "a")
	v := lc.Version()
	lc.MemberDeleted(g1, "pending")
	if lc.Version() != v {
		t.Error("a pending member's deletion changed the capacity version")
	}
	lc.MemberDeleted(g1, "bound")
	if lc.Version() != v+1 {
		t.Errorf("version %d after a bound member's deletion, want %d", lc.Version(), v+1)
	}
	lc.MemberDeleted(g1, "bound")
	lc.MemberDeleted(ident.Ref{Name: "unknown"}, "x")
	if rec.count() != 0 || lc.Placed(g1) != 0 {
		t.Errorf("teardowns %d, placed %d; want none", rec.count(), lc.Placed(g1))
	}
	// With a plan, a pending member's deletion leaves it alone.
	lc.ObserveMember(g1, "p2", "")
	lc.CommitPlan(g1, twoNodePlan(), cpuShapes, time.Minute)
	lc.MemberDeleted(g1, "p2")
	if rec.count() != 0 || lc.Phase(g1) != PhasePlanned {
		t.Errorf("teardowns %d, phase %s after a pending member left; want the plan kept", rec.count(), lc.Phase(g1))
	}
}

// TestLifecycleForget: Forget drops a gang and what it holds; ForgetIfEmpty
// only a gang with nothing left.
func TestLifecycleForget(t *testing.T) {
	lc, _, _ := newTestLifecycle()
	other := ident.Ref{Namespace: "ns", Name: "other"}
	lc.ObserveMember(other, "u1", "")
	if lc.Tracked() != 2 || !lc.Tracks(g1) || !lc.Tracks(other) {
		t.Fatalf("tracked %d", lc.Tracked())
	}
	lc.ForgetIfEmpty(other)
	if !lc.Tracks(other) {
		t.Fatal("ForgetIfEmpty dropped a gang with a member")
	}
	lc.MemberDeleted(other, "u1")
	lc.ForgetIfEmpty(other)
	if lc.Tracks(other) {
		t.Fatal("ForgetIfEmpty kept a gang with nothing left")
	}

	lc.CommitPlan(g1, twoNodePlan(), cpuShapes, time.Minute)
	lc.ForgetIfEmpty(g1)
	if !lc.Tracks(g1) {
		t.Fatal("ForgetIfEmpty dropped a gang holding a plan")
	}
	v := lc.Version()
	lc.Forget(g1)
	if lc.Tracks(g1) || lc.HoldsAnywhere() || lc.Tracked() != 0 {
		t.Fatalf("after Forget: tracks %v, holds %v", lc.Tracks(g1), lc.HoldsAnywhere())
	}
	if lc.Version() != v+1 {
		t.Error("forgetting a gang is a capacity change")
	}
	if lc.Phase(g1) != PhaseIdle || lc.Remaining(g1) != 0 {
		t.Error("a forgotten gang is idle")
	}
	lc.Forget(g1) // twice is harmless
}

// TestLifecycleNextSlotAndRemaining: steering follows the plan's nodes by
// name; a gang without a plan is not steered.
func TestLifecycleNextSlotAndRemaining(t *testing.T) {
	lc, clk, _ := newTestLifecycle()
	if node, live := lc.NextSlot(g1, "w"); node != "" || live {
		t.Errorf("no plan: NextSlot = %q, %v", node, live)
	}
	plan := &planner.Plan{Slots: map[string]map[string]int{"z": {"w": 1}, "m": {"w": 1, "x": 1}}}
	lc.CommitPlan(g1, plan, cpuShapes, time.Minute)
	for _, tt := range []struct {
		shape, want string
	}{{"w", "m"}, {"x", "m"}, {"none", ""}} {
		if node, live := lc.NextSlot(g1, tt.shape); node != tt.want || !live {
			t.Errorf("NextSlot(%s) = %q, %v, want %q, live", tt.shape, node, live, tt.want)
		}
	}
	clk.Step(20 * time.Second)
	if got := lc.Remaining(g1); got != 40*time.Second {
		t.Errorf("Remaining = %v, want 40s", got)
	}
}
