package karmada

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/karmada-io/karmada/pkg/util"
	"github.com/karmada-io/karmada/pkg/util/names"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/utils/ptr"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// propagate is how long each hop of the propagation flow may take
// (detector, scheduler, binding, execution, status: each reacts to
// watches; cluster status is collected every 2s).
const propagate = 60 * time.Second

// propagationSmoke runs Karmada's real propagation flow (see doc.go) with
// karmada-scheduler: a batch/v1 Job template and a PropagationPolicy on the
// plane end as the Job's gang bound by the chosen member's
// phalanx-scheduler, with the Job's status aggregated back on the
// ResourceBinding. TestKarmadaGlobal runs it first, on its fleet.
func (f *fleet) propagationSmoke(t *testing.T) {
	ctx := context.Background()
	flowStart := time.Now()

	job := gangJob("smoke", 2)
	f.propagateJob(t, job, "default-scheduler", "member-b")
	rb := f.waitScheduled(t, job)
	if got := targetNames(rb); !slices.Equal(got, []string{"member-b"}) {
		t.Fatalf("binding %s scheduled to %v, want [member-b] (clusterAffinity)", rb.Name, got)
	}
	if rb.Labels[workv1alpha2.ResourceBindingPermanentIDLabel] == "" || rb.Spec.Replicas != 2 {
		t.Fatalf("binding %s: labels %v, replicas %d; want a permanent id and 2 replicas", rb.Name, rb.Labels, rb.Spec.Replicas)
	}
	work := f.waitWorkApplied(t, job, "member-b")
	b := f.members["member-b"]
	memberJob := b.waitJob(t, job.Name)
	// The execution controller's labels: managed by Karmada, from this
	// binding.
	if memberJob.Labels[util.ManagedByKarmadaLabel] != util.ManagedByKarmadaLabelValue ||
		memberJob.Labels[workv1alpha2.ResourceBindingPermanentIDLabel] != rb.Labels[workv1alpha2.ResourceBindingPermanentIDLabel] {
		t.Fatalf("member-b's Job labels %v: want %s=%s and binding %s's permanent id", memberJob.Labels,
			util.ManagedByKarmadaLabel, util.ManagedByKarmadaLabelValue, rb.Name)
	}
	pods := b.waitJobPodsBound(t, memberJob, 2)
	for _, pod := range pods {
		if pod.Spec.SchedulerName != "phalanx-scheduler" || pod.Annotations[phalanxv1alpha1.GangSizeAnnotation] != "2" {
			t.Fatalf("pod %s: schedulerName %q, annotations %v", pod.Name, pod.Spec.SchedulerName, pod.Annotations)
		}
	}
	b.waitImplicitGang(t, memberJob, 2)
	status := f.waitAggregated(t, job, "member-b", func(s *batchv1.JobStatus) bool { return s.Active == 2 })
	if _, err := f.members["member-a"].Client.BatchV1().Jobs(namespace).Get(ctx, job.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("member-a has Job %s (err %v); the policy names member-b only", job.Name, err)
	}
	t.Logf("Job %s: binding -> [member-b], Work %s applied, 2 pods bound by phalanx-scheduler on %s and %s, aggregated status active=%d, in %v",
		job.Name, work.Name, pods[0].Spec.NodeName, pods[1].Spec.NodeName, status.Active, time.Since(flowStart).Round(time.Millisecond))
}

// gangJob is a batch/v1 Job of size pods that run at once, an implicit
// phalanx gang of them (gang-size), scheduled by phalanx-scheduler, each
// asking for a little CPU.
func gangJob(name string, size int32) *batchv1.Job {
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To(size),
			Completions: ptr.To(size),
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{phalanxv1alpha1.GangSizeAnnotation: fmt.Sprint(size)}},
				Spec: v1.PodSpec{
					SchedulerName:                 "phalanx-scheduler",
					RestartPolicy:                 v1.RestartPolicyNever,
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers: []v1.Container{{Name: "worker", Image: "registry.k8s.io/pause:3.10",
						Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m")}}}},
				},
			},
		},
	}
}

