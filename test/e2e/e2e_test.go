package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// TestE2E runs the suite in each mode on its own control plane (in-process),
// or once against PHALANX_E2E_KUBECONFIG.
func TestE2E(t *testing.T) {
	if kc := os.Getenv("PHALANX_E2E_KUBECONFIG"); kc != "" {
		runSuite(t, startExisting(t, kc))
		return
	}
	for _, mode := range []string{modeSecond, modeReplace} {
		t.Run(mode, func(t *testing.T) {
			start := time.Now()
			env := startLocal(t, mode)
			t.Logf("control plane, chart and components up in %v", time.Since(start).Round(time.Millisecond))
			runSuite(t, env)
			t.Logf("%s mode done in %v", mode, time.Since(start).Round(time.Millisecond))
		})
	}
}

func runSuite(t *testing.T, env *Env) {
	t.Run("DefaultSchedulerProfile", func(t *testing.T) { testDefaultScheduler(t, env) })
	t.Run("Gangs", func(t *testing.T) { testGangs(t, env) })
	t.Run("OrderedStartup", func(t *testing.T) { testOrderedStartup(t, env) })
	t.Run("Queues", func(t *testing.T) { testQueues(t, env) })
	t.Run("Topology", func(t *testing.T) { testTopology(t, env) })
	t.Run("NUMA", func(t *testing.T) { testNUMA(t, env) })
	t.Run("KubectlPlugin", func(t *testing.T) { testKubectlPlugin(t, env) })
	// After the scenarios above, so that every metric has samples.
	t.Run("Metrics", func(t *testing.T) { testMetrics(t, env) })
	// Last: everything the components did must have been allowed.
	t.Run("NoForbidden", func(t *testing.T) { env.checkNoForbidden(t) })
}

// scenario is one test's namespace and nodes, apart from the others'.
type scenario struct {
	env  *Env
	name string
	ns   string
}

func newScenario(t *testing.T, env *Env, name string) *scenario {
	t.Helper()
	s := &scenario{env: env, name: name + "-" + rand.String(5)}
	s.ns = "e2e-" + s.name
	ctx := ctxFor(t, time.Minute)
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if t.Failed() {
			s.dump(ctx, t)
		}
		// Pods, gangs and nodes go; the namespace stays (deleting it while the
		// scheduler still reports on its pods would make the API server refuse
		// those events with 403, which the suite treats as a failure).
		zero := int64(0)
		_ = env.Client.CoreV1().Pods(s.ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		_ = env.PodGroups.SchedulingV1alpha1().PodGroups(s.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = testcluster.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			pods, err := env.Client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{})
			return err == nil && len(pods.Items) == 0, err
		})
		_ = env.Client.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: scenarioLabel + "=" + s.name})
	})
	return s
}

