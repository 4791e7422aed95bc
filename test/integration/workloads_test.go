package integration

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/pkg/features"
	hashutil "k8s.io/kubernetes/pkg/util/hash"
	"k8s.io/utils/ptr"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
	"github.com/phalanx-sched/phalanx/manifests"
)

// gangJob is an indexed Job of n pods of 4 CPU each whose pod template makes
// them one implicit gang (gang-size n) inside one IB cluster. The pods prefer
// IB cluster ib-y (a soft node affinity), so that a member placed without
// regard to the gang's domain goes there.
func gangJob(ns, name string, n int32) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: batchv1.JobSpec{
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
			Completions:    ptr.To(n),
			Parallelism:    ptr.To(n),
			BackoffLimit:   ptr.To[int32](10),
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
					phalanxv1alpha1.GangSizeAnnotation:         fmt.Sprint(n),
					phalanxv1alpha1.TopologyRequiredAnnotation: "ib-cluster",
				}},
				Spec: v1.PodSpec{
					SchedulerName:                 "phalanx-scheduler",
					RestartPolicy:                 v1.RestartPolicyNever,
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Affinity: &v1.Affinity{NodeAffinity: &v1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{{
						Weight: 100,
						Preference: v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{
							Key: ibLabel, Operator: v1.NodeSelectorOpIn, Values: []string{"ib-y"}}}},
					}}}},
					Containers: []v1.Container{{
						Name: "worker", Image: "registry.k8s.io/pause:3.10",
						Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("4")}},
					}},
				},
			},
		},
	}
}

// inIB labels the nodes as members of IB cluster ib.
func inIB(ib string, specs []testcluster.NodeSpec) []testcluster.NodeSpec {
	for i := range specs {
		specs[i].Labels = map[string]string{ibLabel: ib}
	}
	return specs
}

// startJobCluster starts a cluster of the nodes with the IB topology,
// kube-controller-manager's Job and garbage collectors, and kwok.
func startJobCluster(t *testing.T, specs ...testcluster.NodeSpec) *testcluster.Cluster {
	t.Helper()
	c := startCluster(t, specs...)
	startJobControllers(t, c)
	return c
}

// startJobControllers creates the IB topology and starts
// kube-controller-manager's Job and garbage collectors, and kwok.
func startJobControllers(t *testing.T, c *testcluster.Cluster) {
	t.Helper()
	createIBTopology(t, c)
	for _, start := range []func() error{c.StartJobController, c.StartGarbageCollector, c.StartKwok} {
		if err := start(); err != nil {
			t.Fatal(err)
		}
	}
}

