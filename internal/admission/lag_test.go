package admission

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/phalanx-sched/phalanx/internal/queue"
)

// lagFixture: queue b waits (b-wait pending) and is charged for b-run,
// bound to n1; queue a is being admitted.
func lagFixture(t *testing.T) (*fixture, *v1.Pod) {
	f := newFixture(t, Options{})
	f.addNode("n1", 8000)
	run := bound(pod("ns", "b-run", 4000, 0, inQueue("b")), "n1")
	f.addPod(run)
	f.addPod(pod("ns", "b-wait", 4000, 1, inQueue("b")))
	f.addPod(pod("ns", "a-wait", 4000, 2, inQueue("a")))
	return f, run
}

// cycleNodes is the scheduler's snapshot of n1 holding pods.
func cycleNodes(f *fixture, pods ...*v1.Pod) []fwk.NodeInfo {
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(f.nodes["n1"])
	return []fwk.NodeInfo{ni}
}

// await runs AwaitLeft on a goroutine, so a wait that never ends fails the
// test rather than hanging it.
func await(ctx context.Context, f *fixture, nodes []fwk.NodeInfo, snap *queue.Snapshot, admitted string) <-chan bool {
	out := make(chan bool, 1)
	go func() { out <- f.q.AwaitLeft(ctx, nodes, snap, admitted) }()
	return out
}

func result(t *testing.T, what string, ch <-chan bool) bool {
	t.Helper()
	select {
	case got := <-ch:
		return got
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: AwaitLeft did not return", what)
		return false
	}
}

// TestAwaitLeftCurrent: with nothing behind, AwaitLeft returns at once,
// true only when the accounting changed since the snapshot.
func TestAwaitLeftCurrent(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		admitted string
		nodes    func(f *fixture, run *v1.Pod) []fwk.NodeInfo
		change   bool
		want     bool
	}{
		{name: "no other queue waits", admitted: "b", nodes: func(f *fixture, _ *v1.Pod) []fwk.NodeInfo { return cycleNodes(f) }},
		{name: "the node's snapshot holds the pod", admitted: "a", nodes: func(f *fixture, run *v1.Pod) []fwk.NodeInfo { return cycleNodes(f, run) }},
		{name: "no plan uses the node", admitted: "a", nodes: func(*fixture, *v1.Pod) []fwk.NodeInfo { return nil }},
		{name: "the accounting changed since", admitted: "a", change: true, want: true,
			nodes: func(f *fixture, run *v1.Pod) []fwk.NodeInfo { return cycleNodes(f, run) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, run := lagFixture(t)
			if tc.admitted == "b" {
				f.deletePod(pod("ns", "a-wait", 4000, 2, inQueue("a")))
			}
			snap := f.q.Snapshot()
			if tc.change {
				f.addPod(pod("ns", "late", 1000, 3, inQueue("c")))
			}
			if got := result(t, tc.name, await(ctx, f, tc.nodes(f, run), snap, tc.admitted)); got != tc.want {
				t.Fatalf("AwaitLeft = %v, want %v", got, tc.want)
			}
			if f.clock.Waiters() != 0 {
				t.Fatal("AwaitLeft left a timer behind")
			}
		})
	}
}

// TestAwaitLeftBehind: the accounting charges a waiting queue for a pod the
// node's snapshot no longer holds; AwaitLeft waits until its charge is
// given back (deleted or finished), catchUpMaxWait passes, or ctx ends,
// and asks for a new decision.
func TestAwaitLeftBehind(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(f *fixture, run *v1.Pod, cancel func())
	}{
		{"deleted", func(f *fixture, run *v1.Pod, _ func()) { f.deletePod(run) }},
		{"finished", func(f *fixture, run *v1.Pod, _ func()) {
			done := run.DeepCopy()
			done.Status.Phase = v1.PodSucceeded
			f.updatePod(done)
		}},
		{"catchUpMaxWait passed", func(f *fixture, _ *v1.Pod, _ func()) {
			f.clock.Step(catchUpMaxWait - time.Millisecond)
			f.clock.Step(time.Millisecond)
		}},
		{"ctx ended", func(_ *fixture, _ *v1.Pod, cancel func()) { cancel() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f, run := lagFixture(t)
			snap := f.q.Snapshot()
			ch := await(ctx, f, cycleNodes(f), snap, "a")
			eventually(t, "AwaitLeft's timer", f.clock.HasWaiters)
			select {
			case got := <-ch:
				t.Fatalf("AwaitLeft returned %v while the accounting was behind", got)
			default:
			}
			tc.end(f, run, cancel)
			if !result(t, tc.name, ch) {
				t.Fatal("AwaitLeft = false after waiting, want true")
			}
		})
	}
}

// TestAwaitLeftRechecks: a charge given back that leaves another pod still
// missing keeps AwaitLeft waiting.
func TestAwaitLeftRechecks(t *testing.T) {
	f, run := lagFixture(t)
	other := bound(pod("ns", "b-run2", 1000, 0, inQueue("b")), "n1")
	f.addPod(other)
	snap := f.q.Snapshot()
	ch := await(context.Background(), f, cycleNodes(f), snap, "a")
	eventually(t, "AwaitLeft's timer", f.clock.HasWaiters)
	f.deletePod(run)
	// The give-back schedules the refused's wake beside AwaitLeft's timer.
	eventually(t, "the give-back's wake", func() bool { return f.clock.Waiters() == 2 })
	select {
	case got := <-ch:
		t.Fatalf("AwaitLeft returned %v with b-run2 still missing", got)
	default:
	}
	f.deletePod(other)
	if !result(t, "both gone", ch) {
		t.Fatal("AwaitLeft = false, want true")
	}
}
