package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/internal/testcluster"
	"github.com/phalanx-sched/phalanx/manifests"
)

// The tests of this file run the Workload API (scheduling.k8s.io/v1beta1,
// Kubernetes 1.37) on a real in-process API server: v1beta1 PodGroups made
// by the test, with plain pods naming them in spec.schedulingGroup (no
// controller recreates a pod, so counts are exact), scheduled by the
// phalanx-scheduler binary with the canonical configuration.

// upstreamGangLabel marks the pods of one v1beta1 PodGroup (the test's own
// label: upstream needs none).
const upstreamGangLabel = "workloadapi.phalanx.dev/gang"

// startWorkloadAPICluster starts a control plane that serves the Workload
// API with the given feature gates on ("Gate=true,..."), with nodes.
func startWorkloadAPICluster(t *testing.T, gates string, specs ...testcluster.NodeSpec) *testcluster.Cluster {
	t.Helper()
	return startGatedCluster(t, "scheduling.k8s.io/v1beta1=true", gates, specs...)
}

// startGatedCluster starts a control plane with an API server's
// --runtime-config and feature gates ("Gate=true,..."), with nodes. Feature
// gates are process-wide and the API server reads them from this process:
// they are set here for the test, before the cluster starts, so that they
// are restored after it has stopped (cleanups run last in, first out).
func startGatedCluster(t *testing.T, runtimeConfig, gates string, specs ...testcluster.NodeSpec) *testcluster.Cluster {
	t.Helper()
	overrides := featuregatetesting.FeatureOverrides{}
	for _, kv := range strings.Split(gates, ",") {
		name, value, _ := strings.Cut(kv, "=")
		on, err := strconv.ParseBool(value)
		if err != nil {
			t.Fatalf("feature gate %q: %v", kv, err)
		}
		overrides[featuregate.Feature(name)] = on
	}
	featuregatetesting.SetFeatureGatesDuringTest(t, utilfeature.DefaultFeatureGate, overrides)
	c, err := testcluster.Start(t, testcluster.Options{APIServerFlags: []string{
		"--runtime-config=" + runtimeConfig,
		"--feature-gates=" + gates,
	}})
	if err != nil {
		t.Fatalf("starting cluster: %v", err)
	}
	if err := c.CreateNodes(ctxFor(t), specs...); err != nil {
		t.Fatal(err)
	}
	return c
}

// upstreamGang is a v1beta1 PodGroup with a gang policy.
type upstreamGang struct {
	Namespace, Name string
	MinCount        int32
	// PriorityClass is spec.priorityClassName (the API server's priority
	// admission fills spec.priority and, with PodGroupPreemptionPolicy,
	// spec.preemptionPolicy from it).
	PriorityClass string
	// PreemptionPolicy, when set, is spec.preemptionPolicy (it must agree
	// with the PriorityClass's).
	PreemptionPolicy schedulingv1beta1.PreemptionPolicy
	// DisruptAll sets disruptionMode all; else the API's default (single).
	DisruptAll bool
	// TopologyKey, when set, is the one topology constraint.
	TopologyKey string
	// Workload and Template, when set, make spec.workloadRef.
	Workload, Template string
}

func (g upstreamGang) podGroup() *schedulingv1beta1.PodGroup {
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: g.Name, Namespace: g.Namespace},
		Spec: schedulingv1beta1.PodGroupSpec{
			SchedulingPolicy:  schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: g.MinCount}},
			PriorityClassName: g.PriorityClass,
		},
	}
	if g.PreemptionPolicy != "" {
		pg.Spec.PreemptionPolicy = ptr.To(g.PreemptionPolicy)
	}
	if g.DisruptAll {
		pg.Spec.DisruptionMode = &schedulingv1beta1.DisruptionMode{All: &schedulingv1beta1.AllDisruptionMode{}}
	}
	if g.TopologyKey != "" {
		pg.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{
			Topology: []schedulingv1beta1.TopologyConstraint{{Key: g.TopologyKey}}}
	}
	if g.Workload != "" {
		pg.Spec.WorkloadRef = &schedulingv1beta1.WorkloadReference{WorkloadName: g.Workload, TemplateName: g.Template}
	}
	return pg
}

// createUpstreamGang creates the PodGroup and returns it as the API server
// admitted it.
func createUpstreamGang(t *testing.T, c *testcluster.Cluster, g upstreamGang) *schedulingv1beta1.PodGroup {
	t.Helper()
	pg, err := c.Client.SchedulingV1beta1().PodGroups(g.Namespace).Create(ctxFor(t), g.podGroup(), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating PodGroup %s/%s: %v", g.Namespace, g.Name, err)
	}
	return pg
}

// upstreamMember is a pod of 4 CPU naming the PodGroup in
// spec.schedulingGroup, for schedulerName (phalanx-scheduler if "").
func upstreamMember(ns, podGroup, name, schedulerName string) *v1.Pod {
	p := testcluster.PodSpec{Name: name, Namespace: ns, CPU: "4", SchedulerName: schedulerName,
		Labels: map[string]string{upstreamGangLabel: podGroup}}.Pod()
	p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(podGroup)}
	return p
}

