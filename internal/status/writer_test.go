package status

import (
	"context"
	"k8s.io/apimachinery/pkg/api/meta"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pgfake "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned/fake"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/phalanx-sched/phalanx/internal/gang"
	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
)

type change struct {
	old, new *Condition
}

// TestStatusWriterSet: a condition is recorded once per change, an event is
// emitted only when the reason changes, and the transition time moves only
// with the status.
func TestStatusWriterSet(t *testing.T) {
	spec := &gangspec.Spec{Ref: ident.Ref{Namespace: "default", Name: "g"}, UID: "uid-g", Generation: 3}
	recorder := events.NewFakeRecorder(10)
	var changes []change
	w := NewWriter(pgfake.NewSimpleClientset(), k8sfake.NewSimpleClientset(), recorder,
		func(_ ident.Ref, old, new *Condition) { changes = append(changes, change{old, new}) })

	steps := []struct {
		name        string
		cond        Condition
		wantChanged bool
		wantEvent   string // "" for none
		wantSameLTT bool   // transition time kept from the previous step
	}{
		{name: "first condition", cond: Condition{metav1.ConditionFalse, gang.ReasonMembersPending, "1 of 2 members exist"},
			wantChanged: true, wantEvent: "Warning MembersPending 1 of 2 members exist"},
		{name: "same again", cond: Condition{metav1.ConditionFalse, gang.ReasonMembersPending, "1 of 2 members exist"},
			wantSameLTT: true},
		{name: "new message, same reason", cond: Condition{metav1.ConditionFalse, gang.ReasonMembersPending, "2 of 3 members exist"},
			wantChanged: true, wantSameLTT: true},
		{name: "reserving is not a warning", cond: Condition{metav1.ConditionFalse, gang.ReasonReserving, "reserving 4 nodes"},
			wantChanged: true, wantEvent: "Normal Reserving reserving 4 nodes", wantSameLTT: true},
		{name: "scheduled", cond: Condition{metav1.ConditionTrue, ReasonScheduled, "2 of 2 members placed"},
			wantChanged: true, wantEvent: "Normal Scheduled 2 of 2 members placed"},
	}
	var lastLTT metav1.Time
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			before := len(changes)
			time.Sleep(time.Millisecond) // LastTransitionTime must be able to differ
			if got := w.Set(spec, step.cond); got != step.wantChanged {
				t.Fatalf("Set = %v, want %v", got, step.wantChanged)
			}
			if step.wantChanged != (len(changes) == before+1) {
				t.Fatalf("onChange calls: %d new, want changed=%v", len(changes)-before, step.wantChanged)
			}
			select {
			case e := <-recorder.Events:
				if e != step.wantEvent {
					t.Fatalf("event %q, want %q", e, step.wantEvent)
				}
			default:
				if step.wantEvent != "" {
					t.Fatalf("no event, want %q", step.wantEvent)
				}
			}
			got, ok := w.Get(spec.Ref)
			if !ok || got != step.cond {
				t.Fatalf("Get = %+v, %v; want %+v", got, ok, step.cond)
			}
			w.mu.Lock()
			d := w.desired[spec.Ref]
			w.mu.Unlock()
			if d.cond.ObservedGeneration != spec.Generation {
				t.Errorf("observedGeneration %d, want %d", d.cond.ObservedGeneration, spec.Generation)
			}
			if same := d.cond.LastTransitionTime.Equal(&lastLTT); same != step.wantSameLTT {
				t.Errorf("lastTransitionTime kept = %v, want %v", same, step.wantSameLTT)
			}
			lastLTT = d.cond.LastTransitionTime
		})
	}
	if first := changes[0]; first.old != nil || first.new.Reason != gang.ReasonMembersPending {
		t.Errorf("first change %+v, want from nothing to MembersPending", first)
	}

	w.Forget(spec.Ref)
	if _, ok := w.Get(spec.Ref); ok {
		t.Error("condition still known after Forget")
	}
	if last := changes[len(changes)-1]; last.new != nil || last.old.Reason != ReasonScheduled {
		t.Errorf("Forget reported %+v, want from Scheduled to nothing", last)
	}
}

