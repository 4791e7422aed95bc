package integration

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// The kubelet configuration every NRT object of these tests publishes.
const (
	numaPolicy = "single-numa-node"
	numaScope  = "container"
)

// guaranteedPod builds the pod of spec with limits equal to requests in every
// container, so that it is Guaranteed QoS and its CPUs, memory and GPUs are
// aligned to one NUMA zone by the kubelet (spec.CPU must be integral).
func guaranteedPod(spec testcluster.PodSpec) *v1.Pod {
	p := spec.Pod()
	for i := range p.Spec.Containers {
		r := &p.Spec.Containers[i].Resources
		r.Limits = r.Requests.DeepCopy()
	}
	return p
}

// createPods creates pods; the ones whose limits equal their requests must
// come back Guaranteed, or the test would not be about NUMA alignment.
func createPods(t *testing.T, c *testcluster.Cluster, pods ...*v1.Pod) {
	t.Helper()
	ctx := ctxFor(t)
	for _, p := range pods {
		got, err := c.Client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating pod %s/%s: %v", p.Namespace, p.Name, err)
		}
		limited := len(p.Spec.Containers) > 0
		for _, ctr := range p.Spec.Containers {
			if len(ctr.Resources.Limits) == 0 || len(ctr.Resources.Limits) != len(ctr.Resources.Requests) {
				limited = false
			}
		}
		if limited && got.Status.QOSClass != v1.PodQOSGuaranteed {
			t.Fatalf("pod %s/%s is %s QoS, want Guaranteed", p.Namespace, p.Name, got.Status.QOSClass)
		}
	}
}

// createNRT publishes the single-numa-node NRT object of a node.
func createNRT(t *testing.T, c *testcluster.Cluster, node string, zones ...testcluster.ZoneSpec) {
	t.Helper()
	if err := c.CreateNRT(ctxFor(t), node, numaPolicy, numaScope, zones...); err != nil {
		t.Fatal(err)
	}
}

// podNodes maps the pods of a namespace matching selector to their node
// ("" when unbound).
func podNodes(ctx context.Context, c *testcluster.Cluster, ns, selector string) (map[string]string, error) {
	list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range list.Items {
		out[p.Name] = p.Spec.NodeName
	}
	return out, nil
}

// failedScheduling returns, per pod, the notes of its FailedScheduling events.
func failedScheduling(ctx context.Context, c *testcluster.Cluster, ns string) (map[string][]string, error) {
	events, err := c.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, e := range events.Items {
		if e.Reason == "FailedScheduling" && e.Regarding.Kind == "Pod" {
			out[e.Regarding.Name] = append(out[e.Regarding.Name], e.Note)
		}
	}
	return out, nil
}