// propagateJob creates on the plane a PropagationPolicy for the Job,
// dispatched by schedulerName to one of clusters, and then the Job. The
// policy carries what karmada-webhook (not run) would add: the selector's
// namespace, a permanent id and the detector's finalizer.
func (f *fleet) propagateJob(t *testing.T, job *batchv1.Job, schedulerName string, clusters ...string) {
	t.Helper()
	f.propagate(t, job, schedulerName, policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: clusters}})
}

// propagate is propagateJob with any placement.
func (f *fleet) propagate(t *testing.T, job *batchv1.Job, schedulerName string, placement policyv1alpha1.Placement) {
	t.Helper()
	ctx := context.Background()
	pp := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{
			Name: job.Name, Namespace: job.Namespace,
			Labels:     map[string]string{policyv1alpha1.PropagationPolicyPermanentIDLabel: string(uuid.NewUUID())},
			Finalizers: []string{util.PropagationPolicyControllerFinalizer},
		},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "batch/v1", Kind: "Job", Namespace: job.Namespace, Name: job.Name}},
			Placement:         placement,
			SchedulerName:     schedulerName,
		},
	}
	if _, err := f.karmada.PolicyV1alpha1().PropagationPolicies(job.Namespace).Create(ctx, pp, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PropagationPolicy %s: %v", pp.Name, err)
	}
	if _, err := f.Client.BatchV1().Jobs(job.Namespace).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Job %s on the plane: %v", job.Name, err)
	}
}