// TestStatusWriterPatches: Run writes the latest condition of a gang to its
// PodGroup's status subresource, collapsing changes made before it ran.
func TestStatusWriterPatches(t *testing.T) {
	pg := &pgv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "g", UID: "uid-g"}}
	pgClient := pgfake.NewSimpleClientset(pg)
	w := NewWriter(pgClient, k8sfake.NewSimpleClientset(), nil, nil)
	spec := &gangspec.Spec{Ref: ident.Ref{Namespace: "default", Name: "g"}, UID: pg.UID}
	w.Set(spec, Condition{metav1.ConditionFalse, gang.ReasonMembersPending, "1 of 2 members exist"})
	w.Set(spec, Condition{metav1.ConditionTrue, ReasonScheduled, "2 of 2 members placed"})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	deadline := time.Now().Add(10 * time.Second)
	for {
		var patches []string
		for _, a := range pgClient.Actions() {
			if p, ok := a.(clienttesting.PatchAction); ok && a.GetSubresource() == "status" {
				patches = append(patches, string(p.GetPatch()))
			}
		}
		if len(patches) > 0 {
			if len(patches) != 1 {
				t.Fatalf("%d status patches, want 1 (changes collapse): %v", len(patches), patches)
			}
			if !strings.Contains(patches[0], `"reason":"Scheduled"`) || strings.Contains(patches[0], gang.ReasonMembersPending) {
				t.Fatalf("patch %s, want only the Scheduled condition", patches[0])
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no status patch within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStatusWriterStandby: a replica that does not lead records conditions
// but emits no event and patches nothing; when it starts leading it emits the
// event it held back (with the condition as it stands then) and writes.
func TestStatusWriterStandby(t *testing.T) {
	spec := &gangspec.Spec{Ref: ident.Ref{Namespace: "default", Name: "g"}, UID: "uid-g"}
	recorder := events.NewFakeRecorder(10)
	pg := pgfake.NewSimpleClientset(&pgv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "g"}})
	w := NewWriter(pg, k8sfake.NewSimpleClientset(), recorder, nil)
	leading := false
	w.Leading = func() bool { return leading }
	ctx := context.Background()

	w.Set(spec, Condition{metav1.ConditionFalse, gang.ReasonMembersPending, "1 of 2 members exist"})
	w.Set(spec, Condition{metav1.ConditionFalse, gang.ReasonMembersPending, "2 of 3 members exist"})
	w.processNext(ctx) // the one queued write, as a standby
	select {
	case e := <-recorder.Events:
		t.Fatalf("standby emitted %q", e)
	default:
	}
	if patched(pg) {
		t.Fatal("standby patched the PodGroup's status")
	}

	leading = true
	w.RequeueAll()
	select {
	case e := <-recorder.Events:
		if !strings.Contains(e, "MembersPending 2 of 3 members exist") {
			t.Fatalf("event %q, want the condition as it stands", e)
		}
	default:
		t.Fatal("no event once leading")
	}
	w.processNext(ctx)
	if !patched(pg) {
		t.Fatal("no status patch once leading")
	}
}

func patched(c *pgfake.Clientset) bool {
	for _, a := range c.Actions() {
		if a.GetVerb() == "patch" && a.GetSubresource() == "status" {
			return true
		}
	}
	return false
}

// TestStatusWriterClock: lastTransitionTime is the injected clock's time,
// in the condition kept and in the patch written; it moves with the clock
// only when the status changes.
func TestStatusWriterClock(t *testing.T) {
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := testingclock.NewFakeClock(start)
	pg := &pgv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "g", UID: "uid-g"}}
	pgClient := pgfake.NewSimpleClientset(pg)
	w := NewWriter(pgClient, k8sfake.NewSimpleClientset(), nil, nil)
	w.Clock = clk
	spec := &gangspec.Spec{Ref: ident.Ref{Namespace: "default", Name: "g"}, UID: pg.UID}
	ltt := func() time.Time {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.desired[spec.Ref].cond.LastTransitionTime.Time
	}

	w.Set(spec, Condition{metav1.ConditionFalse, gang.ReasonMembersPending, "1 of 2 members exist"})
	if got := ltt(); !got.Equal(start) {
		t.Fatalf("lastTransitionTime %v, want the fake clock's %v", got, start)
	}
	clk.Step(time.Hour)
	w.Set(spec, Condition{metav1.ConditionFalse, gang.ReasonMembersPending, "2 of 3 members exist"})
	if got := ltt(); !got.Equal(start) {
		t.Fatalf("same status: lastTransitionTime %v, want it kept at %v", got, start)
	}
	w.Set(spec, Condition{metav1.ConditionTrue, ReasonScheduled, "3 of 3 members placed"})
	if got, want := ltt(), start.Add(time.Hour); !got.Equal(want) {
		t.Fatalf("new status: lastTransitionTime %v, want the fake clock's %v", got, want)
	}
	w.processNext(context.Background())
	for _, a := range pgClient.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok && a.GetSubresource() == "status" {
			if want := `"lastTransitionTime":"2030-01-02T04:04:05Z"`; !strings.Contains(string(p.GetPatch()), want) {
				t.Fatalf("patch %s, want %s", p.GetPatch(), want)
			}
			return
		}
	}
	t.Fatal("no status patch")
}

