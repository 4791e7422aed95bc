package workloads

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
	"github.com/phalanx-sched/phalanx/internal/workload"
	"github.com/phalanx-sched/phalanx/manifests"
)

// rjob is a replicated job of `replicas` Jobs of `pods` pods, 4 CPU each,
// on the nodes of pool.
func rjob(name, pool string, replicas, pods int32, annotations map[string]string) jobsetv1alpha2.ReplicatedJob {
	return jobsetv1alpha2.ReplicatedJob{
		Name:     name,
		Replicas: replicas,
		Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Parallelism:    ptr.To(pods),
			Completions:    ptr.To(pods),
			BackoffLimit:   ptr.To[int32](0),
			CompletionMode: ptr.To(batchv1.IndexedCompletion), // JobSet's webhook default
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: annotations},
				Spec: v1.PodSpec{
					SchedulerName:                 "phalanx-scheduler",
					NodeSelector:                  map[string]string{poolLabel: pool},
					RestartPolicy:                 v1.RestartPolicyNever,
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers: []v1.Container{{
						Name: "main", Image: "registry.k8s.io/pause:3.10",
						Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("4")}},
					}},
				},
			},
		}},
	}
}

// jobSet spells out the defaults JobSet's defaulting webhook sets (the
// webhook does not run in-process).
func jobSet(ns, name string, rjobs ...jobsetv1alpha2.ReplicatedJob) *jobsetv1alpha2.JobSet {
	return &jobsetv1alpha2.JobSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: jobsetv1alpha2.GroupVersion.String(), Kind: "JobSet"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: jobsetv1alpha2.JobSetSpec{
			ReplicatedJobs: rjobs,
			SuccessPolicy:  &jobsetv1alpha2.SuccessPolicy{Operator: jobsetv1alpha2.OperatorAll},
			StartupPolicy:  &jobsetv1alpha2.StartupPolicy{StartupPolicyOrder: jobsetv1alpha2.AnyOrder},
			Network:        &jobsetv1alpha2.Network{EnableDNSHostnames: ptr.To(true), PublishNotReadyAddresses: ptr.To(true)},
		},
	}
}

func createJobSet(ctx context.Context, c *testcluster.Cluster, js *jobsetv1alpha2.JobSet) (*jobsetv1alpha2.JobSet, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(js)
	if err != nil {
		return nil, err
	}
	obj, err := c.Dynamic.Resource(jobsetv1alpha2.GroupVersion.WithResource("jobsets")).Namespace(js.Namespace).
		Create(ctx, &unstructured.Unstructured{Object: u}, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
	if err != nil {
		return nil, err
	}
	out := &jobsetv1alpha2.JobSet{}
	return out, runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, out)
}

func boundOf(pods []v1.Pod) (n int) {
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			n++
		}
	}
	return n
}

func listPods(ctx context.Context, c *testcluster.Cluster, ns, selector string) ([]v1.Pod, error) {
	list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

func waitBound(t *testing.T, c *testcluster.Cluster, ns, selector string, want int) []v1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var pods []v1.Pod
	err := testcluster.Eventually(ctx, 60*time.Second, func(ctx context.Context) (bool, error) {
		var err error
		pods, err = listPods(ctx, c, ns, selector)
		return boundOf(pods) == want, err
	})
	if err != nil {
		t.Fatalf("%d pods of %q bound, want %d: %v", boundOf(pods), selector, want, err)
	}
	return pods
}

func assertBound(t *testing.T, c *testcluster.Cluster, ns, selector string, want int) {
	t.Helper()
	pods, err := listPods(context.Background(), c, ns, selector)
	if err != nil {
		t.Fatal(err)
	}
	if n := boundOf(pods); n != want {
		t.Fatalf("%d pods of %q bound, want %d", n, selector, want)
	}
}

// poolLabel gives each scenario its own nodes on the shared cluster.
const poolLabel = "test.phalanx.dev/pool"

