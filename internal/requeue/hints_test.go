package requeue

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/internal/metrics"
)

func TestCapacityHintSkipsFailedAndSleepingMembers(t *testing.T) {
	plain := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "plain", UID: "plain"}}
	for _, tc := range []struct {
		name string
		// setup returns the pod the hint is asked about.
		setup func(f *fixture) *v1.Pod
		skip  bool
	}{
		{name: "a pod of no gang", setup: func(*fixture) *v1.Pod { return plain }},
		{name: "a member of an unplanned gang", setup: func(f *fixture) *v1.Pod {
			_, m := f.addGang("g", 2)
			return m[0]
		}},
		{name: "the member that stands for a failed plan", skip: true, setup: func(f *fixture) *v1.Pod {
			ref, m := f.addGang("g", 2)
			f.lc.Fail(ref, m[1].UID, "no room")
			return m[1]
		}},
		{name: "another member of a failed plan", skip: true, setup: func(f *fixture) *v1.Pod {
			ref, m := f.addGang("g", 2)
			f.lc.Fail(ref, m[1].UID, "no room")
			return m[0]
		}},
		{name: "a member asleep behind the lead", skip: true, setup: func(f *fixture) *v1.Pod {
			ref, m := f.addGang("g", 3)
			f.w.Offered(ref, m[1])
			f.w.Offered(ref, m[2])
			f.w.WakeAtQuorum(ref)
			return m[2]
		}},
		{name: "the lead itself", setup: func(f *fixture) *v1.Pod {
			ref, m := f.addGang("g", 3)
			f.w.Offered(ref, m[1])
			f.w.Offered(ref, m[2])
			f.w.WakeAtQuorum(ref)
			return m[1]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture()
			pod := tc.setup(f)
			if got := f.w.SkipFailedGang(pod); got != tc.skip {
				t.Fatalf("SkipFailedGang = %v, want %v", got, tc.skip)
			}
			want := fwk.Queue
			if tc.skip {
				want = fwk.QueueSkip
			}
			if h, err := f.w.CapacityHint(klog.Background(), pod, nil, nil); err != nil || h != want {
				t.Fatalf("CapacityHint = %v, %v; want %v", h, err, want)
			}
		})
	}
}

func TestCapacityHintWakesAFailureThePodLeftMissedApart(t *testing.T) {
	f := newFixture()
	ref, m := f.addGang("g", 2)
	left := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "done", UID: "done"}, Spec: v1.PodSpec{NodeName: "n1"}}
	// The bound pod left before the plan failed: the failure counted its
	// room as taken, so it is stale.
	f.w.GoneBound(left.UID, f.lc.Version())
	f.lc.Fail(ref, m[1].UID, "no room")
	if h, _ := f.w.CapacityHint(klog.Background(), m[1], left, nil); h != fwk.QueueSkip {
		t.Fatalf("CapacityHint = %v, want QueueSkip: the member is woken apart, not by the queue", h)
	}
	waitWakes(t, f, "the stale failure's member", woken(metrics.WokenStaleFailure, m[1]))
}

// TestCapacityHintWakesAFailureTheAddedNodeMissedApart: the runtime's node
// handler woke the failed gang before the scheduler's cache had the new
// node, so the plan it woke ran without the node and failed; the queue's
// event for the node, skipped for the failed gang, wakes it apart. Another
// version of the node (an earlier change) is not the one that plan missed.
func TestCapacityHintWakesAFailureTheAddedNodeMissedApart(t *testing.T) {
	f := newFixture()
	ref, m := f.addGang("g", 2)
	f.lc.Fail(ref, m[1].UID, "no room")
	added := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n-4", UID: "n-4", ResourceVersion: "7"}}
	f.w.NodeChanged(added, f.lc.Changed())
	f.w.Changed()
	waitWakes(t, f, "the node handler's wake", woken(metrics.WokenFailedRetry, m[1]))
	// The woken plan's snapshot lacked the node: it fails again, counted
	// after the node handler's change.
	f.lc.Fail(ref, m[1].UID, "no room")

	later := added.DeepCopy()
	later.ResourceVersion = "8"
	if f.w.RetryStaleFailure(m[1], later) {
		t.Fatal("a version of the node the runtime never saw made the failure stale")
	}
	if h, _ := f.w.CapacityHint(klog.Background(), m[1], nil, added); h != fwk.QueueSkip {
		t.Fatalf("CapacityHint = %v, want QueueSkip: the member is woken apart, not by the queue", h)
	}
	waitWakes(t, f, "the node event's stale failure", woken(metrics.WokenStaleFailure, m[1]))
	if _, failed := f.lc.Failed(ref); failed {
		t.Fatal("the failure planned without the node still turns the gang away")
	}
}
