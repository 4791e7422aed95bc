package karmada

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// costLabel is phalanx-global's per-member cost (lower first among equal
// fits).
const costLabel = "scheduling.phalanx.dev/cost"

const gpuResource = v1.ResourceName("nvidia.com/gpu")

// globalMove: phalanx-global runs with --move-after=10s. Job "stuck" goes
// first to the cheapest free member, where an OverridePolicy gives its pods
// a node selector no node there matches (the estimators cannot see
// overrides), so it never starts there. Once it has waited 10 s it is
// moved whole to another member, where it runs; none of its pods was ever
// bound in the first, and nothing of it is left there. restart starts the
// tier with moves on, once the members' costs are labelled.
func (f *fleet) globalMove(t *testing.T, restart func()) {
	ctx := context.Background()
	for _, name := range sortedKeys(f.members) {
		// The member deletes the pods of a Job Karmada removes from it.
		if err := f.members[name].StartGarbageCollector(); err != nil {
			t.Fatal(err)
		}
	}
	// stuck (two pods of 2 GPUs) goes to the tightest fit, then the
	// cheapest. The tier's view must be the test's: every job sent so far
	// has ended or runs as the plane sees it (a job not started yet is
	// counted by the estimators on top of its pods).
	f.waitPlaneSettled(t)
	var sets map[string]int
	var open []string
	err := testcluster.Eventually(ctx, time.Minute, func(context.Context) (bool, error) {
		sets, open = f.freeSets(t, 2, 2), nil
		for _, name := range sortedKeys(sets) {
			if sets[name] > 0 {
				open = append(open, name)
			}
		}
		return len(open) >= 2, nil
	})
	if err != nil {
		t.Fatalf("free sets of two 2-GPU pods by member: %v; the move needs two members with room: %v", sets, err)
	}
	// The tightest member, the last by name among equals, is made the
	// cheapest: the tier's choice then shows cost before name.
	slices.SortStableFunc(open, func(a, b string) int {
		if sets[a] != sets[b] {
			return sets[a] - sets[b]
		}
		return strings.Compare(b, a)
	})
	first := open[0]
	for _, name := range sortedKeys(f.members) {
		cost := "10"
		if name == first {
			cost = "0"
		}
		f.labelCluster(t, name, costLabel, cost)
	}
	restart()
	stuck := gpuJob("stuck", "team-a", 2, 2, "")
	f.overrideNodeSelector(t, stuck, first)
	f.propagateJob(t, stuck, globalScheduler, "member-a", "member-b", "member-c")
	rb := f.waitScheduled(t, stuck)
	if got := targetNames(rb); len(got) != 1 || got[0] != first {
		t.Fatalf("stuck went to %v; the cheapest free member is %s", got, first)
	}
	from := f.members[first]
	var to string
	err = testcluster.Eventually(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		f.checkAlive(t)
		if bound := boundPods(t, from, stuck.Name); len(bound) > 0 {
			t.Fatalf("pods of stuck were bound in %s: %v", first, bound)
		}
		rb, err := f.karmada.WorkV1alpha2().ResourceBindings(namespace).Get(ctx, rb.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if len(rb.Spec.Clusters) != 1 || rb.Spec.Clusters[0].Replicas != 2 {
			t.Fatalf("stuck divided or resized: %v", rb.Spec.Clusters)
		}
		to = rb.Spec.Clusters[0].Name
		return to != first, nil
	})
	if err != nil {
		t.Fatalf("stuck never moved from %s: %v", first, err)
	}
	f.members[to].waitJobPodsBound(t, f.members[to].waitJob(t, stuck.Name), 2)
	f.waitEvent(t, rb, "Moved")
	err = testcluster.Eventually(ctx, propagate, func(ctx context.Context) (bool, error) {
		_, jerr := from.Client.BatchV1().Jobs(namespace).Get(ctx, stuck.Name, metav1.GetOptions{})
		pods, err := from.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + stuck.Name})
		return jerr != nil && err == nil && len(pods.Items) == 0, err
	})
	if err != nil {
		t.Fatalf("stuck's Job or pods are still in %s after the move: %v", first, err)
	}
	f.assertWhole(t, stuck)
	t.Logf("stuck: dispatched to %s, never started there, moved whole to %s after --move-after", first, to)
}