// addNodes adds n nodes of 4 CPU to pool, named pool-from.. .
func addNodes(t *testing.T, c *testcluster.Cluster, pool string, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		spec := testcluster.NodeSpec{Name: fmt.Sprintf("%s-%d", pool, i), CPU: "4", Memory: "16Gi", Labels: map[string]string{poolLabel: pool}}
		if err := c.CreateNodes(context.Background(), spec); err != nil {
			t.Fatal(err)
		}
	}
}

// TestJobSetGangs runs the JobSet controller and the Job controller in-process
// with the phalanx scheduler. A JobSet whose pods carry gang-size (default
// scope) is ONE gang over all its replicated jobs, owned by the JobSet: on
// room for 4 of its 5 pods none binds; with a fifth node all 5 bind; deleting
// the JobSet deletes its PodGroup. A JobSet with gang-scope: job makes each
// child Job a gang: on room for 3 pods, one Job's 2 pods bind and the other
// Job's none; with a fourth node the second Job binds too. Each scenario has
// its own nodes (a pool label and node selector) on one shared cluster.
func TestJobSetGangs(t *testing.T) {
	c, err := testcluster.Start(t, testcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := c.InstallCRDYAML(ctx, readCRDs(t, "sigs.k8s.io/jobset")...); err != nil {
		t.Fatal(err)
	}
	for _, start := range []func() error{c.StartJobController, c.StartGarbageCollector} {
		if err := start(); err != nil {
			t.Fatal(err)
		}
	}
	jsCtx, stopJobSet := context.WithCancel(context.Background())
	t.Cleanup(stopJobSet)
	if err := StartJobSetController(jsCtx, c.Config); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartScheduler(manifests.SchedulerConfig); err != nil {
		t.Fatal(err)
	}
	t.Run("whole JobSet is one gang", func(t *testing.T) {
		const ns = "default"
		addNodes(t, c, "whole", 0, 4)
		gangOf5 := map[string]string{phalanxv1alpha1.GangSizeAnnotation: "5"}
		js, err := createJobSet(ctx, c, jobSet(ns, "whole", rjob("driver", "whole", 1, 1, gangOf5), rjob("workers", "whole", 2, 2, gangOf5)))
		if err != nil {
			t.Fatal(err)
		}
		selector := workload.JobSetNameLabel + "=whole"
		_, gang, err := c.WorkloadPods(ctx, ns, selector, 5, 90*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if gang.Owner == nil || gang.Owner.Kind != "JobSet" || gang.Owner.UID != js.UID || gang.MinMember != 5 {
			t.Fatalf("gang %+v, want minMember 5 owned by JobSet %s", gang, js.UID)
		}
		if _, err := c.WaitImplicitPodGroup(ctx, ns, gang, 60*time.Second); err != nil {
			t.Fatal(err)
		}
		if _, err := c.WaitCondition(ctx, ns, gang.Name, "Scheduled", "Unschedulable", 60*time.Second); err != nil {
			t.Fatal(err)
		}
		assertBound(t, c, ns, selector, 0)

		addNodes(t, c, "whole", 4, 1)
		waitBound(t, c, ns, selector, 5)

		// The PodGroup goes with the JobSet.
		if err := c.Dynamic.Resource(jobsetv1alpha2.GroupVersion.WithResource("jobsets")).Namespace(ns).Delete(ctx, js.Name,
			metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitPodGroupGone(ctx, ns, gang.Name, 90*time.Second); err != nil {
			t.Fatalf("PodGroup %s outlived its JobSet: %v", gang.Name, err)
		}
	})

	// InOrder: the JobSet controller creates the workers only once the
	// driver's pods are Ready, and phalanx starts none of the gang until all
	// 3 exist. The gang says so, with the fix, instead of waiting silently.
	t.Run("InOrder startup over a whole-JobSet gang is reported", func(t *testing.T) {
		const ns = "default"
		addNodes(t, c, "inorder", 0, 3)
		gangOf3 := map[string]string{phalanxv1alpha1.GangSizeAnnotation: "3"}
		spec := jobSet(ns, "inorder", rjob("driver", "inorder", 1, 1, gangOf3), rjob("workers", "inorder", 1, 2, gangOf3))
		spec.Spec.StartupPolicy = &jobsetv1alpha2.StartupPolicy{StartupPolicyOrder: jobsetv1alpha2.InOrder}
		if _, err := createJobSet(ctx, c, spec); err != nil {
			t.Fatal(err)
		}
		selector := workload.JobSetNameLabel + "=inorder"
		_, cond, err := c.WaitImplicitGangCondition(ctx, ns, selector, 1, "Scheduled", "OrderedStartup", 90*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"JobSet default/inorder", "startupPolicyOrder: InOrder", "AnyOrder", phalanxv1alpha1.GangScopeReplicatedJob} {
			if !strings.Contains(cond.Message, want) {
				t.Errorf("condition message %q does not say %q", cond.Message, want)
			}
		}
		pods, err := listPods(ctx, c, ns, selector)
		if err != nil {
			t.Fatal(err)
		}
		if len(pods) != 1 || boundOf(pods) != 0 {
			t.Fatalf("InOrder JobSet: %d pods, %d bound; want the driver's pod alone, unbound", len(pods), boundOf(pods))
		}
	})

	t.Run("gang-scope job makes each child Job a gang", func(t *testing.T) {
		const ns = "default"
		addNodes(t, c, "sliced", 0, 3)
		perJob := map[string]string{phalanxv1alpha1.GangSizeAnnotation: "2", phalanxv1alpha1.GangScopeAnnotation: phalanxv1alpha1.GangScopeJob}
		if _, err := createJobSet(ctx, c, jobSet(ns, "sliced", rjob("slice", "sliced", 2, 2, perJob))); err != nil {
			t.Fatal(err)
		}
		gangs := map[string]workload.Implicit{}
		for i := 0; i < 2; i++ {
			job := fmt.Sprintf("sliced-slice-%d", i)
			_, gang, err := c.WorkloadPods(ctx, ns, batchv1.JobNameLabel+"="+job, 2, 90*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if gang.Owner == nil || gang.Owner.Kind != "Job" || gang.Owner.Name != job || gang.MinMember != 2 {
				t.Fatalf("gang of %s: %+v, want minMember 2 owned by the Job", job, gang)
			}
			if _, err := c.WaitImplicitPodGroup(ctx, ns, gang, 60*time.Second); err != nil {
				t.Fatal(err)
			}
			gangs[job] = gang
		}
		if gangs["sliced-slice-0"].Name == gangs["sliced-slice-1"].Name {
			t.Fatalf("both Jobs in gang %s", gangs["sliced-slice-0"].Name)
		}
		// Room for 3: one Job's 2 pods bind, the other Job's none.
		pods := waitBound(t, c, ns, workload.JobSetNameLabel+"=sliced", 2)
		perJobBound := map[string]int{}
		for _, p := range pods {
			if p.Spec.NodeName != "" {
				perJobBound[p.Labels[batchv1.JobNameLabel]]++
			}
		}
		if len(perJobBound) != 1 {
			t.Fatalf("bound pods per Job %v, want both of one Job", perJobBound)
		}
		var waiting string
		for job := range gangs {
			if perJobBound[job] == 0 {
				waiting = job
			}
		}
		if _, err := c.WaitCondition(ctx, ns, gangs[waiting].Name, "Scheduled", "Unschedulable", 60*time.Second); err != nil {
			t.Fatal(err)
		}
		assertBound(t, c, ns, batchv1.JobNameLabel+"="+waiting, 0)

		addNodes(t, c, "sliced", 3, 1)
		waitBound(t, c, ns, workload.JobSetNameLabel+"=sliced", 4)
	})
}
