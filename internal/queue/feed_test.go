package queue

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// TestFeed: nodes count in the total unless unschedulable or gone; a
// Queue's status seeds its recent usage; a pod's demand is charged to its
// queue until it finishes or goes, and a placed pod that finishes reports
// that it gave its share back.
func TestFeed(t *testing.T) {
	c := NewCache()
	c.DecayUsage(time.Hour, clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0)))
	nodes := map[string]*v1.Node{}
	f := NewFeed(c, nil, func(name string) (*v1.Node, error) { return nodes[name], nil })
	node := func(name string, cpu string, unschedulable bool) *v1.Node {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{Unschedulable: unschedulable},
			Status: v1.NodeStatus{Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}}}
		nodes[name] = n
		return n
	}
	f.SetNode(node("n1", "8", false))
	f.SetNode(node("n2", "4", false))
	f.SetNode(node("n3", "16", true))
	if got := c.Snapshot(nil).Total[v1.ResourceCPU]; got != 12000 {
		t.Fatalf("total %dm, want 12000m (the cordoned node does not count)", got)
	}
	if got := f.NodeTotal(nodes["n3"]); got[v1.ResourceCPU] != 16000 {
		t.Fatalf("node total without slices %v, want its allocatable", got)
	}
	f.DeleteNode("n2")
	if got := c.Snapshot(nil).Total[v1.ResourceCPU]; got != 8000 {
		t.Fatalf("total after a node went %dm, want 8000m", got)
	}

	q := &phalanxv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "train"},
		Status: phalanxv1alpha1.QueueStatus{RecentUsage: v1.ResourceList{v1.ResourceCPU: resource.MustParse("3")}}}
	f.SetQueue(q)
	snap := c.Snapshot(nil)
	if _, ok := snap.Tree.Get("train"); !ok || snap.Recent["train"][v1.ResourceCPU] < 2900 {
		t.Fatalf("queue not taken or its recent usage not seeded: tree %v, recent %v", snap.Tree, snap.Recent)
	}

	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p", UID: "p"}, Spec: v1.PodSpec{NodeName: "n1"},
		Status: v1.PodStatus{Phase: v1.PodRunning}}
	demand := resources.List{v1.ResourceCPU: 2000}
	if f.ChargePod(pod, "train", demand, false) {
		t.Fatal("charging a running pod reported a give-back")
	}
	if got := c.Snapshot(nil).Allocated["train"][v1.ResourceCPU]; got != 2000 {
		t.Fatalf("train allocated %dm, want 2000m", got)
	}
	done := pod.DeepCopy()
	done.Status.Phase = v1.PodSucceeded
	if !f.ChargePod(done, "train", demand, false) {
		t.Fatal("a placed pod that finished did not report its give-back")
	}
	if got := c.Snapshot(nil).Allocated["train"][v1.ResourceCPU]; got != 0 {
		t.Fatalf("train allocated %dm after its pod finished, want 0", got)
	}
	if f.ChargePod(done, "train", demand, false) {
		t.Fatal("a finished pod gave back twice")
	}

	pending := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "w", UID: "w"}}
	f.ChargePod(pending, "train", demand, false)
	if got := c.Snapshot(nil).Pending["train"][v1.ResourceCPU]; got != 2000 {
		t.Fatalf("train pending %dm, want 2000m", got)
	}
	if f.DeletePod("w") {
		t.Fatal("a pending pod's deletion reported it placed")
	}
	f.DeleteQueue("train")
	if _, ok := c.Snapshot(nil).Tree.Get("train"); ok {
		t.Fatalf("queue still in the tree after its deletion")
	}
}