// globalMemberLost: job "survivor" runs in a member whose API server then
// stops. Karmada marks the member not Ready, manifests/global/failover.yaml
// taints it NoExecute, and Karmada's taint manager evicts the binding from
// it; phalanx-global places it again whole in a member that is up, where
// it runs. The binding never names two members.
func (f *fleet) globalMemberLost(t *testing.T) {
	ctx := context.Background()
	survivor := gpuJob("survivor", "team-b", 2, 2, "")
	f.propagateJob(t, survivor, globalScheduler, "member-a", "member-b", "member-c")
	rb := f.waitScheduled(t, survivor)
	lost := targetNames(rb)[0]
	f.members[lost].waitJobPodsBound(t, f.members[lost].waitJob(t, survivor.Name), 2)
	// The plane has seen it run (else, with moves on, the tier would move
	// it as not started in a member still Ready).
	f.waitAggregated(t, survivor, lost, func(s *batchv1.JobStatus) bool { return s.Ready != nil && *s.Ready == 2 })
	f.members[lost].Stop()
	t.Logf("survivor runs in %s; its API server is stopped", lost)

	var phases []string
	note := func(s string) {
		if !slices.Contains(phases, s) {
			phases = append(phases, s)
		}
	}
	var to string
	err := testcluster.Eventually(ctx, 3*time.Minute, func(ctx context.Context) (bool, error) {
		f.checkAlive(t)
		cl, err := f.karmada.ClusterV1alpha1().Clusters().Get(ctx, lost, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if ready := meta.FindStatusCondition(cl.Status.Conditions, clusterv1alpha1.ClusterConditionReady); ready != nil && ready.Status != metav1.ConditionTrue {
			note(lost + " not Ready")
		}
		if slices.ContainsFunc(cl.Spec.Taints, func(t v1.Taint) bool { return t.Effect == v1.TaintEffectNoExecute }) {
			note(lost + " tainted NoExecute")
		}
		rb, err = f.karmada.WorkV1alpha2().ResourceBindings(namespace).Get(ctx, rb.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if len(rb.Spec.Clusters) > 1 || len(rb.Spec.Clusters) == 1 && rb.Spec.Clusters[0].Replicas != 2 {
			t.Fatalf("survivor divided or in two members: %v", rb.Spec.Clusters)
		}
		for _, task := range rb.Spec.GracefulEvictionTasks {
			note("evicted from " + task.FromCluster)
		}
		if len(rb.Spec.Clusters) == 0 {
			note("waiting")
			return false, nil
		}
		to = rb.Spec.Clusters[0].Name
		return to != lost, nil
	})
	if err != nil {
		t.Fatalf("survivor never placed again after %s was lost (%s; binding %v, eviction tasks %+v): %v",
			lost, strings.Join(phases, " -> "), rb.Spec.Clusters, rb.Spec.GracefulEvictionTasks, err)
	}
	f.members[to].waitJobPodsBound(t, f.members[to].waitJob(t, survivor.Name), 2)
	// The tier says it placed the job again after Karmada's eviction (the
	// eviction task itself may be gone by now: Karmada removes it once the
	// job is healthy in its new member).
	var cond *metav1.Condition
	err = testcluster.Eventually(ctx, propagate, func(ctx context.Context) (bool, error) {
		rb, err := f.karmada.WorkV1alpha2().ResourceBindings(namespace).Get(ctx, rb.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond = meta.FindStatusCondition(rb.Status.Conditions, workv1alpha2.Scheduled)
		return cond != nil && cond.Status == metav1.ConditionTrue && strings.Contains(cond.Message, "after its eviction from "+lost), nil
	})
	if err != nil {
		t.Fatalf("survivor left %s, but not as placed again after Karmada's eviction (%s; Scheduled %+v): %v", lost, strings.Join(phases, " -> "), cond, err)
	}
	t.Logf("survivor: %s -> %s (%s)", lost, to, strings.Join(phases, " -> "))
}

// freeSets are, by member, how many whole sets of size pods of gpus GPUs
// each fit beside the pods bound there and not finished (the members' GPU
// nodes are all in one IB domain, so a set may span them).
func (f *fleet) freeSets(t *testing.T, size int, gpus int64) map[string]int {
	t.Helper()
	ctx := context.Background()
	out := map[string]int{}
	for _, name := range sortedKeys(f.members) {
		m := f.members[name]
		nodes, err := m.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		held, err := holdingGPUs(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		pods := 0
		for _, n := range nodes.Items {
			free := n.Status.Allocatable.Name(gpuResource, resource.DecimalSI).Value()
			for _, p := range held {
				if p.Spec.NodeName == n.Name {
					free -= podGPUs(&p)
				}
			}
			pods += int(free / gpus)
		}
		out[name] = pods / size
	}
	return out
}

// holdingGPUs are m's pods that hold their node's room: bound and not
// finished (a pod being deleted holds it until it is gone).
func holdingGPUs(ctx context.Context, m *member) ([]v1.Pod, error) {
	pods, err := m.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []v1.Pod
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed && podGPUs(&p) > 0 {
			out = append(out, p)
		}
	}
	return out, nil
}

func podGPUs(p *v1.Pod) int64 {
	var n int64
	for _, c := range p.Spec.Containers {
		n += c.Resources.Requests.Name(gpuResource, resource.DecimalSI).Value()
	}
	return n
}

// waitPlaneSettled waits until every job phalanx-global dispatched has
// ended or runs, as its binding's aggregated status says.
func (f *fleet) waitPlaneSettled(t *testing.T) {
	t.Helper()
	var pending []string
	err := testcluster.Eventually(context.Background(), propagate, func(context.Context) (bool, error) {
		f.checkAlive(t)
		pending = nil
		for name, rb := range f.globalBindings(t) {
			if len(rb.Spec.Clusters) == 1 && !jobDone(rb) && !jobRuns(rb) {
				pending = append(pending, name)
			}
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		t.Fatalf("dispatched jobs neither ended nor running on the plane: %v: %v", pending, err)
	}
}

// boundPods are the names of the Job's pods bound in m.
func boundPods(t *testing.T, m *member, job string) []string {
	t.Helper()
	pods, err := m.Client.CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "job-name=" + job})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			out = append(out, p.Name+"@"+p.Spec.NodeName)
		}
	}
	return out
}

func (f *fleet) labelCluster(t *testing.T, name, key, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
	if _, err := f.karmada.ClusterV1alpha1().Clusters().Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("labelling Cluster %s: %v", name, err)
	}
}

