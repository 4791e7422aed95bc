package requeue

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/phalanx-sched/phalanx/internal/metrics"
)

// waitWakes polls (the paced wake runs on its own goroutine) until the
// wakes arrive or the deadline passes.
func waitWakes(t *testing.T, f *fixture, what string, want []string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var got []string
	for time.Now().Before(deadline) {
		got = append(got, f.act.take()...)
		if len(got) >= len(want) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	sameWakes(t, what, got, want)
}

func TestFailedGangWokenThroughRepresentativeAndPaced(t *testing.T) {
	f := newFixture()
	ref, m := f.addGang("g", 3)
	f.lc.Fail(ref, m[2].UID, "no room")
	f.lc.FailCost(ref, 2*time.Second)
	// The first change wakes the failed gang at once, through the member
	// that stands for its plan.
	f.w.Changed()
	sameWakes(t, "the first change", f.act.take(), woken(metrics.WokenFailedRetry, m[2]))
	// The next waits as long as the failed plans took.
	f.w.Changed()
	f.w.Changed()
	sameWakes(t, "changes within the pace", f.act.take(), nil)
	waitTimer(t, f)
	f.clock.Step(time.Second)
	sameWakes(t, "half the pace", f.act.take(), nil)
	f.clock.Step(time.Second)
	waitWakes(t, f, "the end of the pace", woken(metrics.WokenFailedRetry, m[2]))
}

func TestFailedPaceIsBounded(t *testing.T) {
	f := newFixture()
	ref, m := f.addGang("g", 1)
	f.lc.Fail(ref, m[0].UID, "no room")
	f.lc.FailCost(ref, time.Hour)
	f.w.Changed()
	f.act.take()
	f.w.Changed()
	waitTimer(t, f)
	f.clock.Step(MaxFailedWakeInterval)
	waitWakes(t, f, "after MaxFailedWakeInterval", woken(metrics.WokenFailedRetry, m[0]))
}

func TestWakeOneWithoutRepresentativeWakesLead(t *testing.T) {
	f := newFixture()
	ref, m := f.addGang("g", 3)
	f.w.WakeOne(metrics.WokenRoomFreed, ref)
	sameWakes(t, "a gang without a failed plan", f.act.take(), woken(metrics.WokenRoomFreed, m[0]))
	if !f.w.Asleep(ref, m[1].UID) || !f.w.Asleep(ref, m[2].UID) {
		t.Fatal("the others do not sleep behind the lead")
	}
}

// waitTimer polls until the paced wake has set its timer.
func waitTimer(t *testing.T, f *fixture) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !f.clock.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("the paced wake set no timer")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestStaleFailureRetriedOnceTheQueuePassEnds(t *testing.T) {
	f := newFixture()
	passOver := make(chan struct{})
	f.w.AwaitQueue = func() { <-passOver }
	ref, m := f.addGang("g", 2)
	left := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "left", UID: "left"}, Spec: v1.PodSpec{NodeName: "node-a"}}
	other := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other", UID: "other"}, Spec: v1.PodSpec{NodeName: "node-a"}}
	f.w.GoneBound(left.UID, f.lc.Version())
	f.lc.Fail(ref, m[1].UID, "no room")

	if f.w.RetryStaleFailure(m[1], other) {
		t.Fatal("a pod the runtime never saw leave made the failure stale")
	}
	if f.w.RetryStaleFailure(m[0], left) {
		t.Fatal("a member that does not stand for the gang was retried")
	}
	if !f.w.RetryStaleFailure(m[1], left) {
		t.Fatal("a failure planned after the pod had left was not found stale")
	}
	sameWakes(t, "during the queue's event pass", f.act.take(), nil)
	close(passOver)
	waitWakes(t, f, "after the pass", woken(metrics.WokenStaleFailure, m[1]))
	if _, failed := f.lc.Failed(ref); failed {
		t.Fatal("the stale failure still turns the gang away")
	}
}

func TestGoneForgottenAfterAMinute(t *testing.T) {
	f := newFixture()
	f.w.GoneBound("a", 1)
	f.clock.Step(goneKept)
	f.w.GoneBound("b", 1)
	f.clock.Step(time.Second)
	f.w.ForgetGone()
	if n := f.w.Sizes()["gone"]; n != 1 {
		t.Fatalf("gone holds %d after a minute, want only the later pod", n)
	}
}

// TestRetryFailedVoidsTheFailureBeforeTheWake: the periodic retry of a
// failed gang wakes the member that stood for it with the failure already
// void. Voided after the wake, the failure turned the member away when its
// cycle came first, and with the failure gone nothing retried the gang
// again (the queue's periodic flush, minutes later).
func TestRetryFailedVoidsTheFailureBeforeTheWake(t *testing.T) {
	f := newFixture()
	ref, m := f.addGang("g", 3)
	f.lc.Fail(ref, m[2].UID, "no room")
	var failedAtWake []bool
	f.w.Activate = func(reason string, pods map[string]*v1.Pod) {
		_, failed := f.lc.Failed(ref)
		failedAtWake = append(failedAtWake, failed)
		f.act.activate(reason, pods)
	}
	f.w.RetryFailed(metrics.WokenFailedRetry, ref)
	sameWakes(t, "the retry", f.act.take(), woken(metrics.WokenFailedRetry, m[2]))
	if len(failedAtWake) != 1 || failedAtWake[0] {
		t.Fatalf("the failure stood at the wake (%v): the woken member would be turned away by it", failedAtWake)
	}
	if _, failed := f.lc.Failed(ref); failed {
		t.Fatal("the retried gang still has its failure")
	}
}
