package controller

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/queue"
)

// TestQueueStatusCountsHeld: a gang whose plan or reservation holds capacity
// (the scheduler's held annotation on its PodGroup) and has no pod bound
// yet counts in its queue's status.allocated — the PodGroup's queue label
// wins over its namespace's — as the scheduler's snapshot counts it; once
// the annotation is gone, so is the amount.
func TestQueueStatusCountsHeld(t *testing.T) {
	ctx := context.Background()
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{queue.Label: "ns-queue"}}}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1.NodeStatus{Allocatable: v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("64"), "nvidia.com/gpu": resource.MustParse("8")}}}
	train := &phalanxv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "train"}}
	other := &phalanxv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "ns-queue"}}
	pg := &pgv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "g",
			Labels:      map[string]string{queue.Label: "train"},
			Annotations: map[string]string{queue.HeldAnnotation: `{"cpu":"8","nvidia.com/gpu":"4"}`}},
		Spec: pgv1alpha1.PodGroupSpec{MinMember: 4},
	}
	// A member still pending: it counts nothing by itself.
	pending := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "g-0", UID: "uid-g-0",
		Labels: map[string]string{pgv1alpha1.PodGroupLabel: "g"}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), "nvidia.com/gpu": resource.MustParse("1")}}}}}}
	c := fake.NewClientBuilder().WithScheme(Scheme()).
		WithObjects(ns, node, train, other, pg, pending).
		WithStatusSubresource(&phalanxv1alpha1.Queue{}).
		WithIndex(&v1.Pod{}, gangField, func(o client.Object) []string {
			if n := podGroupOf(o); n != "" {
				return []string{n}
			}
			return nil
		}).Build()
	u := &QueueStatusUpdater{Client: c, Cache: readerCache{r: c}, DefaultQueue: "default",
		acct: queue.NewCache(), last: map[string]phalanxv1alpha1.QueueStatus{}}
	u.setNode(node)
	u.setQueue(train)
	u.setQueue(other)
	u.chargePod(ctx, pending)

	allocated := func(name string) v1.ResourceList {
		t.Helper()
		if err := u.sync(ctx); err != nil {
			t.Fatalf("sync: %v", err)
		}
		q := &phalanxv1alpha1.Queue{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, q); err != nil {
			t.Fatal(err)
		}
		return q.Status.Allocated
	}
	got := allocated("train")
	if cpu, gpu := got[v1.ResourceCPU], got["nvidia.com/gpu"]; cpu.Cmp(resource.MustParse("8")) != 0 || gpu.Cmp(resource.MustParse("4")) != 0 {
		t.Fatalf("train allocated %v while the gang holds cpu 8, gpu 4; want those", got)
	}
	if got := allocated("ns-queue"); len(got) != 0 {
		t.Errorf("ns-queue allocated %v, want nothing (the PodGroup names train)", got)
	}

	released := pg.DeepCopy()
	released.Annotations = nil
	if err := c.Update(ctx, released); err != nil {
		t.Fatal(err)
	}
	if got := allocated("train"); len(got) != 0 {
		t.Fatalf("train allocated %v after the annotation was removed, want nothing", got)
	}
}
