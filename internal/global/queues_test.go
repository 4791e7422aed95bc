package global

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/phalanx-sched/phalanx/internal/queue"
)

// A job whose queue admits nothing is refused by the queue (QueueRefused,
// the queue named) before any estimator is asked; a capability refuses
// even when the queue is also above its share, since waiting for the share
// would not help.
func TestPassQueueRefuses(t *testing.T) {
	open := func(name, parent string, weight int32) queue.Queue {
		return queue.Queue{Name: name, Parent: parent, Weight: weight, Reclaimable: true, Open: true}
	}
	for _, tc := range []struct {
		name    string
		queues  []queue.Queue
		running []*Job
		want    string
	}{
		{name: "closed queue", queues: []queue.Queue{{Name: "q", Weight: 1}}, want: "queue q is closed"},
		{name: "under a closed parent", queues: []queue.Queue{{Name: "org", Weight: 1}, open("q", "org", 1)}, want: "queue q: parent queue org is closed"},
		{name: "an inner queue", queues: []queue.Queue{open("q", "", 1), open("child", "q", 1)}, want: "queue q has child queues"},
		{name: "invalid queue", queues: []queue.Queue{open("q", "", -1)}, want: "queue q is invalid"},
		{
			// q is at its deserved share (4 of 8, other waits below its
			// own), and its capability of 4 is spent.
			name:   "capability",
			queues: []queue.Queue{{Name: "q", Weight: 1, Reclaimable: true, Open: true, Capability: gpus(4)}, open("other", "", 1)},
			running: []*Job{
				{Key: "ns/running", UID: "running", Namespace: "ns", Name: "running", Queue: "q", Request: gpus(4), Member: "m1", Since: t0, Started: true},
				job("other", "other-job", 4, time.Hour),
			},
			want: "queue q: nvidia.com/gpu 8 of capability 4",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &World{Queues: tc.queues, Members: []*Member{member("m1", 8)}, Jobs: append(tc.running, job("q", "j", 4, time.Minute))}
			est := &recordingEstimator{room: roomEstimator{world: w}}
			v := run(t, New(Config{}, clocktesting.NewFakePassiveClock(t0)), w, est)["j"]
			if v.Reason != QueueRefused || !strings.Contains(v.Message, tc.want) {
				t.Fatalf("%s (%s), want QueueRefused saying %q", v.Reason, v.Message, tc.want)
			}
			if !strings.Contains(v.Message, "position 1 in queue q") {
				t.Fatalf("the message does not give the place in the queue: %s", v.Message)
			}
			for _, a := range est.asks {
				if a.job == "j" {
					t.Fatalf("the estimators were asked about a job its queue refuses: %+v", a)
				}
			}
		})
	}
}

// The shares of a hierarchy divide the sum of the members: parents by their
// weights, then each parent's share among its children.
func TestPassHierarchySharesAcrossMembers(t *testing.T) {
	w := &World{Members: []*Member{member("m1", 8), member("m2", 8), member("m3", 8), member("m4", 8)}, Queues: []queue.Queue{
		{Name: "org-x", Weight: 3, Reclaimable: true, Open: true},
		{Name: "org-y", Weight: 1, Reclaimable: true, Open: true},
		{Name: "x1", Parent: "org-x", Weight: 2, Reclaimable: true, Open: true},
		{Name: "x2", Parent: "org-x", Weight: 1, Reclaimable: true, Open: true},
		{Name: "y1", Parent: "org-y", Weight: 1, Reclaimable: true, Open: true},
	}}
	for _, q := range []string{"x1", "x2", "y1"} {
		for i := range 10 {
			w.Jobs = append(w.Jobs, job(q, fmt.Sprintf("%s-%d", q, i), 2, time.Duration(30-i)*time.Minute))
		}
	}
	vs := run(t, New(Config{}, clocktesting.NewFakePassiveClock(t0)), w, &roomEstimator{world: w})
	perQueue := map[string]int64{}
	for name := range dispatchedTo(vs) {
		perQueue[vs[name].Job.Queue] += 2
	}
	// 32 GPUs: org-x 24 (x1 16, x2 8), org-y 8.
	if perQueue["x1"] != 16 || perQueue["x2"] != 8 || perQueue["y1"] != 8 {
		t.Fatalf("GPUs dispatched per queue %v, want x1 16, x2 8, y1 8 (org-x:org-y 3:1 over 32, x1:x2 2:1)", perQueue)
	}
}

// Inside a queue: higher priority first, then earlier submission, then the
// binding's key. Positions are per queue and count only the jobs still
// waiting after the pass. Each queue deserves 4 of the 8 GPUs and every
// job needs 8: the first in order (high) starts, not a later job of its
// queue after the other queue's job was refused too.
func TestPassOrderAndPositions(t *testing.T) {
	w := &World{Queues: queues(map[string]int32{"q": 1, "r": 1}), Members: []*Member{member("m1", 8)}}
	high := job("q", "high", 8, time.Minute)
	high.Priority = 10
	old := job("q", "old", 8, 10*time.Minute)
	tieB := job("q", "tie-b", 8, 5*time.Minute)
	tieA := job("q", "tie-a", 8, 5*time.Minute)
	young := job("q", "young", 8, 2*time.Minute)
	other := job("r", "other", 8, 20*time.Minute)
	w.Jobs = []*Job{young, tieB, old, high, tieA, other}

	var got, inCluster []string
	positions := map[string]int{}
	for _, v := range New(Config{}, clocktesting.NewFakePassiveClock(t0)).Pass(context.Background(), *w, &roomEstimator{world: w}) {
		if v.Job.Queue == "q" {
			got = append(got, v.Job.Name)
		}
		positions[v.Job.Name] = v.Position
		if v.ClusterPosition > 0 {
			if v.ClusterPosition != len(inCluster)+1 {
				t.Errorf("%s at cluster position %d after %d waiting jobs", v.Job.Name, v.ClusterPosition, len(inCluster))
			}
			inCluster = append(inCluster, v.Job.Name)
		} else if v.Reason != Dispatched {
			t.Errorf("%s waits (%s) without a cluster position", v.Job.Name, v.Reason)
		}
		if v.Position > 0 && !strings.Contains(v.Message, fmt.Sprintf("position %d in queue %s", v.Position, v.Job.Queue)) {
			t.Errorf("%s: the message does not give position %d in queue %s: %s", v.Job.Name, v.Position, v.Job.Queue, v.Message)
		}
	}
	if strings.Join(got, ",") != "high,old,tie-a,tie-b,young" {
		t.Fatalf("queue q decided in the order %v, want high (priority), then old, tie-a, tie-b (key), young (submission)", got)
	}
	// The queues interleave by share: r holds nothing, so other goes first.
	if strings.Join(inCluster, ",") != "other,old,tie-a,tie-b,young" {
		t.Errorf("waiting jobs in the cluster's order %v, want other (queue r below its share), old, tie-a, tie-b, young", inCluster)
	}
	want := map[string]int{"high": 0, "old": 1, "tie-a": 2, "tie-b": 3, "young": 4, "other": 1}
	for name, p := range want {
		if positions[name] != p {
			t.Errorf("%s at position %d, want %d (positions: %v)", name, positions[name], p, positions)
		}
	}
}
