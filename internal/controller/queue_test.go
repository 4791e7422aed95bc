package controller

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/phalanx-sched/phalanx/internal/queue"
)

// readerCache is a cache.Cache that reads from a fake client; what the
// updater does not call on a cache (informers) is left unimplemented.
type readerCache struct {
	cache.Cache
	r client.Reader
}

func (c readerCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.r.Get(ctx, key, obj, opts...)
}

func (c readerCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.r.List(ctx, list, opts...)
}

// TestQueueOfWorkloadAPIGang is the case where the controller and the
// scheduler disagreed: a pod whose spec.schedulingGroup names an upstream
// PodGroup, made from a Workload labelled with queue "wl-queue", in a
// namespace labelled with queue "ns-queue". The controller charges it, as
// the scheduler does (plugins/runtime TestQueueOfWorkloadAPIGang), to the
// Workload's queue; to the PodGroup's own label when it has one; and moves it
// when the Workload's label changes. Where the Workload API is not served
// (the scheduler does not read it either), the namespace's queue.
func TestQueueOfWorkloadAPIGang(t *testing.T) {
	ctx := context.Background()
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{queue.Label: "ns-queue"}}}
	wl := &schedulingv1beta1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train",
		Labels: map[string]string{queue.Label: "wl-queue"}}}
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train-workers"},
		Spec: schedulingv1beta1.PodGroupSpec{
			WorkloadRef: &schedulingv1beta1.WorkloadReference{
				WorkloadName: "train", TemplateName: "workers"},
			SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 1}},
		},
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "w-0", UID: "uid-w-0"},
		Spec: v1.PodSpec{
			NodeName:        "n1",
			SchedulingGroup: &v1.PodSchedulingGroup{PodGroupName: ptr.To("train-workers")},
			Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}}},
		},
	}
	newUpdater := func(served bool, objs ...client.Object) (*QueueStatusUpdater, client.Client) {
		c := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(objs...).
			WithIndex(&v1.Pod{}, gangField, func(o client.Object) []string {
				if n := podGroupOf(o); n != "" {
					return []string{n}
				}
				return nil
			}).
			WithIndex(&v1.Pod{}, upstreamGangField, func(o client.Object) []string {
				if n := upstreamPodGroupOf(o); n != "" {
					return []string{n}
				}
				return nil
			}).Build()
		u := &QueueStatusUpdater{Cache: readerCache{r: c}, DefaultQueue: "default", acct: queue.NewCache()}
		u.upstream.Store(served)
		u.workloads.Store(served)
		return u, c
	}
	// charged is the queue the pod's CPU is allocated to in the accounting.
	charged := func(u *QueueStatusUpdater) string {
		t.Helper()
		var out []string
		for q, l := range u.acct.Snapshot(nil).Allocated {
			if l[v1.ResourceCPU] > 0 {
				out = append(out, q)
			}
		}
		if len(out) != 1 {
			t.Fatalf("the pod is charged to %v, want one queue", out)
		}
		return out[0]
	}

	t.Run("the Workload's label", func(t *testing.T) {
		u, _ := newUpdater(true, ns, wl, pg, pod)
		if got := u.queueOf(ctx, pod); got != "wl-queue" {
			t.Fatalf("queueOf = %q, want the Workload's wl-queue (not the namespace's ns-queue)", got)
		}
		u.chargePod(ctx, pod)
		if got := charged(u); got != "wl-queue" {
			t.Fatalf("charged to %q, want wl-queue", got)
		}
	})
	t.Run("the PodGroup's label first", func(t *testing.T) {
		labelled := pg.DeepCopy()
		labelled.Labels = map[string]string{queue.Label: "pg-queue"}
		u, _ := newUpdater(true, ns, wl, labelled, pod)
		if got := u.queueOf(ctx, pod); got != "pg-queue" {
			t.Fatalf("queueOf = %q, want the PodGroup's pg-queue", got)
		}
	})
	t.Run("the pod's label first", func(t *testing.T) {
		own := pod.DeepCopy()
		own.Labels = map[string]string{queue.Label: "pod-queue"}
		u, _ := newUpdater(true, ns, wl, pg, own)
		if got := u.queueOf(ctx, own); got != "pod-queue" {
			t.Fatalf("queueOf = %q, want the pod's pod-queue", got)
		}
	})
	t.Run("a Workload relabelled moves its pods", func(t *testing.T) {
		u, c := newUpdater(true, ns, wl, pg, pod)
		u.chargePod(ctx, pod)
		moved := wl.DeepCopy()
		moved.Labels[queue.Label] = "other-queue"
		if err := c.Update(ctx, moved); err != nil {
			t.Fatal(err)
		}
		u.rechargeWorkload(ctx, moved)
		if got := charged(u); got != "other-queue" {
			t.Fatalf("after relabelling the Workload: charged to %q, want other-queue", got)
		}
	})
	t.Run("Workload API not served", func(t *testing.T) {
		u, _ := newUpdater(false, ns, wl, pg, pod)
		if got := u.queueOf(ctx, pod); got != "ns-queue" {
			t.Fatalf("queueOf = %q, want the namespace's ns-queue", got)
		}
	})
}
