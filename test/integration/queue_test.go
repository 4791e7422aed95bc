package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

func createQueue(t *testing.T, c *testcluster.Cluster, q *phalanxv1alpha1.Queue) {
	t.Helper()
	if _, err := c.Phalanx.SchedulingV1alpha1().Queues().Create(ctxFor(t), q, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func queue(name string, weight int32) *phalanxv1alpha1.Queue {
	return &phalanxv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: phalanxv1alpha1.QueueSpec{Weight: weight}}
}

func cpuList(q string) v1.ResourceList { return v1.ResourceList{v1.ResourceCPU: resource.MustParse(q)} }

// submitJobs creates n gangs of `size` pods of 500m CPU in queue q.
func submitJobs(t *testing.T, c *testcluster.Cluster, q, prefix string, n, size int) {
	t.Helper()
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		pg := testcluster.PodGroup("default", name, int32(size))
		pg.Labels = map[string]string{phalanxv1alpha1.QueueLabel: q}
		createGang(t, c, pg, gangPods("default", name, size, testcluster.PodSpec{CPU: "500m", Labels: map[string]string{"job-queue": q}}))
	}
}

func boundInQueue(ctx context.Context, c *testcluster.Cluster, q string) (int, error) {
	b, err := c.BoundPods(ctx, "default", "job-queue="+q)
	return len(b), err
}

// waitSteady waits until the bound counts of the queues equal want, then
// checks they stay so while the scheduler keeps working on the rest.
func waitQueueCounts(t *testing.T, c *testcluster.Cluster, want map[string]int) {
	t.Helper()
	ctx := ctxFor(t)
	got := map[string]int{}
	err := testcluster.Eventually(ctx, 60*time.Second, func(ctx context.Context) (bool, error) {
		for q := range want {
			n, err := boundInQueue(ctx, c, q)
			if err != nil {
				return false, err
			}
			got[q] = n
		}
		return fmt.Sprint(got) == fmt.Sprint(want), nil
	})
	if err != nil {
		t.Errorf("bound per queue %v, want %v: %v", got, want, err)
		dumpPods(t, c, "default")
		t.FailNow()
	}
}

// dumpPods logs every pod and event of a namespace, to diagnose a failure.
func dumpPods(t *testing.T, c *testcluster.Cluster, ns string) {
	t.Helper()
	ctx := context.Background()
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, p := range pods.Items {
			t.Logf("pod %s node=%q phase=%s deleting=%v labels=%v", p.Name, p.Spec.NodeName, p.Status.Phase, p.DeletionTimestamp != nil, p.Labels)
		}
	}
	events, err := c.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, e := range events.Items {
			t.Logf("event %s/%s %s: %s", e.Regarding.Kind, e.Regarding.Name, e.Reason, e.Note)
		}
	}
}

// TestQueueWeights is the reference scenario: queue-a weight 1, queue-b
// weight 2, each with 6 one-pod jobs of 500m on a cluster that fits 6: at
// steady state queue-b runs twice as many as queue-a.
func TestQueueWeights(t *testing.T) {
	c := startCluster(t, testcluster.NodeSpec{Name: "n-0", CPU: "3", Memory: "16Gi"})
	createQueue(t, c, queue("queue-a", 1))
	createQueue(t, c, queue("queue-b", 2))
	startScheduler(t, c)
	submitJobs(t, c, "queue-a", "a", 6, 1)
	submitJobs(t, c, "queue-b", "b", 6, 1)
	waitQueueCounts(t, c, map[string]int{"queue-a": 2, "queue-b": 4})
}

// TestQueueCapability: a queue never exceeds its capability, even on an idle cluster.
func TestQueueCapability(t *testing.T) {
	c := startCluster(t, testcluster.NodeSpec{Name: "n-0", CPU: "8", Memory: "16Gi"})
	q := queue("capped", 1)
	q.Spec.Capability = cpuList("2")
	createQueue(t, c, q)
	startScheduler(t, c)
	submitJobs(t, c, "capped", "j", 3, 2) // 3 gangs × 1 CPU; capability fits 2
	waitQueueCounts(t, c, map[string]int{"capped": 4})
	waitCondition(t, c, "default", "j-2", "QueueAdmission", "capped", "capability")
	assertBound(t, c, "default", "j-2", 0)
}

// TestQueueGuarantee: a low-weight queue still gets its guarantee when a
// heavy queue wants everything.
func TestQueueGuarantee(t *testing.T) {
	c := startCluster(t, testcluster.NodeSpec{Name: "n-0", CPU: "3", Memory: "16Gi"})
	g := queue("small", 1)
	g.Spec.Guarantee = cpuList("1")
	createQueue(t, c, g)
	createQueue(t, c, queue("big", 10))
	startScheduler(t, c)
	submitJobs(t, c, "big", "big", 6, 1)
	submitJobs(t, c, "small", "small", 4, 1)
	waitQueueCounts(t, c, map[string]int{"small": 2, "big": 4})
}

// TestQueueClosed: a closed queue admits nothing, and says so.
func TestQueueClosed(t *testing.T) {
	c := startCluster(t, testcluster.NodeSpec{Name: "n-0", CPU: "8", Memory: "16Gi"})
	q := queue("frozen", 1)
	q.Spec.State = phalanxv1alpha1.QueueStateClosed
	createQueue(t, c, q)
	startScheduler(t, c)
	submitJobs(t, c, "frozen", "f", 1, 2)
	waitCondition(t, c, "default", "f-0", "QueueAdmission", "queue frozen is closed")
	assertBound(t, c, "default", "f-0", 0)
}

