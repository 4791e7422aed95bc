package lifecycle

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
)

// TestLifecycleGrowthPlan: a plan made for a gang already at its quorum (a
// sub-group growing a started gang) goes through only when every planned
// member is placed.
func TestLifecycleGrowthPlan(t *testing.T) {
	lc, _, _ := newTestLifecycle()
	for _, uid := range []string{"b1", "b2", "b3"} {
		lc.ObserveMember(g1, types.UID(uid), "c")
	}
	if reached, first, _ := lc.Quorum(g1, 3); !reached || !first || lc.Phase(g1) != PhaseStarted {
		t.Fatal("three bound members of a gang of three: started")
	}
	grow := &planner.Plan{Slots: map[string]map[string]int{"a": {"w": 2}}}
	lc.CommitPlan(g1, grow, cpuShapes, time.Minute)
	lc.MemberReserved(g1, "g1", "a", "w")
	if reached, _, placed := lc.Quorum(g1, 3); reached || placed != 4 {
		t.Errorf("half a growth plan placed: reached %v with %d, want it held back", reached, placed)
	}
	lc.MemberReserved(g1, "g2", "a", "w")
	if reached, first, placed := lc.Quorum(g1, 3); !reached || !first || placed != 5 {
		t.Errorf("the whole growth plan placed: Quorum = %v %v %d", reached, first, placed)
	}
	if lc.HoldsAnywhere() {
		t.Error("a started gang holds nothing")
	}
}

// TestLifecycleStartedBelowQuorum: a started gang that loses members below
// its quorum is no longer started.
func TestLifecycleStartedBelowQuorum(t *testing.T) {
	lc, _, _ := newTestLifecycle()
	for _, uid := range []string{"b1", "b2", "b3"} {
		lc.ObserveMember(g1, types.UID(uid), "c")
	}
	lc.Quorum(g1, 3)
	lc.MemberDeleted(g1, "b3")
	if reached, first, placed := lc.Quorum(g1, 3); reached || first || placed != 2 {
		t.Errorf("Quorum = %v %v %d, want not reached with 2", reached, first, placed)
	}
	if lc.Phase(g1) != PhaseIdle {
		t.Errorf("phase %s, want Idle", lc.Phase(g1))
	}
}

// TestLifecycleRelease: Release ends a plan (heard by the listener) or a
// reservation (not heard: no member was reserved), and says whether there
// was one.
func TestLifecycleRelease(t *testing.T) {
	lc, _, rec := newTestLifecycle()
	if lc.Release(g1, ReasonPlanBroken, "nothing") {
		t.Error("an idle gang released something")
	}
	lc.CommitPlan(g1, twoNodePlan(), cpuShapes, time.Minute)
	lc.MemberReserved(g1, "u1", "a", "w")
	if !lc.Release(g1, ReasonGroupDeleted, "gone") {
		t.Fatal("a plan was not released")
	}
	if rec.count() != 1 || rec.released[0].reason != ReasonGroupDeleted || len(rec.released[0].reserved) != 1 {
		t.Fatalf("heard %+v, want one GroupDeleted teardown with its reserved member", rec.released)
	}
	if lc.Placed(g1) != 0 || lc.HoldsAnywhere() || lc.Phase(g1) != PhaseIdle {
		t.Error("a released plan left members placed or capacity held")
	}
	other := ident.Ref{Namespace: "ns", Name: "other"}
	lc.Reserve(other, ReservationRequest{Kind: ReservationPreempting, Plan: twoNodePlan(), Shapes: cpuShapes})
	if !lc.Release(other, ReasonPlanBroken, "x") || rec.count() != 1 {
		t.Errorf("releasing a reservation: heard %d teardowns, want still 1", rec.count())
	}
	if _, ok := lc.ReservationOf(other); ok {
		t.Error("the released reservation remains")
	}
}

// TestLifecycleCommitPlanReplaces: a new plan replaces the old one's holds.
func TestLifecycleCommitPlanReplaces(t *testing.T) {
	lc, _, _ := newTestLifecycle()
	lc.CommitPlan(g1, twoNodePlan(), cpuShapes, time.Minute)
	lc.CommitPlan(g1, &planner.Plan{Slots: map[string]map[string]int{"c": {"w": 1}, "d": {"w": 0}}}, cpuShapes, time.Minute)
	for node, want := range map[string]int64{"a": 0, "b": 0, "c": 1, "d": 0} {
		if _, pods := lc.Held(node, ident.Ref{}, 0); pods != want {
			t.Errorf("held on %s = %d, want %d", node, pods, want)
		}
	}
	if node, _ := lc.NextSlot(g1, "w"); node != "c" {
		t.Errorf("NextSlot = %q, want c (d has no open slot)", node)
	}
}