// createUpstreamMembers creates members of a PodGroup for phalanx-scheduler.
func createUpstreamMembers(t *testing.T, c *testcluster.Cluster, ns, podGroup string, names ...string) {
	t.Helper()
	createMembersFor(t, c, "", ns, podGroup, names...)
}

func createMembersFor(t *testing.T, c *testcluster.Cluster, schedulerName, ns, podGroup string, names ...string) {
	t.Helper()
	for _, name := range names {
		created, err := c.Client.CoreV1().Pods(ns).Create(ctxFor(t), upstreamMember(ns, podGroup, name, schedulerName), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if created.Spec.SchedulingGroup == nil {
			t.Fatal("the API server dropped spec.schedulingGroup: the Workload API is not enabled")
		}
	}
}

func memberNames(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

func gangSelector(podGroup string) string { return upstreamGangLabel + "=" + podGroup }

// livePods are the pods of selector that exist and are not being deleted.
func livePods(ctx context.Context, c *testcluster.Cluster, ns, selector string) ([]v1.Pod, error) {
	list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	var out []v1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

func podNames(pods []v1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Name)
	}
	sort.Strings(out)
	return out
}

// waitLive waits until exactly the named pods of selector are live (the
// others deleted), and that all of them are bound.
func waitLive(t *testing.T, c *testcluster.Cluster, ns, selector string, want ...string) {
	t.Helper()
	sort.Strings(want)
	var live []v1.Pod
	err := testcluster.Eventually(ctxFor(t), 30*time.Second, func(ctx context.Context) (bool, error) {
		got, err := livePods(ctx, c, ns, selector)
		if err != nil {
			return false, err
		}
		live = got
		return fmt.Sprint(podNames(live)) == fmt.Sprint(want), nil
	})
	if err != nil {
		dumpPods(t, c, ns)
		t.Fatalf("live pods of %q: %v, want %v: %v", selector, podNames(live), want, err)
	}
	for _, p := range live {
		if p.Spec.NodeName == "" {
			t.Fatalf("pod %s/%s is not bound", ns, p.Name)
		}
	}
}

// waitUpstreamCondition waits until the v1beta1 PodGroup has a condition of
// condType with status and reason, whose message holds every part.
func waitUpstreamCondition(t *testing.T, c *testcluster.Cluster, ns, name, condType string, status metav1.ConditionStatus, reason string, parts ...string) *metav1.Condition {
	t.Helper()
	var conds []metav1.Condition
	var cond *metav1.Condition
	err := testcluster.Eventually(ctxFor(t), 60*time.Second, func(ctx context.Context) (bool, error) {
		pg, err := c.Client.SchedulingV1beta1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds = pg.Status.Conditions
		cond = apimeta.FindStatusCondition(conds, condType)
		if cond == nil || cond.Status != status || cond.Reason != reason {
			return false, nil
		}
		for _, p := range parts {
			if !strings.Contains(cond.Message, p) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		dumpPods(t, c, ns)
		t.Fatalf("PodGroup %s/%s never got %s=%s reason %s with %q (conditions: %s): %v", ns, name, condType, status, reason, parts, describeConditions(conds), err)
	}
	return cond
}

func describeConditions(conds []metav1.Condition) string {
	var b strings.Builder
	for _, c := range conds {
		fmt.Fprintf(&b, "\n  %s=%s %s (gen %d): %s", c.Type, c.Status, c.Reason, c.ObservedGeneration, c.Message)
	}
	return b.String()
}

func upstreamConditionsOf(t *testing.T, c *testcluster.Cluster, ns, name string) []metav1.Condition {
	t.Helper()
	pg, err := c.Client.SchedulingV1beta1().PodGroups(ns).Get(ctxFor(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pg.Status.Conditions
}

// waitMembersUnschedulable waits until every named pod has been turned down
// by its scheduler (PodScheduled=False, Unschedulable) and none of selector
// is bound; it returns the members' messages.
func waitMembersUnschedulable(t *testing.T, c *testcluster.Cluster, ns, selector string, names ...string) map[string]string {
	t.Helper()
	msgs := map[string]string{}
	var bound []string
	err := testcluster.Eventually(ctxFor(t), 60*time.Second, func(ctx context.Context) (bool, error) {
		list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		bound, msgs = nil, map[string]string{}
		for _, p := range list.Items {
			if p.Spec.NodeName != "" {
				bound = append(bound, p.Name+" on "+p.Spec.NodeName)
			}
			if cond := podScheduledCondition(&p); cond != nil && cond.Status == v1.ConditionFalse && cond.Reason == v1.PodReasonUnschedulable {
				msgs[p.Name] = cond.Message
			}
		}
		if len(bound) > 0 {
			return true, nil // fails below
		}
		for _, n := range names {
			if _, ok := msgs[n]; !ok {
				return false, nil
			}
		}
		return true, nil
	})
	if len(bound) > 0 {
		t.Fatalf("pods of %q bound while they should all wait: %v", selector, bound)
	}
	if err != nil {
		dumpPods(t, c, ns)
		t.Fatalf("not every one of %v was turned down (unschedulable: %v): %v", names, msgs, err)
	}
	return msgs
}

func createNamespace(t *testing.T, c *testcluster.Cluster, ns string) {
	t.Helper()
	if _, err := c.Client.CoreV1().Namespaces().Create(ctxFor(t), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// deletePodsNow deletes the pods of selector at once and waits until they
// are gone.
func deletePodsNow(t *testing.T, c *testcluster.Cluster, ns, selector string) {
	t.Helper()
	ctx := ctxFor(t)
	if err := c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)},
		metav1.ListOptions{LabelSelector: selector}); err != nil {
		t.Fatal(err)
	}
	err := testcluster.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		return err == nil && len(list.Items) == 0, err
	})
	if err != nil {
		t.Fatalf("pods of %q in %s are not gone: %v", selector, ns, err)
	}
}

func startPhalanxBinary(t *testing.T, c *testcluster.Cluster) *testcluster.Scheduler {
	t.Helper()
	s, err := c.StartSchedulerBinary(schedulerBinary, manifests.SchedulerConfig)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestWorkloadAPIPriorityPreemption: priority and preemption of v1beta1
// PodGroups. A low-priority gang (PriorityClass low, minCount 4) fills 4
// nodes. A gang of PriorityClass high-never (preemptionPolicy Never) that
// would fit only in the low gang's place evicts nothing and says so; a gang
// of PriorityClass high (minCount 2) evicts the low gang whole — all 4 of
// its pods, though it needs only 2 nodes — binds, and the low PodGroup says
// DisruptionTarget=True (PreemptionByScheduler) and Scheduled=Preempted.
// The pods carry no priority of their own: the PodGroups' spec.priority,
// which the API server's priority admission fills from priorityClassName,
// is what counts. The API server runs PodGroupPreemptionPolicy (alpha), so
// the admission also fills spec.preemptionPolicy from the PriorityClass.
func TestWorkloadAPIPriorityPreemption(t *testing.T) {
	c := startWorkloadAPICluster(t, "GenericWorkload=true,PodGroupPreemptionPolicy=true",
		nodes("n", 4, testcluster.NodeSpec{CPU: "4", Memory: "16Gi"})...)
	createPriorityClass(t, c, "low", 100, false)
	createPriorityClass(t, c, "high", 1000, false)
	createPriorityClass(t, c, "high-never", 1000, true)
	startPhalanxBinary(t, c)
	const ns = "default"

	admitted := func(t *testing.T, pg *schedulingv1beta1.PodGroup, priority int32, policy schedulingv1beta1.PreemptionPolicy) {
		t.Helper()
		if pg.Spec.Priority == nil || *pg.Spec.Priority != priority {
			t.Fatalf("PodGroup %s (priorityClassName %s): spec.priority %v, want %d from the priority admission", pg.Name, pg.Spec.PriorityClassName, ptr.Deref(pg.Spec.Priority, -1), priority)
		}
		if pg.Spec.PreemptionPolicy == nil || *pg.Spec.PreemptionPolicy != policy {
			t.Fatalf("PodGroup %s (priorityClassName %s): spec.preemptionPolicy %v, want %s from the priority admission", pg.Name, pg.Spec.PriorityClassName, pg.Spec.PreemptionPolicy, policy)
		}
	}

	low := createUpstreamGang(t, c, upstreamGang{Namespace: ns, Name: "low", MinCount: 4, PriorityClass: "low"})
	admitted(t, low, 100, schedulingv1beta1.PreemptLowerPriority)
	lowMembers := memberNames("low", 0, 4)
	createUpstreamMembers(t, c, ns, "low", lowMembers...)
	waitJobBound(t, c, ns, gangSelector("low"), 4)
	waitUpstreamCondition(t, c, ns, "low", schedulingv1beta1.PodGroupInitiallyScheduled, metav1.ConditionTrue, "Scheduled")

	if !t.Run("preemptionPolicy Never preempts nothing", func(t *testing.T) {
		// kube-apiserver 1.37.2 defaults spec.preemptionPolicy to
		// PreemptLowerPriority before its priority admission runs, and the
		// admission then refuses a PodGroup that names a PriorityClass of
		// preemptionPolicy Never without the field ("the string value of
		// PreemptionPolicy (PreemptLowerPriority) must not be provided in pod
		// group spec; priority admission controller computed Never from the
		// given PriorityClass name"). The PodGroup then states Never itself,
		// and the admission checks that it agrees with the PriorityClass.
		gang := upstreamGang{Namespace: ns, Name: "never", MinCount: 2, PriorityClass: "high-never"}
		never, err := c.Client.SchedulingV1beta1().PodGroups(ns).Create(ctxFor(t), gang.podGroup(), metav1.CreateOptions{})
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "computed Never from the given PriorityClass name") {
			t.Logf("the API server refused the PodGroup without preemptionPolicy: %v", err)
			gang.PreemptionPolicy = schedulingv1beta1.PreemptNever
			never, err = c.Client.SchedulingV1beta1().PodGroups(ns).Create(ctxFor(t), gang.podGroup(), metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatalf("creating PodGroup never: %v", err)
		}
		admitted(t, never, 1000, schedulingv1beta1.PreemptNever)
		createUpstreamMembers(t, c, ns, "never", "never-0", "never-1")
		// The scheduler looked for room and found it may not make any.
		var evicted []string
		err = testcluster.Eventually(ctxFor(t), 60*time.Second, func(ctx context.Context) (bool, error) {
			live, err := livePods(ctx, c, ns, gangSelector("low"))
			if err != nil {
				return false, err
			}
			if len(live) != len(lowMembers) {
				evicted = podNames(live)
				return true, nil // fails below
			}
			list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: gangSelector("never")})
			if err != nil {
				return false, err
			}
			for _, p := range list.Items {
				if cond := podScheduledCondition(&p); cond != nil && strings.Contains(cond.Message, "preemptionPolicy Never") {
					t.Logf("member %s: %s", p.Name, cond.Message)
					return true, nil
				}
			}
			return false, nil
		})
		if evicted != nil {
			dumpPods(t, c, ns)
			t.Fatalf("the preemptionPolicy Never gang made room: the low gang is down to %v", evicted)
		}
		if err != nil {
			dumpPods(t, c, ns)
			t.Fatalf("no member of the preemptionPolicy Never gang says why it waits: %v", err)
		}
		waitUpstreamCondition(t, c, ns, "never", schedulingv1beta1.PodGroupInitiallyScheduled, metav1.ConditionFalse, schedulingv1beta1.PodGroupReasonUnschedulable)
		t.Logf("PodGroup never: %s", describeConditions(upstreamConditionsOf(t, c, ns, "never")))
		waitLive(t, c, ns, gangSelector("low"), lowMembers...)
		assertJobBound(t, c, ns, gangSelector("never"), 0)
		if cond := apimeta.FindStatusCondition(upstreamConditionsOf(t, c, ns, "low"), schedulingv1beta1.DisruptionTarget); cond != nil {
			t.Fatalf("PodGroup low is a disruption target though nothing may preempt it: %+v", cond)
		}
		deletePodsNow(t, c, ns, gangSelector("never"))
		if err := c.Client.SchedulingV1beta1().PodGroups(ns).Delete(ctxFor(t), "never", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}) {
		return
	}

	t.Run("a higher priority evicts the lower gang whole", func(t *testing.T) {
		high := createUpstreamGang(t, c, upstreamGang{Namespace: ns, Name: "high", MinCount: 2, PriorityClass: "high"})
		admitted(t, high, 1000, schedulingv1beta1.PreemptLowerPriority)
		createUpstreamMembers(t, c, ns, "high", "high-0", "high-1")
		waitJobBound(t, c, ns, gangSelector("high"), 2)
		// All 4 pods of the low gang are gone, not only the 2 that made room.
		waitLive(t, c, ns, gangSelector("low"))
		waitUpstreamCondition(t, c, ns, "low", schedulingv1beta1.DisruptionTarget, metav1.ConditionTrue, schedulingv1beta1.PodGroupReasonPreemptionByScheduler)
		cond := waitUpstreamCondition(t, c, ns, "low", "Scheduled", metav1.ConditionFalse, "Preempted",
			"evicted whole for gang default/workload:high", "priority 1000 preempts lower priority")
		t.Logf("PodGroup low: Scheduled=Preempted: %s", cond.Message)
		waitUpstreamCondition(t, c, ns, "high", schedulingv1beta1.PodGroupInitiallyScheduled, metav1.ConditionTrue, "Scheduled")
		if cond := apimeta.FindStatusCondition(upstreamConditionsOf(t, c, ns, "high"), schedulingv1beta1.DisruptionTarget); cond != nil {
			t.Fatalf("PodGroup high is a disruption target: %+v", cond)
		}
	})
}

// TestWorkloadAPIDisruptionMode: a low-priority gang of minCount 2 runs 3
// members (the third joined after the quorum, on the last free node); a
// high-priority gang of one member needs one node. With disruptionMode
// single (the API's default) exactly the newest member is evicted and the
// gang keeps its 2; with disruptionMode all the gang is evicted whole.
func TestWorkloadAPIDisruptionMode(t *testing.T) {
	c := startWorkloadAPICluster(t, "GenericWorkload=true", nodes("n", 3, testcluster.NodeSpec{CPU: "4", Memory: "16Gi"})...)
	createPriorityClass(t, c, "low", 100, false)
	createPriorityClass(t, c, "high", 1000, false)
	startPhalanxBinary(t, c)

	for _, tc := range []struct {
		mode       string
		all        bool
		wantLeft   []string
		disruption bool
	}{
		{mode: "single", wantLeft: []string{"low-0", "low-1"}},
		{mode: "all", all: true, disruption: true},
	} {
		if !t.Run(tc.mode, func(t *testing.T) {
			ns := "disrupt-" + tc.mode
			createNamespace(t, c, ns)
			low := createUpstreamGang(t, c, upstreamGang{Namespace: ns, Name: "low", MinCount: 2, PriorityClass: "low", DisruptAll: tc.all})
			if d := low.Spec.DisruptionMode; d == nil || (tc.all && d.All == nil) || (!tc.all && d.Single == nil) {
				t.Fatalf("PodGroup low: disruptionMode %+v, want %s", d, tc.mode)
			}
			createUpstreamMembers(t, c, ns, "low", "low-0", "low-1")
			quorum := waitJobBound(t, c, ns, gangSelector("low"), 2)
			// The third member binds after the quorum, in a later second
			// than the first two (bind times have a resolution of a second),
			// so that it is the newest without a doubt.
			var last time.Time
			for _, p := range quorum {
				if cond := podScheduledCondition(&p); cond != nil && cond.LastTransitionTime.After(last) {
					last = cond.LastTransitionTime.Time
				}
			}
			if err := testcluster.Eventually(ctxFor(t), 5*time.Second, func(context.Context) (bool, error) {
				return time.Now().After(last.Add(time.Second)), nil
			}); err != nil {
				t.Fatal(err)
			}
			createUpstreamMembers(t, c, ns, "low", "low-2")
			waitBound(t, c, ns, "low-2")
			waitUpstreamCondition(t, c, ns, "low", schedulingv1beta1.PodGroupInitiallyScheduled, metav1.ConditionTrue, "Scheduled")

			createUpstreamGang(t, c, upstreamGang{Namespace: ns, Name: "high", MinCount: 1, PriorityClass: "high"})
			createUpstreamMembers(t, c, ns, "high", "high-0")
			waitBound(t, c, ns, "high-0")
			waitLive(t, c, ns, gangSelector("low"), tc.wantLeft...)
			conds := upstreamConditionsOf(t, c, ns, "low")
			t.Logf("PodGroup low after the preemption: %s", describeConditions(conds))
			if tc.disruption {
				waitUpstreamCondition(t, c, ns, "low", schedulingv1beta1.DisruptionTarget, metav1.ConditionTrue, schedulingv1beta1.PodGroupReasonPreemptionByScheduler)
			} else if cond := apimeta.FindStatusCondition(conds, schedulingv1beta1.DisruptionTarget); cond != nil && cond.Status == metav1.ConditionTrue {
				t.Fatalf("PodGroup low is a disruption target though it keeps running: %+v", cond)
			}
			deletePodsNow(t, c, ns, "")
		}) {
			return
		}
	}
}

// resizeWithin is how soon a gang must act on a change of its minCount: as
// soon as on a new node (a few milliseconds here); the bound leaves room for
// a busy machine.
const resizeWithin = 10 * time.Second

// TestWorkloadAPIResize: spec.schedulingPolicy.gang.minCount of a v1beta1
// PodGroup is mutable, and phalanx follows it promptly.
//   - down: minCount 4 with 4 members on room for 2: none binds and the
//     PodGroup says PodGroupInitiallyScheduled=False (Unschedulable);
//     minCount 2: exactly 2 bind; 2 nodes more: the other 2 bind too.
//   - up: a running gang of minCount 2 (2 bound) and 2 more members that
//     wait for room; minCount 4: with room for 1 neither binds (the 2 it
//     now lacks are planned as one block), with room for 2 both bind.
//
// The subtests share the cluster and run in order; nodes are only added.
func TestWorkloadAPIResize(t *testing.T) {
	spec := testcluster.NodeSpec{CPU: "4", Memory: "16Gi"}
	c := startWorkloadAPICluster(t, "GenericWorkload=true", nodes("n", 2, spec)...)
	startPhalanxBinary(t, c)
	const ns = "default"
	added := 2
	addNodes := func(t *testing.T, n int) {
		t.Helper()
		specs := make([]testcluster.NodeSpec, n)
		for i := range specs {
			specs[i] = spec
			specs[i].Name = fmt.Sprintf("n-%d", added)
			added++
		}
		if err := c.CreateNodes(ctxFor(t), specs...); err != nil {
			t.Fatal(err)
		}
	}
	// resize sets minCount; the API server must take it.
	resize := func(t *testing.T, name string, minCount int32) time.Time {
		t.Helper()
		patch := fmt.Sprintf(`{"spec":{"schedulingPolicy":{"gang":{"minCount":%d}}}}`, minCount)
		pg, err := c.Client.SchedulingV1beta1().PodGroups(ns).Patch(ctxFor(t), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		if err != nil {
			t.Fatalf("the API server refused minCount %d for PodGroup %s: %v", minCount, name, err)
		}
		if got := pg.Spec.SchedulingPolicy.Gang.MinCount; got != minCount {
			t.Fatalf("PodGroup %s: minCount %d after the patch, want %d", name, got, minCount)
		}
		return time.Now()
	}
	// prompt fails the test (and goes on) when what followed a resize took
	// longer than resizeWithin.
	prompt := func(t *testing.T, since time.Time, what string) {
		t.Helper()
		if d := time.Since(since); d > resizeWithin {
			t.Errorf("%s %v after the change of minCount, want within %v", what, d.Round(time.Millisecond), resizeWithin)
		} else {
			t.Logf("%s %v after the change of minCount", what, d.Round(time.Millisecond))
		}
	}

	downDone := false
	t.Run("down", func(t *testing.T) {
		createUpstreamGang(t, c, upstreamGang{Namespace: ns, Name: "down", MinCount: 4})
		members := memberNames("down", 0, 4)
		createUpstreamMembers(t, c, ns, "down", members...)
		sel := gangSelector("down")
		waitMembersUnschedulable(t, c, ns, sel, members...)
		waitUpstreamCondition(t, c, ns, "down", schedulingv1beta1.PodGroupInitiallyScheduled, metav1.ConditionFalse, schedulingv1beta1.PodGroupReasonUnschedulable)

		resized := resize(t, "down", 2)
		waitJobBound(t, c, ns, sel, 2)
		prompt(t, resized, "2 of 4 bound")
		waitUpstreamCondition(t, c, ns, "down", schedulingv1beta1.PodGroupInitiallyScheduled, metav1.ConditionTrue, "Scheduled")
		// Room for 2 only: the other 2 wait.
		assertJobBound(t, c, ns, sel, 2)

		addNodes(t, 2)
		waitJobBound(t, c, ns, sel, 4)
		downDone = true
	})
	if !downDone {
		// "up" starts from the nodes "down" filled.
		return
	}

	t.Run("up", func(t *testing.T) {
		createUpstreamGang(t, c, upstreamGang{Namespace: ns, Name: "up", MinCount: 2})
		sel := gangSelector("up")
		createUpstreamMembers(t, c, ns, "up", "up-0", "up-1")
		addNodes(t, 2)
		waitJobBound(t, c, ns, sel, 2)
		waitUpstreamCondition(t, c, ns, "up", schedulingv1beta1.PodGroupInitiallyScheduled, metav1.ConditionTrue, "Scheduled")
		// Two more members, no room for them.
		createUpstreamMembers(t, c, ns, "up", "up-2", "up-3")
		err := testcluster.Eventually(ctxFor(t), 60*time.Second, func(ctx context.Context) (bool, error) {
			unschedulable := 0
			for _, name := range []string{"up-2", "up-3"} {
				p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				if cond := podScheduledCondition(p); cond != nil && cond.Status == v1.ConditionFalse && cond.Reason == v1.PodReasonUnschedulable {
					unschedulable++
				}
			}
			return unschedulable == 2, nil
		})
		if err != nil {
			dumpPods(t, c, ns)
			t.Fatalf("the 2 new members were not turned down for want of room: %v", err)
		}
		assertJobBound(t, c, ns, sel, 2)

		// minCount 4: phalanx plans the 2 members the gang now lacks. (It
		// must have read the change before room appears: a member that meets
		// the new node first, with minCount 2 still in the scheduler's cache,
		// binds alone as the API allows.)
		resized := resize(t, "up", 4)
		waitUpstreamCondition(t, c, ns, "up", "Scheduled", metav1.ConditionFalse, "Unschedulable",
			"(minMember 4, 2 placed): at most 0 fit")
		prompt(t, resized, "the gang planned for minCount 4")
		// Room for one: neither binds.
		addNodes(t, 1)
		cond := waitUpstreamCondition(t, c, ns, "up", "Scheduled", metav1.ConditionFalse, "Unschedulable",
			"(minMember 4, 2 placed): at most 1 fit")
		t.Logf("room for 1 of 2: %s", cond.Message)
		assertJobBound(t, c, ns, sel, 2)
		// Room for both: they bind.
		addNodes(t, 1)
		waitJobBound(t, c, ns, sel, 4)
		waitLive(t, c, ns, sel, "up-0", "up-1", "up-2", "up-3")
	})
}

// TestWorkloadAPIResizeUpKeepsRunningMembers: minCount of a running gang
// raised above its bound members changes what the next cycles plan, not the
// members that run (the v1beta1 API: "modifications to this field do not
// affect already-scheduled pods"). The scheduler's schedule timeout is 10 s
// here. Gang "up" (minCount 2) runs 2 members; 2 more wait for room that
// never comes, and minCount becomes 4. A control gang "stranded" (minCount
// 2) that never started — one member bound by hand, as after a crash in the
// middle of its binds, the other unplaceable — is partly bound from later
// on: once the scheduler has evicted it for being partly bound past the
// timeout, "up" has been short of its new minimum for longer, and its 2
// running members must still run.
func TestWorkloadAPIResizeUpKeepsRunningMembers(t *testing.T) {
	c := startWorkloadAPICluster(t, "GenericWorkload=true", nodes("n", 3, testcluster.NodeSpec{CPU: "4", Memory: "16Gi"})...)
	config := strings.Replace(string(manifests.SchedulerConfig), "defaultScheduleTimeoutSeconds: 60", "defaultScheduleTimeoutSeconds: 10", 1)
	if config == string(manifests.SchedulerConfig) {
		t.Fatal("the canonical config no longer sets defaultScheduleTimeoutSeconds: 60")
	}
	if _, err := c.StartSchedulerBinary(schedulerBinary, []byte(config)); err != nil {
		t.Fatal(err)
	}
	const ns = "default"
	ctx := ctxFor(t)

	createUpstreamGang(t, c, upstreamGang{Namespace: ns, Name: "up", MinCount: 2})
	createUpstreamMembers(t, c, ns, "up", "up-0", "up-1")
	running := waitJobBound(t, c, ns, gangSelector("up"), 2)
	waitUpstreamCondition(t, c, ns, "up", schedulingv1beta1.PodGroupInitiallyScheduled, metav1.ConditionTrue, "Scheduled")
	// The control's member goes on the third node by hand; then nothing fits.
	createUpstreamGang(t, c, upstreamGang{Namespace: ns, Name: "stranded", MinCount: 2})
	used := map[string]bool{}
	for _, p := range running {
		used[p.Spec.NodeName] = true
	}
	free := ""
	for _, n := range []string{"n-0", "n-1", "n-2"} {
		if !used[n] {
			free = n
		}
	}
	byHand := upstreamMember(ns, "stranded", "stranded-0", "")
	byHand.Spec.NodeName = free
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, byHand, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	createUpstreamMembers(t, c, ns, "up", "up-2", "up-3")
	patch := `{"spec":{"schedulingPolicy":{"gang":{"minCount":4}}}}`
	if _, err := c.Client.SchedulingV1beta1().PodGroups(ns).Patch(ctx, "up", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("the API server refused minCount 4: %v", err)
	}
	waitUpstreamCondition(t, c, ns, "up", "Scheduled", metav1.ConditionFalse, "Unschedulable", "(minMember 4, 2 placed): at most 0 fit")
	createUpstreamMembers(t, c, ns, "stranded", "stranded-1")
	waitUpstreamCondition(t, c, ns, "stranded", "Scheduled", metav1.ConditionFalse, "Unschedulable", "(minMember 2, 1 placed): at most 0 fit")
	resized := time.Now()

	// The control is evicted as partly bound past the timeout.
	cond := waitUpstreamCondition(t, c, ns, "stranded", schedulingv1beta1.DisruptionTarget, metav1.ConditionTrue, "PartiallyBound")
	t.Logf("%v after the resize, the control gang: %s", time.Since(resized).Round(time.Millisecond), cond.Message)
	// The resized gang's running members still run.
	live, err := livePods(ctx, c, ns, gangSelector("up"))
	if err != nil {
		t.Fatal(err)
	}
	if got := podNames(live); fmt.Sprint(got) != fmt.Sprint([]string{"up-0", "up-1", "up-2", "up-3"}) {
		t.Errorf("pods of the resized gang: %v, want up-0 to up-3 (its running members evicted for a change of minCount)", got)
	}
	conds := upstreamConditionsOf(t, c, ns, "up")
	if d := apimeta.FindStatusCondition(conds, schedulingv1beta1.DisruptionTarget); d != nil && d.Status == metav1.ConditionTrue {
		t.Errorf("the resized gang is a disruption target: %s: %s", d.Reason, d.Message)
	}
	if t.Failed() {
		t.Logf("PodGroup up: %s", describeConditions(conds))
	}
}

// stockScheduler is the stock kube-scheduler of the k8s.io/kubernetes module
// of go.mod, built once (or KUBE_SCHEDULER_BIN).
var stockScheduler struct {
	once sync.Once
	path string
	err  error
}

func stockSchedulerBinary(t *testing.T) string {
	t.Helper()
	stockScheduler.once.Do(func() {
		if p := os.Getenv("KUBE_SCHEDULER_BIN"); p != "" {
			stockScheduler.path = p
			return
		}
		stockScheduler.path = filepath.Join(binDir, "kube-scheduler")
		build := exec.Command("go", "build", "-o", stockScheduler.path, "k8s.io/kubernetes/cmd/kube-scheduler")
		build.Dir = repoRoot()
		out, err := build.CombinedOutput()
		if err != nil {
			stockScheduler.err = fmt.Errorf("building kube-scheduler: %v\n%s", err, out)
		}
	})
	if stockScheduler.err != nil {
		t.Fatal(stockScheduler.err)
	}
	return stockScheduler.path
}

// stockSchedulerConfig is kube-scheduler's default profile. kube-scheduler
// ignores --kubeconfig when --config is given: the file names it.
func stockSchedulerConfig(kubeconfig string) []byte {
	return []byte(fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: 500
  burst: 1000
`, kubeconfig))
}

// TestWorkloadAPIStockSameObjects: the same v1beta1 objects — a Workload
// whose template is a gang of minCount 5 with a topology constraint on the
// IB cluster label, its PodGroup and 5 pods — are scheduled once by phalanx
// and once by the stock kube-scheduler 1.37 (GenericWorkload and
// TopologyAwareWorkloadScheduling on), each in its own namespace on the same
// cluster shape: 4 nodes of room in ib-a, 2 in ib-b. Both leave the gang
// unbound and say Unschedulable on the PodGroup while only 4 fit in one IB
// cluster, and both bind all 5 in ib-a once a fifth node appears there. The
// schedulers run one after the other; the fifth node is removed in between.
// What differs is said, not asserted: the messages (kube-scheduler reports
// its first placement tried, "0/2 placements are available, first placement
// status: minCount (5) cannot be satisfied: ..."; phalanx every domain and
// its room), and that kube-scheduler writes only PodGroupInitiallyScheduled
// where phalanx adds its own Scheduled condition.
func TestWorkloadAPIStockSameObjects(t *testing.T) {
	stock := stockSchedulerBinary(t)
	spec := testcluster.NodeSpec{CPU: "4", Memory: "16Gi", Labels: map[string]string{ibLabel: "ib-a"}}
	other := testcluster.NodeSpec{CPU: "4", Memory: "16Gi", Labels: map[string]string{ibLabel: "ib-b"}}
	c := startWorkloadAPICluster(t, "GenericWorkload=true,TopologyAwareWorkloadScheduling=true",
		append(nodes("n", 4, spec), nodes("m", 2, other)...)...)

	messages := map[string]string{}
	for _, tc := range []struct {
		name, schedulerName string
		start               func(t *testing.T) *testcluster.Scheduler
	}{
		{name: "phalanx", schedulerName: "phalanx-scheduler", start: func(t *testing.T) *testcluster.Scheduler {
			return startPhalanxBinary(t, c)
		}},
		{name: "kube-scheduler", schedulerName: "default-scheduler", start: func(t *testing.T) *testcluster.Scheduler {
			s, err := c.StartSchedulerBinary(stock, stockSchedulerConfig(c.Kubeconfig),
				"--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true")
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
	} {
		if !t.Run(tc.name, func(t *testing.T) {
			ns := tc.name
			createNamespace(t, c, ns)
			sched := tc.start(t)
			defer func() {
				if t.Failed() && sched.Log != "" {
					logTail(t, sched.Log, 40)
				}
				_ = sched.Stop()
			}()
			gang := upstreamGang{Namespace: ns, Name: "train-workers", MinCount: 5, TopologyKey: ibLabel, Workload: "train", Template: "workers"}
			wl := &schedulingv1beta1.Workload{
				ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: ns},
				Spec: schedulingv1beta1.WorkloadSpec{PodGroupTemplates: []schedulingv1beta1.PodGroupTemplate{{
					Name:                  "workers",
					SchedulingPolicy:      schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 5}},
					SchedulingConstraints: &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{Key: ibLabel}}},
				}}},
			}
			if _, err := c.Client.SchedulingV1beta1().Workloads(ns).Create(ctxFor(t), wl, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			pg := createUpstreamGang(t, c, gang)
			if sc := pg.Spec.SchedulingConstraints; sc == nil || len(sc.Topology) != 1 || sc.Topology[0].Key != ibLabel {
				t.Fatalf("the API server dropped the topology constraint (got %+v): TopologyAwareWorkloadScheduling is not on", sc)
			}
			members := memberNames("train", 0, 5)
			createMembersFor(t, c, tc.schedulerName, ns, gang.Name, members...)
			sel := gangSelector(gang.Name)

			// Room for 4 of 5 in one IB cluster: none binds, and the PodGroup says why.
			msgs := waitMembersUnschedulable(t, c, ns, sel, members...)
			cond := waitUpstreamCondition(t, c, ns, gang.Name, schedulingv1beta1.PodGroupInitiallyScheduled, metav1.ConditionFalse, schedulingv1beta1.PodGroupReasonUnschedulable)
			messages[tc.name] = cond.Message
			t.Logf("%s: PodGroup %s=%s %s: %s", tc.name, cond.Type, cond.Status, cond.Reason, cond.Message)
			t.Logf("%s: member %s: %s", tc.name, members[0], msgs[members[0]])
			assertJobBound(t, c, ns, sel, 0)

			// A fifth node in ib-a: all 5 bind there.
			fifth := spec
			fifth.Name = "n-4"
			if err := c.CreateNodes(ctxFor(t), fifth); err != nil {
				t.Fatal(err)
			}
			added := time.Now()
			bound := waitJobBound(t, c, ns, sel, 5)
			t.Logf("%s: all 5 bound %v after the fifth node", tc.name, time.Since(added).Round(time.Millisecond))
			for _, p := range bound {
				if ib := nodeIB(t, c, p.Spec.NodeName); ib != "ib-a" {
					t.Fatalf("%s placed member %s on %s in %s, want all in ib-a (topology key %s)", tc.name, p.Name, p.Spec.NodeName, ib, ibLabel)
				}
			}
			waitUpstreamCondition(t, c, ns, gang.Name, schedulingv1beta1.PodGroupInitiallyScheduled, metav1.ConditionTrue, "Scheduled")

			// The same shape for the next scheduler: the gang and the fifth node go.
			deletePodsNow(t, c, ns, sel)
			if err := c.Client.CoreV1().Nodes().Delete(ctxFor(t), "n-4", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := testcluster.Eventually(ctxFor(t), 30*time.Second, func(ctx context.Context) (bool, error) {
				_, err := c.Client.CoreV1().Nodes().Get(ctx, "n-4", metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			}); err != nil {
				t.Fatal(err)
			}
		}) {
			return
		}
	}
	t.Logf("while 4 of 5 fit:\n  phalanx:        %s\n  kube-scheduler: %s", messages["phalanx"], messages["kube-scheduler"])
}