// dump logs what a user would look at: pods, PodGroups and events.
func (s *scenario) dump(ctx context.Context, t *testing.T) {
	if pods, err := s.env.Client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range pods.Items {
			t.Logf("pod %s: node %q phase %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		}
	}
	if pgs, err := s.env.Dynamic.Resource(podGroupsGVR).Namespace(s.ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, pg := range pgs.Items {
			status, _, _ := unstructured.NestedFieldNoCopy(pg.Object, "status")
			t.Logf("podgroup %s: status %v", pg.GetName(), status)
		}
	}
	if evs, err := s.env.Client.CoreV1().Events(s.ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, e := range evs.Items {
			t.Logf("event %s %s/%s %s: %s", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
}

// nodes creates fake nodes (kwok plays their kubelet) that only this
// scenario's pods can land on.
func (s *scenario) nodes(t *testing.T, specs ...testcluster.NodeSpec) {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	for _, spec := range specs {
		spec.Name = s.name + "-" + spec.Name
		n := spec.Node()
		n.Labels[scenarioLabel] = s.name
		n.Annotations = map[string]string{fakeNodeAnnotation: "fake"}
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: suiteTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule})
		got, err := s.env.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// kwok may write the node's status between the create and ours.
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			got.Status = n.Status
			_, err := s.env.Client.CoreV1().Nodes().UpdateStatus(ctx, got, metav1.UpdateOptions{})
			if apierrors.IsConflict(err) {
				if latest, getErr := s.env.Client.CoreV1().Nodes().Get(ctx, got.Name, metav1.GetOptions{}); getErr == nil {
					got = latest
				}
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if spec.NRTPolicy != "" {
			t.Fatal("use scenario.nrt for NUMA data")
		}
	}
}

// pods creates pods on this scenario's nodes.
func (s *scenario) pods(t *testing.T, specs ...testcluster.PodSpec) {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	for _, spec := range specs {
		spec.Namespace = s.ns
		spec.NodeSelector = map[string]string{scenarioLabel: s.name}
		spec.Tolerations = append(spec.Tolerations, corev1.Toleration{Key: suiteTaint, Operator: corev1.TolerationOpExists})
		p := spec.Pod()
		if _, err := s.env.Client.CoreV1().Pods(s.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func (s *scenario) gang(t *testing.T, name string, minMember int32, annotations, labels map[string]string, n int, pod testcluster.PodSpec) {
	t.Helper()
	pg := testcluster.PodGroup(s.ns, name, minMember)
	pg.Annotations, pg.Labels = annotations, labels
	if err := s.env.CreatePodGroup(ctxFor(t, time.Minute), pg); err != nil {
		t.Fatal(err)
	}
	specs := make([]testcluster.PodSpec, n)
	for i := range specs {
		specs[i] = pod
		specs[i].Name = fmt.Sprintf("%s-%d", name, i)
		specs[i].PodGroup = name
	}
	s.pods(t, specs...)
}

func (s *scenario) bound(ctx context.Context, selector string) ([]corev1.Pod, error) {
	return s.env.BoundPods(ctx, s.ns, selector)
}

func gangSelector(name string) string { return pgv1alpha1.PodGroupLabel + "=" + name }

// waitCondition waits for the PodGroup's Scheduled condition to have status
// and reason, as `kubectl describe podgroup` shows it.
func (s *scenario) waitCondition(t *testing.T, pg string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	err := testcluster.Eventually(ctxFor(t, 3*time.Minute), 2*time.Minute, func(ctx context.Context) (bool, error) {
		conds, err := podGroupConditions(ctx, s.env, s.ns, pg)
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(conds, "Scheduled")
		if c == nil {
			return false, nil
		}
		got = *c
		return c.Status == status && c.Reason == reason, nil
	})
	if err != nil {
		t.Fatalf("PodGroup %s/%s: want condition Scheduled=%s reason %s, last %+v: %v", s.ns, pg, status, reason, got, err)
	}
	return got
}

// waitEvent waits for an event about an object with reason, as `kubectl
// events` shows it.
func (s *scenario) waitEvent(t *testing.T, kind, name, reason string) corev1.Event {
	t.Helper()
	var found corev1.Event
	err := testcluster.Eventually(ctxFor(t, 3*time.Minute), 2*time.Minute, func(ctx context.Context) (bool, error) {
		evs, err := s.env.Client.CoreV1().Events(s.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Kind == kind && e.Reason == reason {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s event about %s %s/%s: %v", reason, kind, s.ns, name, err)
	}
	return found
}

func waitBound(t *testing.T, s *scenario, selector string, want int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	err := testcluster.Eventually(ctxFor(t, 3*time.Minute), 2*time.Minute, func(ctx context.Context) (bool, error) {
		var err error
		pods, err = s.bound(ctx, selector)
		return len(pods) == want, err
	})
	if err != nil {
		t.Fatalf("%s in %s: %d pods bound, want %d: %v", selector, s.ns, len(pods), want, err)
	}
	return pods
}

func testDefaultScheduler(t *testing.T, env *Env) {
	s := newScenario(t, env, "default")
	s.nodes(t, testcluster.NodeSpec{Name: "n", CPU: "2", Memory: "4Gi"})
	// A pod that names no scheduler: the stock kube-scheduler binds it in
	// second-scheduler mode, phalanx's default-scheduler profile in replace
	// mode.
	s.pods(t, testcluster.PodSpec{Name: "plain", CPU: "100m", SchedulerName: corev1.DefaultSchedulerName})
	waitBound(t, s, "", 1)

	// The phalanx leader holds the Lease its mode names: its own in the
	// release namespace, or kube-scheduler's in replace mode.
	leaseNS, leaseName := env.Namespace, "phalanx-scheduler"
	if env.Mode == modeReplace {
		leaseNS, leaseName = "kube-system", "kube-scheduler"
	}
	var holder string
	err := testcluster.Eventually(ctxFor(t, 2*time.Minute), time.Minute, func(ctx context.Context) (bool, error) {
		lease, err := env.Client.CoordinationV1().Leases(leaseNS).Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if lease.Spec.HolderIdentity == nil {
			return false, nil
		}
		holder = *lease.Spec.HolderIdentity
		return env.isPhalanxLeader(ctx, holder)
	})
	if err != nil {
		t.Fatalf("%s mode: Lease %s/%s is held by %q, not phalanx: %v", env.Mode, leaseNS, leaseName, holder, err)
	}
}

func testGangs(t *testing.T, env *Env) {
	s := newScenario(t, env, "gangs")
	s.nodes(t,
		testcluster.NodeSpec{Name: "n0", CPU: "4", Memory: "8Gi"},
		testcluster.NodeSpec{Name: "n1", CPU: "4", Memory: "8Gi"})

	// Three members of 3 CPUs on two 4-CPU nodes: the whole gang never fits,
	// so none may bind, and the PodGroup says why.
	s.gang(t, "too-big", 3, nil, nil, 3, testcluster.PodSpec{CPU: "3", Memory: "1Gi"})
	cond := s.waitCondition(t, "too-big", metav1.ConditionFalse, "Unschedulable")
	if cond.Message == "" {
		t.Errorf("the Unschedulable condition of too-big has no message")
	}
	ev := s.waitEvent(t, "PodGroup", "too-big", "Unschedulable")
	if ev.Type != corev1.EventTypeWarning || ev.Message == "" {
		t.Errorf("event %s %q, want a Warning that says why", ev.Type, ev.Message)
	}
	if b, err := s.bound(ctxFor(t, time.Minute), gangSelector("too-big")); err != nil || len(b) != 0 {
		t.Fatalf("too-big: %d members bound (%v), want none", len(b), err)
	}

	// Four members of 2 CPUs fit exactly: all bind, together.
	s.gang(t, "fits", 4, nil, nil, 4, testcluster.PodSpec{CPU: "2", Memory: "1Gi"})
	waitBound(t, s, gangSelector("fits"), 4)
	s.waitCondition(t, "fits", metav1.ConditionTrue, "Scheduled")
	if b, err := s.bound(ctxFor(t, time.Minute), gangSelector("too-big")); err != nil || len(b) != 0 {
		t.Fatalf("too-big: %d members bound (%v), want none", len(b), err)
	}

	// The controller (its own ServiceAccount) reports the running gang.
	err := testcluster.Eventually(ctxFor(t, 3*time.Minute), 2*time.Minute, func(ctx context.Context) (bool, error) {
		pg, err := env.PodGroups.SchedulingV1alpha1().PodGroups(s.ns).Get(ctx, "fits", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return pg.Status.Phase == pgv1alpha1.PodGroupRunning && pg.Status.Running == 4, nil
	})
	if err != nil {
		t.Fatalf("PodGroup fits: phase Running with 4 running members never reported: %v", err)
	}
}

// testOrderedStartup: an implicit gang over a StatefulSet with the default
// OrderedReady policy can never form (the controller creates pod 1 only once
// pod 0 is Ready). The scheduler, under its own RBAC, reads the StatefulSet
// and says so in the PodGroup's condition and a Warning event.
func testOrderedStartup(t *testing.T, env *Env) {
	s := newScenario(t, env, "ordered")
	labels := map[string]string{"app": s.name}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: s.ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To[int32](3),
			ServiceName: "db",
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{phalanxv1alpha1.GangSizeAnnotation: "3"}},
				Spec: corev1.PodSpec{
					SchedulerName:                 "phalanx-scheduler",
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					NodeSelector:                  map[string]string{scenarioLabel: s.name},
					Tolerations:                   []corev1.Toleration{{Key: suiteTaint, Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{Name: "db", Image: "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}},
				},
			},
		},
	}
	if _, err := env.Client.AppsV1().StatefulSets(s.ns).Create(ctxFor(t, time.Minute), sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Runs before the scenario's cleanup, which waits for the pods to go.
	t.Cleanup(func() {
		_ = env.Client.AppsV1().StatefulSets(s.ns).Delete(context.Background(), "db", metav1.DeleteOptions{})
	})
	gang, cond, err := env.WaitImplicitGangCondition(ctxFor(t, 3*time.Minute), s.ns, "app="+s.name, 1, "Scheduled", "OrderedStartup", 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cond.Message, "podManagementPolicy: Parallel") {
		t.Errorf("condition %q does not name the fix", cond.Message)
	}
	if ev := s.waitEvent(t, "PodGroup", gang.Name, "OrderedStartup"); ev.Type != corev1.EventTypeWarning {
		t.Errorf("OrderedStartup event of type %s, want Warning", ev.Type)
	}
}

func testQueues(t *testing.T, env *Env) {
	s := newScenario(t, env, "queues")
	s.nodes(t,
		testcluster.NodeSpec{Name: "n0", CPU: "4", Memory: "8Gi"},
		testcluster.NodeSpec{Name: "n1", CPU: "4", Memory: "8Gi"})
	ctx := ctxFor(t, 5*time.Minute)
	queue := func(name string, spec phalanxv1alpha1.QueueSpec) string {
		q := &phalanxv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: s.name + "-" + name}, Spec: spec}
		if _, err := env.Phalanx.SchedulingV1alpha1().Queues().Create(ctx, q, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = env.Phalanx.SchedulingV1alpha1().Queues().Delete(context.Background(), q.Name, metav1.DeleteOptions{})
		})
		return q.Name
	}
	parent := queue("parent", phalanxv1alpha1.QueueSpec{Capability: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}})
	a := queue("a", phalanxv1alpha1.QueueSpec{Parent: parent})
	b := queue("b", phalanxv1alpha1.QueueSpec{Parent: parent})
	closed := queue("closed", phalanxv1alpha1.QueueSpec{State: phalanxv1alpha1.QueueStateClosed})
	inQueue := func(q string) map[string]string { return map[string]string{phalanxv1alpha1.QueueLabel: q} }

	// A closed queue admits nothing; the PodGroup and its events say so.
	s.gang(t, "in-closed", 1, nil, inQueue(closed), 1, testcluster.PodSpec{CPU: "100m", Labels: inQueue(closed)})
	s.waitCondition(t, "in-closed", metav1.ConditionFalse, "QueueAdmission")
	s.waitEvent(t, "PodGroup", "in-closed", "QueueAdmission")

	// Queue a fills the parent's capability while b asks for nothing.
	s.gang(t, "a", 4, nil, inQueue(a), 4, testcluster.PodSpec{CPU: "1", Memory: "256Mi", Labels: inQueue(a)})
	waitBound(t, s, gangSelector("a"), 4)
	// The controller reports the queue's usage in its status.
	err := testcluster.Eventually(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		q, err := env.Phalanx.SchedulingV1alpha1().Queues().Get(ctx, a, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cpu := q.Status.Allocated[corev1.ResourceCPU]
		return cpu.Cmp(resource.MustParse("4")) == 0, nil
	})
	if err != nil {
		t.Fatalf("Queue %s: status.allocated.cpu never became 4: %v", a, err)
	}

	// b's gang is within b's deserved half of the parent: a's gang, above its
	// share, is reclaimed whole and b's gang binds.
	s.gang(t, "b", 2, nil, inQueue(b), 2, testcluster.PodSpec{CPU: "1", Memory: "256Mi", Labels: inQueue(b)})
	waitBound(t, s, gangSelector("b"), 2)
	err = testcluster.Eventually(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := env.Client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: gangSelector("a")})
		if err != nil {
			return false, err
		}
		live := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				live++
			}
		}
		return live == 0, nil
	})
	if err != nil {
		t.Fatalf("gang a was not reclaimed whole: %v", err)
	}
}

// leafTopology creates NetworkTopology default with a leaf level (nodes
// labelled leafLabel) above hosts, for the test's lifetime.
func leafTopology(ctx context.Context, t *testing.T, env *Env, leafLabel string) {
	t.Helper()
	nt := &phalanxv1alpha1.NetworkTopology{
		ObjectMeta: metav1.ObjectMeta{Name: phalanxv1alpha1.DefaultNetworkTopologyName},
		Spec: phalanxv1alpha1.NetworkTopologySpec{Levels: []phalanxv1alpha1.TopologyLevel{
			{Name: "leaf", NodeLabel: leafLabel},
			{Name: "host", NodeLabel: corev1.LabelHostname},
		}},
	}
	if _, err := env.Phalanx.SchedulingV1alpha1().NetworkTopologies().Create(ctx, nt, metav1.CreateOptions{}); err != nil {
		t.Fatalf("NetworkTopology default: %v", err)
	}
	t.Cleanup(func() {
		_ = env.Phalanx.SchedulingV1alpha1().NetworkTopologies().Delete(context.Background(), nt.Name, metav1.DeleteOptions{})
	})
}

func testTopology(t *testing.T, env *Env) {
	s := newScenario(t, env, "topology")
	const leafLabel = "e2e.phalanx.dev/leaf"
	ctx := ctxFor(t, 5*time.Minute)
	leafTopology(ctx, t, env, leafLabel)
	var nodes []testcluster.NodeSpec
	for _, leaf := range []string{"a", "b"} {
		for i := 0; i < 2; i++ {
			nodes = append(nodes, testcluster.NodeSpec{Name: fmt.Sprintf("%s%d", leaf, i), CPU: "2", Memory: "4Gi",
				Labels: map[string]string{leafLabel: leaf}})
		}
	}
	s.nodes(t, nodes...)
	required := map[string]string{phalanxv1alpha1.TopologyRequiredAnnotation: "leaf"}

	// Five 1-CPU members fit the cluster (8 CPUs) but no leaf (4 CPUs each).
	s.gang(t, "wide", 5, required, nil, 5, testcluster.PodSpec{CPU: "1", Memory: "256Mi"})
	s.waitCondition(t, "wide", metav1.ConditionFalse, "Unschedulable")
	if b, err := s.bound(ctx, gangSelector("wide")); err != nil || len(b) != 0 {
		t.Fatalf("wide: %d members bound (%v), want none", len(b), err)
	}

	// Four fit one leaf: all land in the same one.
	s.gang(t, "leafed", 4, required, nil, 4, testcluster.PodSpec{CPU: "1", Memory: "256Mi"})
	pods := waitBound(t, s, gangSelector("leafed"), 4)
	leaves := map[string]bool{}
	for _, p := range pods {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		leaves[n.Labels[leafLabel]] = true
	}
	if len(leaves) != 1 {
		t.Fatalf("gang leafed spans leaves %v, want one", leaves)
	}
}

func testNUMA(t *testing.T, env *Env) {
	s := newScenario(t, env, "numa")
	// The label holds the node to alignment until the scheduler has seen its
	// NodeResourceTopology: without it, a pod created right after the NRT
	// could find the node still looking like a plain one and bind.
	s.nodes(t, testcluster.NodeSpec{Name: "n0", CPU: "4", Memory: "8Gi",
		Labels: map[string]string{phalanxv1alpha1.TopologyManagerPolicyLabel: "single-numa-node"}})
	node := s.name + "-n0"
	ctx := ctxFor(t, 5*time.Minute)
	// As NFD topology-updater publishes it: single-numa-node, two zones.
	nrt := testcluster.NRT(node, "single-numa-node", "container",
		testcluster.ZoneSpec{Name: "node-0", CPU: "2", Memory: "4Gi"},
		testcluster.ZoneSpec{Name: "node-1", CPU: "2", Memory: "4Gi"})
	if err := env.ApplyNRT(ctx, nrt); err != nil {
		t.Fatalf("NodeResourceTopology: %v", err)
	}
	t.Cleanup(func() {
		if c, err := env.NRTClient(); err == nil {
			_ = c.TopologyV1alpha2().NodeResourceTopologies().Delete(context.Background(), node, metav1.DeleteOptions{})
		}
	})

	// 3 pinned CPUs fit the node but no NUMA zone: the kubelet would refuse
	// it (TopologyAffinityError), so phalanx does not bind it.
	s.pods(t, testcluster.PodSpec{Name: "three-cpus", CPU: "3", Memory: "1Gi", Guaranteed: true})
	err := testcluster.Eventually(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		p, err := env.Client.CoreV1().Pods(s.ns).Get(ctx, "three-cpus", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				// Refused for the zones, not for an NRT not yet seen.
				return strings.Contains(c.Message, "zones:"), nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod three-cpus: no PodScheduled=False condition that names NUMA zones: %v", err)
	}
	// 2 pinned CPUs fit a zone.
	s.pods(t, testcluster.PodSpec{Name: "two-cpus", CPU: "2", Memory: "1Gi", Guaranteed: true})
	pods := waitBound(t, s, "", 1)
	if pods[0].Name != "two-cpus" {
		t.Fatalf("bound %s, want two-cpus", pods[0].Name)
	}
}

// documentedMetrics are the phalanx series a scrape must show after the
// scenarios above (docs/metrics.md lists them all).
var documentedMetrics = []string{
	"phalanx_gang_plan_outcomes_total",
	"phalanx_gang_plan_duration_seconds_bucket",
	"phalanx_gang_wait_seconds_bucket",
	"phalanx_queue_allocated",
	"phalanx_queue_deserved",
	"phalanx_queue_pending",
	"phalanx_queue_reclaimed_gangs_total",
}

func testMetrics(t *testing.T, env *Env) {
	ctx := ctxFor(t, 2*time.Minute)
	body := env.scrape(ctx, t)
	for _, m := range documentedMetrics {
		if !hasSeries(body, m) {
			t.Errorf("the scheduler's /metrics has no %s series", m)
		}
	}
	if !strings.Contains(body, `phalanx_gang_plan_outcomes_total{outcome="planned"}`) {
		t.Errorf("no planned outcome counted after the gang scenarios")
	}
	// The gangs scenarios had gangs waiting (too-big never fits): the gauge
	// has a series per reason they waited for.
	if !strings.Contains(body, `phalanx_gang_pending{reason="Unschedulable"}`) {
		t.Errorf("the scheduler's /metrics has no phalanx_gang_pending{reason=\"Unschedulable\"} series")
	}
}

func hasSeries(body, name string) bool {
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			return true
		}
	}
	return false
}