// overrideNodeSelector: in member, the Job's pods select a node label no
// node has (an OverridePolicy the binding controller applies to the Work).
func (f *fleet) overrideNodeSelector(t *testing.T, job *batchv1.Job, member string) {
	t.Helper()
	value, err := json.Marshal(map[string]string{"phalanx.example.com/no-such-node": "true"})
	if err != nil {
		t.Fatal(err)
	}
	op := &policyv1alpha1.OverridePolicy{
		ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-nowhere-in-" + member, Namespace: job.Namespace},
		Spec: policyv1alpha1.OverrideSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "batch/v1", Kind: "Job", Namespace: job.Namespace, Name: job.Name}},
			OverrideRules: []policyv1alpha1.RuleWithCluster{{
				TargetCluster: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{member}},
				Overriders: policyv1alpha1.Overriders{Plaintext: []policyv1alpha1.PlaintextOverrider{{
					Path: "/spec/template/spec/nodeSelector", Operator: policyv1alpha1.OverriderOpAdd, Value: apiextensionsv1.JSON{Raw: value}}}},
			}},
		},
	}
	if _, err := f.karmada.PolicyV1alpha1().OverridePolicies(job.Namespace).Create(context.Background(), op, metav1.CreateOptions{}); err != nil {
		t.Fatalf("OverridePolicy %s: %v", op.Name, err)
	}
}