// TestUpstreamConditions: phalanx's condition on an upstream PodGroup comes
// with the conditions kube-scheduler writes: PodGroupInitiallyScheduled
// (False/Unschedulable until the gang starts, then True for good) and
// DisruptionTarget on a gang evicted to make room.
func TestUpstreamConditions(t *testing.T) {
	cond := func(status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: ConditionScheduled, Status: status, Reason: reason, Message: reason + " message"}
	}
	type want struct{ typ, status, reason string }
	var conds []metav1.Condition
	for i, step := range []struct {
		set  metav1.Condition
		want []want
	}{
		{cond(metav1.ConditionFalse, gang.ReasonMembersPending), []want{
			{ConditionScheduled, "False", gang.ReasonMembersPending},
			{"PodGroupInitiallyScheduled", "False", "Unschedulable"}}},
		{cond(metav1.ConditionTrue, ReasonScheduled), []want{
			{ConditionScheduled, "True", ReasonScheduled},
			{"PodGroupInitiallyScheduled", "True", "Scheduled"}}},
		{cond(metav1.ConditionFalse, gang.ReasonPreempted), []want{
			{ConditionScheduled, "False", gang.ReasonPreempted},
			{"PodGroupInitiallyScheduled", "True", "Scheduled"}, // terminal
			{"DisruptionTarget", "True", "PreemptionByScheduler"}}},
		{cond(metav1.ConditionFalse, gang.ReasonUnschedulable), []want{
			{"PodGroupInitiallyScheduled", "True", "Scheduled"},
			{"DisruptionTarget", "True", "PreemptionByScheduler"}}},
		{cond(metav1.ConditionTrue, ReasonScheduled), []want{
			{ConditionScheduled, "True", ReasonScheduled},
			{"DisruptionTarget", "False", ReasonScheduled}}},
	} {
		upstreamConditions(&conds, step.set)
		for _, w := range step.want {
			got := meta.FindStatusCondition(conds, w.typ)
			if got == nil || string(got.Status) != w.status || got.Reason != w.reason {
				t.Fatalf("step %d (%s): %s = %+v, want %s/%s", i, step.set.Reason, w.typ, got, w.status, w.reason)
			}
		}
	}
	if changed := upstreamConditions(&conds, cond(metav1.ConditionTrue, ReasonScheduled)); changed {
		t.Fatal("the same condition again changed the PodGroup's status")
	}
}