// podOn returns the node a pod is bound to.
func podOn(t *testing.T, c *testcluster.Cluster, ns, name string) string {
	t.Helper()
	p, err := c.Client.CoreV1().Pods(ns).Get(ctxFor(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p.Spec.NodeName
}

// TestNUMASingleZoneFit: both nodes fit the pod by node-level totals, only one
// has a single zone with all of its GPUs and CPUs; the pod goes there. The
// split node is the bigger one, so node-level scoring alone would prefer it.
func TestNUMASingleZoneFit(t *testing.T) {
	c := startCluster(t,
		testcluster.NodeSpec{Name: "aligned", CPU: "20", Memory: "64Gi", GPUs: 4},
		testcluster.NodeSpec{Name: "split", CPU: "24", Memory: "128Gi", GPUs: 8},
	)
	createNRT(t, c, "aligned",
		testcluster.ZoneSpec{Name: "node-0", CPU: "16", Memory: "32Gi", GPUs: 4},
		testcluster.ZoneSpec{Name: "node-1", CPU: "4", Memory: "32Gi"},
	)
	// 8 GPUs and 24 CPUs, but no zone has 4 GPUs together with 16 CPUs.
	createNRT(t, c, "split",
		testcluster.ZoneSpec{Name: "node-0", CPU: "12", Memory: "64Gi", GPUs: 4},
		testcluster.ZoneSpec{Name: "node-1", CPU: "12", Memory: "64Gi", GPUs: 4},
	)
	startScheduler(t, c)

	createPods(t, c, guaranteedPod(testcluster.PodSpec{Name: "train", CPU: "16", Memory: "16Gi", GPUs: 4}))
	waitBound(t, c, "default", "train")
	if node := podOn(t, c, "default", "train"); node != "aligned" {
		t.Fatalf("pod bound to %s, want aligned (the only node with one zone of 4 GPUs and 16 CPUs)", node)
	}
}

// TestNUMANoDoubleBooking: NRT objects are never refreshed (no kubelet), so
// the scheduler must account the zones it has handed out itself. Each node
// fits two pods by node-level totals but one by zones.
func TestNUMANoDoubleBooking(t *testing.T) {
	const n = 5
	specs := nodes("n", n, testcluster.NodeSpec{CPU: "48", Memory: "192Gi", GPUs: 8})
	c := startCluster(t, specs...)
	for _, s := range specs {
		createNRT(t, c, s.Name,
			testcluster.ZoneSpec{Name: "node-0", CPU: "16", Memory: "64Gi", GPUs: 4},
			testcluster.ZoneSpec{Name: "node-1", CPU: "16", Memory: "64Gi", GPUs: 2},
			testcluster.ZoneSpec{Name: "node-2", CPU: "16", Memory: "64Gi", GPUs: 2},
		)
	}
	startScheduler(t, c)

	var pods []*v1.Pod
	for i := 0; i < 2*n; i++ {
		pods = append(pods, guaranteedPod(testcluster.PodSpec{
			Name: fmt.Sprintf("p-%d", i), CPU: "16", Memory: "16Gi", GPUs: 4,
			Labels: map[string]string{"numa-test": "double-booking"},
		}))
	}
	createPods(t, c, pods...)

	// Wait until n pods are bound and every other pod has been tried and
	// rejected; stop early on a double booking.
	var (
		where     map[string]string
		violation string
	)
	err := testcluster.Eventually(ctxFor(t), 90*time.Second, func(ctx context.Context) (bool, error) {
		var err error
		if where, err = podNodes(ctx, c, "default", "numa-test=double-booking"); err != nil {
			return false, err
		}
		failed, err := failedScheduling(ctx, c, "default")
		if err != nil {
			return false, err
		}
		perNode := map[string][]string{}
		bound, triedPending := 0, 0
		for pod, node := range where {
			if node == "" {
				if len(failed[pod]) > 0 {
					triedPending++
				}
				continue
			}
			bound++
			perNode[node] = append(perNode[node], pod)
			if len(perNode[node]) > 1 {
				sort.Strings(perNode[node])
				violation = fmt.Sprintf("node %s got pods %v; its zones fit one", node, perNode[node])
				return true, nil
			}
		}
		if bound > n {
			violation = fmt.Sprintf("%d pods bound, zones fit %d", bound, n)
			return true, nil
		}
		return bound == n && triedPending == len(where)-n, nil
	})
	if violation != "" {
		t.Fatalf("double booking: %s (placement %v)", violation, where)
	}
	if err != nil {
		t.Fatalf("want %d pods bound, one per node, and the others rejected (placement %v): %v", n, where, err)
	}

	// The pending pods were all tried after the zones were handed out; check
	// the final placement once more.
	where, err = podNodes(ctxFor(t), c, "default", "numa-test=double-booking")
	if err != nil {
		t.Fatal(err)
	}
	perNode := map[string]int{}
	for _, node := range where {
		if node != "" {
			perNode[node]++
		}
	}
	if len(perNode) != n {
		t.Fatalf("pods bound to %d nodes, want one on each of %d (placement %v)", len(perNode), n, where)
	}
	for node, k := range perNode {
		if k != 1 {
			t.Fatalf("node %s has %d pods, want 1 (placement %v)", node, k, where)
		}
	}
}

// TestNUMALateNRT: a node labelled as enforcing single-numa-node whose NRT
// object is not published yet takes no aligned pod (and says why), but takes
// other pods; once the object appears the aligned pod is scheduled.
func TestNUMALateNRT(t *testing.T) {
	c := startCluster(t, testcluster.NodeSpec{Name: "late", CPU: "32", Memory: "128Gi", GPUs: 8,
		Labels: map[string]string{phalanxv1alpha1.TopologyManagerPolicyLabel: "single-numa-node"}})
	startScheduler(t, c)

	createPods(t, c,
		guaranteedPod(testcluster.PodSpec{Name: "aligned", CPU: "4", Memory: "8Gi", GPUs: 2}),
		testcluster.PodSpec{Name: "besteffort"}.Pod(),
	)
	// A pod with nothing to align is not held back by the missing object.
	waitBound(t, c, "default", "besteffort")

	var notes []string
	err := testcluster.Eventually(ctxFor(t), 60*time.Second, func(ctx context.Context) (bool, error) {
		failed, err := failedScheduling(ctx, c, "default")
		if err != nil {
			return false, err
		}
		notes = failed["aligned"]
		for _, note := range notes {
			if strings.Contains(note, "NodeResourceTopology") {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no FailedScheduling event mentioning NodeResourceTopology for the aligned pod (events: %q): %v", notes, err)
	}
	if node := podOn(t, c, "default", "aligned"); node != "" {
		t.Fatalf("aligned pod bound to %s, a node without NodeResourceTopology", node)
	}

	createNRT(t, c, "late",
		testcluster.ZoneSpec{Name: "node-0", CPU: "16", Memory: "64Gi", GPUs: 4},
		testcluster.ZoneSpec{Name: "node-1", CPU: "16", Memory: "64Gi", GPUs: 4},
	)
	waitBound(t, c, "default", "aligned")
}

// TestNUMAGangPlannedOnZones: the whole-gang planner counts members by zones,
// not by node totals. Split nodes look like room for 2 members each but have
// none, so a gang that only fits with them is rejected whole; one more
// aligned node lets it bind, on aligned nodes only.
func TestNUMAGangPlannedOnZones(t *testing.T) {
	good := nodes("good", 3, testcluster.NodeSpec{CPU: "32", Memory: "128Gi", GPUs: 8})
	bad := nodes("split", 2, testcluster.NodeSpec{CPU: "48", Memory: "192Gi", GPUs: 8})
	c := startCluster(t, append(append([]testcluster.NodeSpec{}, good...), bad...)...)
	goodZones := []testcluster.ZoneSpec{
		{Name: "node-0", CPU: "16", Memory: "64Gi", GPUs: 4},
		{Name: "node-1", CPU: "16", Memory: "64Gi", GPUs: 4},
	}
	for _, s := range good {
		createNRT(t, c, s.Name, goodZones...)
	}
	for _, s := range bad {
		createNRT(t, c, s.Name,
			testcluster.ZoneSpec{Name: "node-0", CPU: "16", Memory: "64Gi", GPUs: 3},
			testcluster.ZoneSpec{Name: "node-1", CPU: "16", Memory: "64Gi", GPUs: 3},
			testcluster.ZoneSpec{Name: "node-2", CPU: "16", Memory: "64Gi", GPUs: 2},
		)
	}
	startScheduler(t, c)
	ctx := ctxFor(t)

	const members = 8
	if err := c.CreatePodGroup(ctx, testcluster.PodGroup("default", "zones", members)); err != nil {
		t.Fatal(err)
	}
	var pods []*v1.Pod
	for i := 0; i < members; i++ {
		pods = append(pods, guaranteedPod(testcluster.PodSpec{
			Name: fmt.Sprintf("zones-%d", i), PodGroup: "zones", CPU: "4", Memory: "8Gi", GPUs: 4,
		}))
	}
	createPods(t, c, pods...)

	// Zones: 3 aligned nodes × 2 = 6 < 8. Node totals would say 10.
	cond := waitCondition(t, c, "default", "zones", "Unschedulable")
	t.Logf("condition: %s", cond.Message)
	assertBound(t, c, "default", "zones", 0)

	extra := testcluster.NodeSpec{Name: "good-3", CPU: "32", Memory: "128Gi", GPUs: 8}
	// As in a real cluster: the node first, then its agent publishes the NRT.
	if err := c.CreateNodes(ctx, extra); err != nil {
		t.Fatal(err)
	}
	createNRT(t, c, extra.Name, goodZones...)
	waitBoundCount(t, c, "default", "zones", members)

	bound, err := c.BoundPods(ctx, "default", pgv1alpha1.PodGroupLabel+"=zones")
	if err != nil {
		t.Fatal(err)
	}
	perNode := map[string]int{}
	for _, p := range bound {
		if !strings.HasPrefix(p.Spec.NodeName, "good-") {
			t.Errorf("member %s bound to %s, whose zones cannot host it", p.Name, p.Spec.NodeName)
		}
		perNode[p.Spec.NodeName]++
	}
	for node, k := range perNode {
		if k > 2 {
			t.Errorf("node %s has %d members, its zones fit 2", node, k)
		}
	}
}
