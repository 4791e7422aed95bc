package gangs_test

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/plugins/internal/plugintest"
)

// TestStaleFailureWoken: the runtime's pod handler and the scheduler's
// cache learn that a bound pod left each on their own. When the handler
// comes first, the gang it wakes may plan from a snapshot that still holds
// the pod and fail; the scheduling queue's event for the pod, which comes
// after the cache dropped it, must then wake the member standing for the
// gang and void the failure, though capacity events skip failed gangs.
// Before this, such a gang waited for the sweep's retry (20 s), and a
// replay that ended first reported it never started.
func TestStaleFailureWoken(t *testing.T) {
	e, gangs, _ := plugintest.BuildParts(t, plugintest.Objects{})
	ref := ident.Ref{Namespace: "default", Name: "g"}
	gangs.GroupAdded(plugintest.PodGroup("g", 2))
	rep, sibling := plugintest.Pod("g-0", "g", "1", 1), plugintest.Pod("g-1", "g", "1", 1)
	gangs.PodAdded(rep)
	gangs.PodAdded(sibling)
	fail := func() { gangs.Lifecycle.FailAt(ref, rep.UID, "no room", gangs.Lifecycle.Version()) }
	running := func(name string) any {
		p := plugintest.OnNode(plugintest.Pod(name, "", "1", 1), "n1")
		gangs.PodAdded(p)
		return p
	}
	hint := func(pod *v1.Pod, gone any) fwk.QueueingHint {
		h, err := gangs.CapacityHint(klog.Background(), pod, gone, nil)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}

	// The cache first: the gang failed before the pod left; the runtime's
	// own wake, which comes after, retries it.
	early := running("early")
	fail()
	if gangs.RetryStaleFailure(rep, early) || hint(rep, early) != fwk.QueueSkip {
		t.Fatal("the queue's event woke a failed gang before the runtime saw the pod leave")
	}
	gangs.PodDeleted(early)

	// The runtime first, then a failed plan, then the queue's event.
	late := running("late")
	fail()
	gangs.PodDeleted(late)
	e.Eventually("the runtime's own wakes", func() bool { return len(e.Activated()) > 0 })
	fail()
	if gangs.RetryStaleFailure(sibling, late) {
		t.Fatal("a member that does not stand for the gang was woken apart")
	}
	if hint(rep, late) != fwk.QueueSkip {
		t.Fatal("the hint queued the member itself: the backoff queue's order, not the queue's, would decide")
	}
	var woken []string
	e.Eventually("the member standing for the gang woken, its failure void", func() bool {
		woken = append(woken, e.Activated()...)
		return slices.Contains(woken, "default/g-0") && gangs.Lifecycle.Representative(ref) == ""
	})

	// A failure that began before the runtime saw the pod leave is the
	// runtime's wake's to retry.
	old := running("old")
	gangs.Lifecycle.FailAt(ref, rep.UID, "no room", gangs.Lifecycle.Version()-1)
	gangs.PodDeleted(old)
	if gangs.RetryStaleFailure(rep, old) {
		t.Fatal("a failure older than the pod's leaving was taken for stale")
	}
}