func nodeIB(t *testing.T, c *testcluster.Cluster, node string) string {
	t.Helper()
	n, err := c.Client.CoreV1().Nodes().Get(ctxFor(t), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n.Labels[ibLabel]
}

// TestWorkloadIndexedJobGang is issue 15's proof with kube-controller-manager's
// Job controller: an indexed Job whose pods carry gang-size 4 and require one
// IB cluster. With room for 3 in any one IB cluster nothing binds and nothing
// is held; with a fourth node all 4 bind in that IB cluster; a member deleted
// while the gang runs is recreated by the Job controller and placed back in
// the gang's IB cluster, although another IB cluster that the pods prefer
// has empty nodes; the PodGroup phalanx made goes away with the Job. The
// scheduler is the binary with the canonical config, on an API server that
// does not serve the Workload API: it must not log errors about it.
func TestWorkloadIndexedJobGang(t *testing.T) {
	spec := testcluster.NodeSpec{CPU: "4", Memory: "16Gi"}
	c := startJobCluster(t, append(inIB("ib-x", nodes("x", 3, spec)), inIB("ib-y", nodes("y", 2, spec))...)...)
	sched, err := c.StartSchedulerBinary(schedulerBinary, manifests.SchedulerConfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	const ns = "jobs"
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	job, err := c.Client.BatchV1().Jobs(ns).Create(ctx, gangJob(ns, "allreduce", 4), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	selector := batchv1.JobNameLabel + "=allreduce"

	// The Job controller creates the 4 pods; they form one gang owned by the Job.
	_, gang, err := c.WorkloadPods(ctx, ns, selector, 4, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if gang.Owner == nil || gang.Owner.UID != job.UID || gang.MinMember != 4 {
		t.Fatalf("gang %+v, want minMember 4 owned by Job %s", gang, job.UID)
	}
	pg, err := c.WaitImplicitPodGroup(ctx, ns, gang, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if pg.Labels[phalanxv1alpha1.ManagedByLabel] != phalanxv1alpha1.ManagedByValue || pg.Annotations[phalanxv1alpha1.TopologyRequiredAnnotation] != "ib-cluster" {
		t.Fatalf("PodGroup %s: labels %v annotations %v, want managed-by and topology-required from the pods", pg.Name, pg.Labels, pg.Annotations)
	}

	// Room for 3 in any one IB cluster: nothing binds, and the condition says why.
	if _, err := c.WaitCondition(ctx, ns, gang.Name, "Scheduled", "Unschedulable", 60*time.Second); err != nil {
		t.Fatal(err)
	}
	assertJobBound(t, c, ns, selector, 0)
	// Nothing is held: plain pods take every node of ib-x.
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("plain-%d", i)
		if err := c.CreatePods(ctx, testcluster.PodSpec{Name: name, Namespace: ns, CPU: "4", NodeSelector: map[string]string{ibLabel: "ib-x"}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		waitBound(t, c, ns, fmt.Sprintf("plain-%d", i))
	}
	assertJobBound(t, c, ns, selector, 0)
	for i := 0; i < 3; i++ {
		if err := c.Client.CoreV1().Pods(ns).Delete(ctx, fmt.Sprintf("plain-%d", i), metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
	}

	// A fourth node in ib-x: all 4 bind there.
	x3 := spec
	x3.Name, x3.Labels = "x-3", map[string]string{ibLabel: "ib-x"}
	if err := c.CreateNodes(ctx, x3); err != nil {
		t.Fatal(err)
	}
	members := waitJobBound(t, c, ns, selector, 4)
	for _, p := range members {
		if ib := nodeIB(t, c, p.Spec.NodeName); ib != "ib-x" {
			t.Fatalf("member %s on %s in %s, want ib-x", p.Name, p.Spec.NodeName, ib)
		}
	}
	if _, err := c.WaitCondition(ctx, ns, gang.Name, "Scheduled", "Scheduled", 60*time.Second); err != nil {
		t.Fatal(err)
	}

	// The gang runs (kwok); delete member index 2. The Job controller
	// recreates it and it lands in ib-x again, not on ib-y's empty nodes.
	if err := testcluster.Eventually(ctx, 60*time.Second, func(ctx context.Context) (bool, error) {
		list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector, FieldSelector: "status.phase=Running"})
		return err == nil && len(list.Items) == 4, err
	}); err != nil {
		t.Fatalf("gang never ran: %v", err)
	}
	var victim v1.Pod
	for _, p := range members {
		if p.Labels[batchv1.JobCompletionIndexAnnotation] == "2" {
			victim = p
		}
	}
	if victim.Name == "" {
		t.Fatalf("no member with completion index 2 among %d", len(members))
	}
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, victim.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	var replacement v1.Pod
	if err := testcluster.Eventually(ctx, 90*time.Second, func(ctx context.Context) (bool, error) {
		list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector + "," + batchv1.JobCompletionIndexAnnotation + "=2"})
		if err != nil {
			return false, err
		}
		for _, p := range list.Items {
			if p.UID != victim.UID && p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
				replacement = p
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("member index 2 was not replaced and bound: %v", err)
	}
	if ib := nodeIB(t, c, replacement.Spec.NodeName); ib != "ib-x" {
		t.Fatalf("replacement %s bound to %s in %s, want the gang's IB cluster ib-x", replacement.Name, replacement.Spec.NodeName, ib)
	}
	if g, err := testcluster.SameImplicitGang([]v1.Pod{members[0], replacement}); err != nil || g.Name != gang.Name {
		t.Fatalf("replacement is not in the gang %s: %v", gang.Name, err)
	}

	// The PodGroup is garbage-collected with the Job.
	if err := c.Client.BatchV1().Jobs(ns).Delete(ctx, job.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitPodGroupGone(ctx, ns, gang.Name, 90*time.Second); err != nil {
		t.Fatalf("PodGroup %s outlived its Job: %v", gang.Name, err)
	}

	// The Workload API is not served here: the scheduler says nothing about it.
	if err := sched.Stop(); err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(sched.Log)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, "scheduling.k8s.io") || strings.Contains(line, "v1beta1.PodGroup") || strings.Contains(line, "v1beta1.Workload") {
			t.Errorf("scheduler logged about the unserved Workload API: %s", line)
		}
	}
}

func assertJobBound(t *testing.T, c *testcluster.Cluster, ns, selector string, want int) {
	t.Helper()
	bound, err := c.BoundPods(ctxFor(t), ns, selector)
	if err != nil {
		t.Fatal(err)
	}
	if len(bound) != want {
		t.Fatalf("%d pods of %q bound, want %d", len(bound), selector, want)
	}
}

func waitJobBound(t *testing.T, c *testcluster.Cluster, ns, selector string, want int) []v1.Pod {
	t.Helper()
	var bound []v1.Pod
	err := testcluster.Eventually(ctxFor(t), 60*time.Second, func(ctx context.Context) (bool, error) {
		var err error
		bound, err = c.BoundPods(ctx, ns, selector)
		return len(bound) == want, err
	})
	if err != nil {
		t.Fatalf("%d pods of %q bound, want %d: %v", len(bound), selector, want, err)
	}
	return bound
}

// TestWorkloadAPIGang: the upstream Workload API on an API server that serves
// it. A Workload with a gang template of minCount 5 and a topology constraint
// on the IB cluster label, its PodGroup and 5 pods naming it in
// spec.schedulingGroup, on room for 4 in IB cluster ib-a (and 2 in ib-b):
// none binds, and the PodGroup's PodGroupInitiallyScheduled condition says
// Unschedulable; a fifth node appears in ib-a and all 5 bind there. No
// NetworkTopology exists: the key is a level of its own. The scheduler is
// the binary with the canonical config (no feature gates of its own).
func TestWorkloadAPIGang(t *testing.T) {
	c, err := testcluster.Start(t, testcluster.Options{APIServerFlags: []string{
		"--runtime-config=scheduling.k8s.io/v1beta1=true",
		"--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true",
	}})
	if err != nil {
		t.Fatalf("starting cluster: %v", err)
	}
	ctx := ctxFor(t)
	spec := testcluster.NodeSpec{CPU: "4", Memory: "16Gi", Labels: map[string]string{ibLabel: "ib-a"}}
	other := testcluster.NodeSpec{CPU: "4", Memory: "16Gi", Labels: map[string]string{ibLabel: "ib-b"}}
	if err := c.CreateNodes(ctx, append(nodes("n", 4, spec), nodes("m", 2, other)...)...); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartSchedulerBinary(schedulerBinary, manifests.SchedulerConfig); err != nil {
		t.Fatal(err)
	}
	const ns = "default"
	gang := &schedulingv1beta1.GangSchedulingPolicy{MinCount: 5}
	topology := &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{Key: ibLabel}}}
	wl := &schedulingv1beta1.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: ns},
		Spec: schedulingv1beta1.WorkloadSpec{PodGroupTemplates: []schedulingv1beta1.PodGroupTemplate{{
			Name: "workers", SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: gang}, SchedulingConstraints: topology,
		}}},
	}
	if _, err := c.Client.SchedulingV1beta1().Workloads(ns).Create(ctx, wl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "train-workers", Namespace: ns},
		Spec: schedulingv1beta1.PodGroupSpec{
			WorkloadRef: &schedulingv1beta1.WorkloadReference{
				WorkloadName: "train", TemplateName: "workers"},
			SchedulingPolicy:      schedulingv1beta1.PodGroupSchedulingPolicy{Gang: gang},
			SchedulingConstraints: topology,
		},
	}
	if _, err := c.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		p := testcluster.PodSpec{Name: fmt.Sprintf("train-%d", i), Namespace: ns, CPU: "4", Labels: map[string]string{"app": "train"}}.Pod()
		p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(pg.Name)}
		created, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if created.Spec.SchedulingGroup == nil {
			t.Fatal("the API server dropped spec.schedulingGroup: the Workload API is not enabled")
		}
	}

	// Room for 4 of 5: none binds, and the upstream PodGroup says why.
	var cond *metav1.Condition
	if err := testcluster.Eventually(ctx, 60*time.Second, func(ctx context.Context) (bool, error) {
		got, err := c.Client.SchedulingV1beta1().PodGroups(ns).Get(ctx, pg.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond = nil
		for i := range got.Status.Conditions {
			if got.Status.Conditions[i].Type == schedulingv1beta1.PodGroupInitiallyScheduled {
				cond = &got.Status.Conditions[i]
			}
		}
		return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == schedulingv1beta1.PodGroupReasonUnschedulable, nil
	}); err != nil {
		bound, _ := c.BoundPods(ctx, ns, "app=train")
		t.Fatalf("PodGroup %s never got %s=False reason %s (last: %+v; %d of 5 pods bound): %v", pg.Name,
			schedulingv1beta1.PodGroupInitiallyScheduled, schedulingv1beta1.PodGroupReasonUnschedulable, cond, len(bound), err)
	}
	assertJobBound(t, c, ns, "app=train", 0)

	// A fifth node: all 5 bind.
	fifth := spec
	fifth.Name = "n-4"
	if err := c.CreateNodes(ctx, fifth); err != nil {
		t.Fatal(err)
	}
	for _, p := range waitJobBound(t, c, ns, "app=train", 5) {
		if ib := nodeIB(t, c, p.Spec.NodeName); ib != "ib-a" {
			t.Fatalf("member %s on %s in %s, want all in ib-a (topology key %s)", p.Name, p.Spec.NodeName, ib, ibLabel)
		}
	}
}