// waitScheduled waits until the detector has made the Job's
// ResourceBinding and a scheduler has placed it (Scheduled=True).
func (f *fleet) waitScheduled(t *testing.T, job *batchv1.Job) *workv1alpha2.ResourceBinding {
	t.Helper()
	name := names.GenerateBindingName(job.Kind, job.Name)
	var rb *workv1alpha2.ResourceBinding
	err := testcluster.Eventually(context.Background(), propagate, func(ctx context.Context) (bool, error) {
		f.checkAlive(t)
		var err error
		rb, err = f.karmada.WorkV1alpha2().ResourceBindings(job.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond := meta.FindStatusCondition(rb.Status.Conditions, workv1alpha2.Scheduled)
		return cond != nil && cond.Status == metav1.ConditionTrue && len(rb.Spec.Clusters) > 0, nil
	})
	if err != nil {
		t.Fatalf("ResourceBinding %s/%s never scheduled (last: %+v): %v", job.Namespace, name, rb, err)
	}
	return rb
}

// waitWorkApplied waits for the binding controller's Work of the Job in
// the cluster's execution namespace, applied there by the execution
// controller.
func (f *fleet) waitWorkApplied(t *testing.T, job *batchv1.Job, cluster string) *workv1alpha1.Work {
	t.Helper()
	ns, name := names.GenerateExecutionSpaceName(cluster), names.GenerateWorkName(job.Kind, job.Name, job.Namespace)
	var work *workv1alpha1.Work
	err := testcluster.Eventually(context.Background(), propagate, func(ctx context.Context) (bool, error) {
		f.checkAlive(t)
		var err error
		work, err = f.karmada.WorkV1alpha1().Works(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(work.Status.Conditions, workv1alpha1.WorkApplied) &&
			work.Labels[workv1alpha2.WorkPermanentIDLabel] != "", nil
	})
	if err != nil {
		t.Fatalf("Work %s/%s never applied (last: %+v): %v", ns, name, work, err)
	}
	return work
}

// waitAggregated waits until the binding's aggregatedStatus has the
// cluster's item applied with a Job status that satisfies ok.
func (f *fleet) waitAggregated(t *testing.T, job *batchv1.Job, cluster string, ok func(*batchv1.JobStatus) bool) *batchv1.JobStatus {
	t.Helper()
	name := names.GenerateBindingName(job.Kind, job.Name)
	var last []workv1alpha2.AggregatedStatusItem
	var status *batchv1.JobStatus
	err := testcluster.Eventually(context.Background(), propagate, func(ctx context.Context) (bool, error) {
		f.checkAlive(t)
		rb, err := f.karmada.WorkV1alpha2().ResourceBindings(job.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = rb.Status.AggregatedStatus
		for _, item := range last {
			if item.ClusterName != cluster || !item.Applied || item.Status == nil {
				continue
			}
			status = &batchv1.JobStatus{}
			if err := json.Unmarshal(item.Status.Raw, status); err != nil {
				return false, fmt.Errorf("aggregated status of %s: %w", cluster, err)
			}
			return ok(status), nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("binding %s: aggregatedStatus for %s never as wanted (last: %s): %v", name, cluster, aggregatedString(last), err)
	}
	return status
}

func aggregatedString(items []workv1alpha2.AggregatedStatusItem) string {
	var out []string
	for _, item := range items {
		raw := ""
		if item.Status != nil {
			raw = string(item.Status.Raw)
		}
		out = append(out, fmt.Sprintf("{%s applied=%v %s health=%s status=%s}", item.ClusterName, item.Applied, item.AppliedMessage, item.Health, raw))
	}
	return fmt.Sprint(out)
}

// checkAlive fails the test if a plane component has exited.
func (f *fleet) checkAlive(t *testing.T) {
	t.Helper()
	for _, p := range []*proc{f.controllerManager, f.scheduler} {
		if p != nil && p.exited() {
			t.Fatalf("%s exited:\n%s", p, tail(p.log, 40))
		}
	}
}

// waitJob waits for the Job Karmada's execution controller creates in the
// member.
func (m *member) waitJob(t *testing.T, name string) *batchv1.Job {
	t.Helper()
	var job *batchv1.Job
	err := testcluster.Eventually(context.Background(), propagate, func(ctx context.Context) (bool, error) {
		var err error
		job, err = m.Client.BatchV1().Jobs(namespace).Get(ctx, name, metav1.GetOptions{})
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("%s: Job %s never created: %v", m.name, name, err)
	}
	return job
}

// waitJobPodsBound waits until n pods of the member's Job are bound and
// returns them; the member's phalanx-scheduler must have bound each.
func (m *member) waitJobPodsBound(t *testing.T, job *batchv1.Job, n int) []v1.Pod {
	t.Helper()
	ctx := context.Background()
	var bound []v1.Pod
	err := testcluster.Eventually(ctx, propagate, func(ctx context.Context) (bool, error) {
		var err error
		bound, err = m.BoundPods(ctx, namespace, batchv1.ControllerUidLabel+"="+string(job.UID))
		return len(bound) == n, err
	})
	if err != nil {
		t.Fatalf("%s: %d of %d pods of Job %s bound: %v", m.name, len(bound), n, job.Name, err)
	}
	for _, pod := range bound {
		// Its log is where phalanx-scheduler says it bound the pod.
		bind := fmt.Sprintf("pod=%q node=%q", namespace+"/"+pod.Name, pod.Spec.NodeName)
		err := testcluster.Eventually(ctx, 10*time.Second, func(context.Context) (bool, error) {
			return len(grepLog(m.phalanx.Log, "Successfully bound pod to node", bind)) == 1, nil
		})
		if err != nil {
			t.Fatalf("%s: pod %s bound to %s, but phalanx-scheduler's log (%s) has no binding of it: %v", m.name, pod.Name, pod.Spec.NodeName, m.phalanx.Log, err)
		}
	}
	return bound
}

// waitImplicitGang waits for the PodGroup phalanx-scheduler makes for the
// Job's implicit gang: owned by the Job, minMember size.
func (m *member) waitImplicitGang(t *testing.T, job *batchv1.Job, size int32) {
	t.Helper()
	var seen []string
	err := testcluster.Eventually(context.Background(), propagate, func(ctx context.Context) (bool, error) {
		pgs, err := m.PodGroups.SchedulingV1alpha1().PodGroups(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		seen = seen[:0]
		for _, pg := range pgs.Items {
			seen = append(seen, fmt.Sprintf("%s(minMember %d)", pg.Name, pg.Spec.MinMember))
			if ownedBy(&pg, job.UID) && pg.Spec.MinMember == size {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("%s: no PodGroup of minMember %d owned by Job %s (PodGroups %v): %v", m.name, size, job.Name, seen, err)
	}
}

func ownedBy(pg *pgv1alpha1.PodGroup, uid types.UID) bool {
	for _, o := range pg.OwnerReferences {
		if o.UID == uid {
			return true
		}
	}
	return false
}
