package status

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pgfake "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned/fake"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/lifecycle"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
	"github.com/phalanx-sched/phalanx/internal/queue"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// heldOnly hands the lifecycle's hold changes to the writer, as the runtime's
// gang.HoldsListener does, and ignores teardowns.
type heldOnly struct {
	w  *Writer
	lc **lifecycle.Lifecycle
}

func (heldOnly) Released(ident.Ref, []types.UID, string, string) {}
func (l heldOnly) HoldsChanged(ref ident.Ref) {
	l.w.SetHeld(ref, (*l.lc).HeldOf(ref), (*l.lc).ExpectedStart(ref))
}

// TestHeldAnnotation: what a gang's plan or reservation holds is written on
// its PodGroup as the held annotation (a merge patch of the main resource,
// not of status): a committed plan's open slots, less a member reserved
// since (changes made before the writer runs collapse into one patch); the
// annotation is removed when the plan is released, set again for a
// reservation and removed when it is dropped. A standby writes nothing until
// it leads.
func TestHeldAnnotation(t *testing.T) {
	ctx := context.Background()
	ref := ident.Ref{Namespace: "default", Name: "g"}
	pgClient := pgfake.NewSimpleClientset(&pgv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "g", UID: "uid-g"}})
	w := NewWriter(pgClient, k8sfake.NewSimpleClientset(), nil, nil)
	w.HeldDelay = 0
	leading := true
	w.Leading = func() bool { return leading }
	var lc *lifecycle.Lifecycle
	lc = lifecycle.NewLifecycle(testingclock.NewFakeClock(time.Now()), heldOnly{w, &lc})

	shapes := map[string]resources.List{"s": {"cpu": 4000, "nvidia.com/gpu": 2}}
	plan := &planner.Plan{Slots: map[string]map[string]int{"n1": {"s": 2}, "n2": {"s": 1}}}

	// annotation processes what is queued and returns the PodGroup's
	// annotation and the number of patches of its main resource since.
	seen := 0
	annotation := func(t *testing.T) (string, int) {
		t.Helper()
		for w.queue.Len() > 0 {
			w.processNext(ctx)
		}
		patches := 0
		for _, a := range pgClient.Actions() {
			if p, ok := a.(clienttesting.PatchAction); ok && p.GetSubresource() == "" {
				patches++
			}
		}
		n := patches - seen
		seen = patches
		pg, err := pgClient.SchedulingV1alpha1().PodGroups("default").Get(ctx, "g", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v, ok := pg.Annotations[queue.HeldAnnotation]
		if !ok {
			return "<none>", n
		}
		return v, n
	}
	step := func(t *testing.T, want string, wantPatches int) {
		t.Helper()
		if got, n := annotation(t); got != want || n != wantPatches {
			t.Fatalf("annotation %s after %d patches, want %s after %d", got, n, want, wantPatches)
		}
	}

	lc.CommitPlan(ref, plan, shapes, time.Minute)
	lc.MemberReserved(ref, "uid-0", "n1", "s")
	step(t, `{"cpu":"8","nvidia.com/gpu":"4"}`, 1)

	lc.Release(ref, lifecycle.ReasonPlanBroken, "test")
	step(t, "<none>", 1)

	lc.Reserve(ref, lifecycle.ReservationRequest{Kind: lifecycle.ReservationPreempting, Plan: plan, Shapes: shapes})
	step(t, `{"cpu":"12","nvidia.com/gpu":"6"}`, 1)
	lc.Reserve(ref, lifecycle.ReservationRequest{Kind: lifecycle.ReservationPreempting, Plan: plan, Shapes: shapes})
	step(t, `{"cpu":"12","nvidia.com/gpu":"6"}`, 0) // the same holds: nothing to write

	lc.DropReservation(ref)
	step(t, "<none>", 1)

	// A starvation reservation publishes its expected start beside what it
	// holds, and a new expected start on the same nodes is written too.
	start := func(t *testing.T) string {
		t.Helper()
		pg, err := pgClient.SchedulingV1alpha1().PodGroups("default").Get(ctx, "g", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := pg.Annotations[phalanxv1alpha1.ExpectedStartAnnotation]; ok {
			return v
		}
		return "<none>"
	}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	lc.Reserve(ref, lifecycle.ReservationRequest{Kind: lifecycle.ReservationStarved, Plan: plan, Shapes: shapes, ReadyBy: at})
	step(t, `{"cpu":"12","nvidia.com/gpu":"6"}`, 1)
	if got := start(t); got != "2026-12-01T10:00:00Z" {
		t.Fatalf("expected start %s, want 2026-12-01T10:00:00Z", got)
	}
	lc.Reserve(ref, lifecycle.ReservationRequest{Kind: lifecycle.ReservationStarved, Plan: plan, Shapes: shapes, ReadyBy: at.Add(time.Hour)})
	step(t, `{"cpu":"12","nvidia.com/gpu":"6"}`, 1)
	if got := start(t); got != "2026-12-01T11:00:00Z" {
		t.Fatalf("expected start %s after it slipped, want 2026-12-01T11:00:00Z", got)
	}
	lc.DropReservation(ref)
	step(t, "<none>", 1)
	if got := start(t); got != "<none>" {
		t.Fatalf("expected start %s after the reservation ended, want none", got)
	}

	leading = false
	lc.CommitPlan(ref, plan, shapes, time.Minute)
	step(t, "<none>", 0)
	leading = true
	w.RequeueAll()
	step(t, `{"cpu":"12","nvidia.com/gpu":"6"}`, 1)

	// The quorum consumes the plan: nothing is held any more.
	lc.Quorum(ref, 0)
	step(t, "<none>", 1)
	if len(w.held) != 0 {
		t.Errorf("%d gangs' held annotations still tracked, want none", len(w.held))
	}

	// A plan that reaches its quorum before its annotation is written
	// costs no patch at all (the common case of a gang that fits).
	lc.CommitPlan(ref, plan, shapes, time.Minute)
	lc.Quorum(ref, 0)
	step(t, "<none>", 0)
	if len(w.held) != 0 {
		t.Errorf("%d gangs' held annotations still tracked, want none", len(w.held))
	}
}

// TestHeldAnnotationEndsDuringItsWrite: a hold that ends while its first
// patch is on its way is patched away after it, not forgotten (the
// annotation would stay on the PodGroup, and the controller would count the
// capacity in Queue.status forever).
func TestHeldAnnotationEndsDuringItsWrite(t *testing.T) {
	ctx := context.Background()
	ref := ident.Ref{Namespace: "default", Name: "g"}
	pgClient := pgfake.NewSimpleClientset(&pgv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "g", UID: "uid-g"}})
	w := NewWriter(pgClient, k8sfake.NewSimpleClientset(), nil, nil)
	w.HeldDelay = 0
	w.Leading = func() bool { return true }
	ended := false
	pgClient.PrependReactor("patch", "podgroups", func(clienttesting.Action) (bool, runtime.Object, error) {
		if !ended {
			ended = true
			w.SetHeld(ref, nil, time.Time{}) // the gang reached its quorum meanwhile
		}
		return false, nil, nil
	})
	w.SetHeld(ref, resources.List{"cpu": 500}, time.Time{})
	for w.queue.Len() > 0 {
		w.processNext(ctx)
	}
	pg, err := pgClient.SchedulingV1alpha1().PodGroups("default").Get(ctx, "g", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := pg.Annotations[queue.HeldAnnotation]; ok || !ended {
		t.Fatalf("held annotation %q left on the PodGroup after the hold ended (ended during the write: %v)", v, ended)
	}
}