// jobSchedulingNames are the names kube-controller-manager's Job controller
// (pkg/controller/job, job_scheduling_manager.go) gives the objects it makes
// for a Job with .spec.scheduling: the Workload is the Job's name and a hash
// of its UID, its one PodGroupTemplate is "<job>-pgt-0", and the PodGroup is
// the Workload's and the template's names and a hash of both (short names
// here, so nothing is truncated).
func jobSchedulingNames(job *batchv1.Job) (workload, template, podGroup string) {
	h := fnv.New32a()
	hashutil.DeepHashObject(h, job.UID)
	workload = job.Name + "-" + utilrand.SafeEncodeString(fmt.Sprint(h.Sum32()))
	template = job.Name + "-pgt-0"
	h = fnv.New32a()
	h.Write([]byte(workload))
	h.Write([]byte(template))
	podGroup = workload + "-" + template + "-" + utilrand.SafeEncodeString(fmt.Sprint(h.Sum32()))
	return workload, template, podGroup
}

// TestWorkloadJobSchedulingGang: a plain batch/v1 Job that asks for gang
// scheduling in .spec.scheduling (feature gate WorkloadWithJob, alpha in
// 1.37) gets its Workload and PodGroup from kube-controller-manager's real
// Job controller, and phalanx schedules it whole. The Job runs 5 pods of
// 4 CPU and leaves the gang's minCount unset, so the controller derives it
// from parallelism (5). With room for 4, none binds (checked on every poll
// until the scheduler has turned down each member: PodScheduled=False) and
// the PodGroup's PodGroupInitiallyScheduled condition says Unschedulable;
// with a fifth node all 5 bind. The scheduler is the binary with the
// canonical config (no feature gates of its own).
func TestWorkloadJobSchedulingGang(t *testing.T) {
	// Feature gates are process-wide, and two readers of them run in this
	// process: the API server's Job registry (which drops .spec.scheduling
	// without WorkloadWithJob, and pods' spec.schedulingGroup without
	// GenericWorkload) and the Job controller. They are on for this test
	// only, set before the cluster starts so that they are restored after it
	// has stopped (cleanups run last in, first out); other tests of the
	// package, which run the scheduler in-process, see the defaults again.
	t.Cleanup(func() {
		if utilfeature.DefaultFeatureGate.Enabled(features.WorkloadWithJob) {
			t.Errorf("feature gate %s is still on after the test", features.WorkloadWithJob)
		}
	})
	featuregatetesting.SetFeatureGatesDuringTest(t, utilfeature.DefaultFeatureGate, featuregatetesting.FeatureOverrides{
		features.GenericWorkload: true,
		features.WorkloadWithJob: true,
	})
	c, err := testcluster.Start(t, testcluster.Options{APIServerFlags: []string{
		"--runtime-config=scheduling.k8s.io/v1beta1=true",
		"--feature-gates=GenericWorkload=true,WorkloadWithJob=true",
	}})
	if err != nil {
		t.Fatalf("starting cluster: %v", err)
	}
	ctx := ctxFor(t)
	spec := testcluster.NodeSpec{CPU: "4", Memory: "16Gi"}
	if err := c.CreateNodes(ctx, nodes("n", 4, spec)...); err != nil {
		t.Fatal(err)
	}
	if err := c.StartJobController(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartSchedulerBinary(schedulerBinary, manifests.SchedulerConfig); err != nil {
		t.Fatal(err)
	}
	const ns, name = "jobs", "trainer"
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: batchv1.JobSpec{
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
			Completions:    ptr.To[int32](5),
			Parallelism:    ptr.To[int32](5),
			BackoffLimit:   ptr.To[int32](10),
			// A gang with no minCount: the controller derives it.
			Scheduling: &batchv1.JobSchedulingConfiguration{
				SchedulingPolicy: &schedulingv1alpha3.WorkloadPodGroupSchedulingPolicy{
					Gang: &schedulingv1alpha3.WorkloadPodGroupGangSchedulingPolicy{},
				},
			},
			Template: v1.PodTemplateSpec{
				Spec: v1.PodSpec{
					SchedulerName:                 "phalanx-scheduler",
					RestartPolicy:                 v1.RestartPolicyNever,
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers: []v1.Container{{
						Name: "worker", Image: "registry.k8s.io/pause:3.10",
						Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("4")}},
					}},
				},
			},
		},
	}
	job, err = c.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if job.Spec.Scheduling == nil || job.Spec.Scheduling.SchedulingPolicy == nil || job.Spec.Scheduling.SchedulingPolicy.Gang == nil {
		t.Fatalf("the API server dropped the Job's .spec.scheduling (got %+v): feature gate %s is not on in the API server", job.Spec.Scheduling, features.WorkloadWithJob)
	}
	created := time.Now()
	selector := batchv1.JobNameLabel + "=" + name
	wlName, templateName, pgName := jobSchedulingNames(job)

	// The Job controller makes one Workload and one PodGroup for the Job, with
	// the gang's minCount from parallelism.
	var wl *schedulingv1beta1.Workload
	var pg *schedulingv1beta1.PodGroup
	if err := testcluster.Eventually(ctx, 60*time.Second, func(ctx context.Context) (bool, error) {
		wls, err := c.Client.SchedulingV1beta1().Workloads(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pgs, err := c.Client.SchedulingV1beta1().PodGroups(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		if len(wls.Items) > 1 || len(pgs.Items) > 1 {
			return false, fmt.Errorf("%d Workloads and %d PodGroups, want one each", len(wls.Items), len(pgs.Items))
		}
		if len(wls.Items) == 1 && len(pgs.Items) == 1 {
			wl, pg = &wls.Items[0], &pgs.Items[0]
			return true, nil
		}
		return false, nil
	}); err != nil {
		t.Fatalf("the Job controller made no Workload and PodGroup for Job %s: %v", name, err)
	}
	if wl.Name != wlName || pg.Name != pgName {
		t.Fatalf("Workload %s and PodGroup %s, want %s and %s", wl.Name, pg.Name, wlName, pgName)
	}
	if ref := metav1.GetControllerOf(wl); ref == nil || ref.UID != job.UID {
		t.Errorf("Workload %s is controlled by %+v, want the Job %s", wl.Name, ref, job.UID)
	}
	if ref := wl.Spec.ControllerRef; ref == nil || ref.APIGroup != batchv1.GroupName || ref.Kind != "Job" || ref.Name != name {
		t.Errorf("Workload %s: spec.controllerRef %+v, want batch Job %s", wl.Name, ref, name)
	}
	if n := len(wl.Spec.PodGroupTemplates); n != 1 {
		t.Fatalf("Workload %s has %d PodGroupTemplates, want 1", wl.Name, n)
	}
	if tmpl := wl.Spec.PodGroupTemplates[0]; tmpl.Name != templateName || tmpl.SchedulingPolicy.Gang == nil || tmpl.SchedulingPolicy.Gang.MinCount != 5 {
		t.Errorf("Workload %s: template %s policy %+v, want %s with gang minCount 5", wl.Name, tmpl.Name, tmpl.SchedulingPolicy, templateName)
	}
	if ref := metav1.GetControllerOf(pg); ref == nil || ref.UID != job.UID {
		t.Errorf("PodGroup %s is controlled by %+v, want the Job %s", pg.Name, ref, job.UID)
	}
	ownedByWorkload := false
	for _, o := range pg.OwnerReferences {
		ownedByWorkload = ownedByWorkload || (o.Kind == "Workload" && o.UID == wl.UID)
	}
	if !ownedByWorkload {
		t.Errorf("PodGroup %s: owners %+v, want the Workload %s among them", pg.Name, pg.OwnerReferences, wl.Name)
	}
	if ref := pg.Spec.WorkloadRef; ref == nil || ref.WorkloadName != wlName || ref.TemplateName != templateName {
		t.Errorf("PodGroup %s: spec.workloadRef %+v, want %s/%s", pg.Name, ref, wlName, templateName)
	}
	if g := pg.Spec.SchedulingPolicy.Gang; g == nil || g.MinCount != 5 {
		t.Fatalf("PodGroup %s: spec.schedulingPolicy %+v, want gang minCount 5 (parallelism)", pg.Name, pg.Spec.SchedulingPolicy)
	}

	// Its 5 pods name the PodGroup in spec.schedulingGroup.
	var pods []v1.Pod
	if err := testcluster.Eventually(ctx, 60*time.Second, func(ctx context.Context) (bool, error) {
		list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		pods = list.Items
		return len(pods) == 5, nil
	}); err != nil {
		t.Fatalf("%d pods of Job %s, want 5: %v", len(pods), name, err)
	}
	for _, p := range pods {
		if sg := p.Spec.SchedulingGroup; sg == nil || ptr.Deref(sg.PodGroupName, "") != pgName {
			t.Fatalf("pod %s: spec.schedulingGroup %+v, want podGroupName %s", p.Name, sg, pgName)
		}
	}

	// Room for 4 of 5: none binds, the PodGroup says why, and the scheduler
	// has turned down every member.
	var cond *metav1.Condition
	var bound []string
	unschedulable := 0
	if err := testcluster.Eventually(ctx, 60*time.Second, func(ctx context.Context) (bool, error) {
		list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		unschedulable = 0
		for _, p := range list.Items {
			if p.Spec.NodeName != "" {
				bound = append(bound, p.Name+" on "+p.Spec.NodeName)
			}
			for _, pc := range p.Status.Conditions {
				if pc.Type == v1.PodScheduled && pc.Status == v1.ConditionFalse && pc.Reason == v1.PodReasonUnschedulable {
					unschedulable++
				}
			}
		}
		if len(bound) > 0 {
			return true, nil // fails below
		}
		got, err := c.Client.SchedulingV1beta1().PodGroups(ns).Get(ctx, pgName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond = apimeta.FindStatusCondition(got.Status.Conditions, schedulingv1beta1.PodGroupInitiallyScheduled)
		return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == schedulingv1beta1.PodGroupReasonUnschedulable &&
			unschedulable == 5, nil
	}); err != nil {
		t.Fatalf("PodGroup %s never got %s=False reason %s with all 5 members unschedulable (last: %+v; %d unschedulable): %v", pgName,
			schedulingv1beta1.PodGroupInitiallyScheduled, schedulingv1beta1.PodGroupReasonUnschedulable, cond, unschedulable, err)
	}
	if len(bound) > 0 {
		t.Fatalf("members bound while only 4 of 5 fit (the gang was not scheduled whole): %v", bound)
	}
	t.Logf("%v after the Job: 4 of 5 fit, none bound; PodGroup %s: %s=%s %s: %s", time.Since(created).Round(time.Millisecond),
		pgName, cond.Type, cond.Status, cond.Reason, cond.Message)
	assertJobBound(t, c, ns, selector, 0)

	// A fifth node: all 5 bind.
	fifth := spec
	fifth.Name = "n-4"
	if err := c.CreateNodes(ctx, fifth); err != nil {
		t.Fatal(err)
	}
	added := time.Now()
	members := waitJobBound(t, c, ns, selector, 5)
	t.Logf("all 5 bound %v after the fifth node", time.Since(added).Round(time.Millisecond))
	onNode := map[string]string{}
	for _, p := range members {
		if other, ok := onNode[p.Spec.NodeName]; ok {
			t.Fatalf("members %s and %s share node %s (4 CPU each on 4-CPU nodes)", other, p.Name, p.Spec.NodeName)
		}
		onNode[p.Spec.NodeName] = p.Name
	}
}