// TestQueueHierarchy: a parent's capability caps its children together. The
// child that filled the parent alone gives back what exceeds its deserved
// share (whole gangs) when its sibling arrives.
func TestQueueHierarchy(t *testing.T) {
	c := startCluster(t, testcluster.NodeSpec{Name: "n-0", CPU: "8", Memory: "16Gi"})
	parent := queue("research", 1)
	parent.Spec.Capability = cpuList("2")
	createQueue(t, c, parent)
	for _, name := range []string{"vision", "nlp"} {
		q := queue(name, 1)
		q.Spec.Parent = "research"
		createQueue(t, c, q)
	}
	startScheduler(t, c)
	submitJobs(t, c, "vision", "v", 4, 1)
	waitQueueCounts(t, c, map[string]int{"vision": 4}) // research's whole 2 CPUs
	submitJobs(t, c, "nlp", "l", 4, 1)
	waitQueueCounts(t, c, map[string]int{"vision": 2, "nlp": 2})
}

// TestQueueReclaim: queue-b fills the cluster with gangs, then queue-a
// submits: queue-a reaches its deserved share because whole gangs of queue-b
// are evicted; no gang of queue-b is ever left partial.
func TestQueueReclaim(t *testing.T) {
	c := startCluster(t, testcluster.NodeSpec{Name: "n-0", CPU: "3", Memory: "16Gi"})
	createQueue(t, c, queue("queue-a", 1))
	createQueue(t, c, queue("queue-b", 2))
	startScheduler(t, c)
	submitJobs(t, c, "queue-b", "b", 3, 2) // 3 gangs × 2 × 500m = the whole node
	waitQueueCounts(t, c, map[string]int{"queue-b": 6})
	submitJobs(t, c, "queue-a", "a", 1, 2) // deserved: 1000m = one gang of 2
	waitQueueCounts(t, c, map[string]int{"queue-a": 2, "queue-b": 4})
	ctx := ctxFor(t)
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("b-%d", i)
		list, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: pgv1alpha1.PodGroupLabel + "=" + name})
		if err != nil {
			t.Fatal(err)
		}
		bound := 0
		for _, p := range list.Items {
			if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
				bound++
			}
		}
		if bound != 0 && bound != 2 {
			t.Fatalf("gang %s left with %d of 2 members", name, bound)
		}
	}
}

// TestQueueStatus: phalanx-controller writes allocated and deserved shares,
// and reports an invalid queue tree (a cycle) on the Queues, which the
// scheduler ignores without failing.
func TestQueueStatus(t *testing.T) {
	c := startCluster(t, testcluster.NodeSpec{Name: "n-0", CPU: "3", Memory: "16Gi"})
	createQueue(t, c, queue("queue-a", 1))
	createQueue(t, c, queue("queue-b", 2))
	loopX, loopY := queue("loop-x", 1), queue("loop-y", 1)
	loopX.Spec.Parent, loopY.Spec.Parent = "loop-y", "loop-x"
	createQueue(t, c, loopX)
	createQueue(t, c, loopY)
	startScheduler(t, c)
	if err := c.StartController(); err != nil {
		t.Fatal(err)
	}
	submitJobs(t, c, "queue-a", "a", 6, 1)
	submitJobs(t, c, "queue-b", "b", 6, 1)
	waitQueueCounts(t, c, map[string]int{"queue-a": 2, "queue-b": 4})
	ctx := ctxFor(t)
	var seen string
	err := testcluster.Eventually(ctx, 60*time.Second, func(ctx context.Context) (bool, error) {
		a, err := c.Phalanx.SchedulingV1alpha1().Queues().Get(ctx, "queue-a", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		b, err := c.Phalanx.SchedulingV1alpha1().Queues().Get(ctx, "queue-b", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		seen = fmt.Sprintf("queue-a %+v, queue-b %+v", a.Status, b.Status)
		return a.Status.Deserved.Cpu().MilliValue() == 1000 && b.Status.Deserved.Cpu().MilliValue() == 2000 &&
			a.Status.Allocated.Cpu().MilliValue() == 1000 && b.Status.Allocated.Cpu().MilliValue() == 2000, nil
	})
	if err != nil {
		if pgs, lerr := c.PodGroups.SchedulingV1alpha1().PodGroups("default").List(ctx, metav1.ListOptions{}); lerr == nil {
			for _, pg := range pgs.Items {
				t.Logf("PodGroup %s: phase %q, annotations %v, labels %v", pg.Name, pg.Status.Phase, pg.Annotations, pg.Labels)
			}
		}
		t.Fatalf("queue status never showed deserved 1000m/2000m and allocated 1000m/2000m (last: %s): %v", seen, err)
	}
	err = testcluster.Eventually(ctx, 60*time.Second, func(ctx context.Context) (bool, error) {
		x, err := c.Phalanx.SchedulingV1alpha1().Queues().Get(ctx, "loop-x", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range x.Status.Conditions {
			if cond.Type == "Valid" && cond.Status == metav1.ConditionFalse && strings.Contains(cond.Message, "cycle") {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the cycle was not reported on queue loop-x: %v", err)
	}
}
