package controller

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/devices"
	"github.com/phalanx-sched/phalanx/internal/queue"
)

const gpu = v1.ResourceName("nvidia.com/gpu")

// TestQueueStatusCountsDevices: the controller counts DRA devices as the
// scheduler does. A DeviceClass annotated to count as nvidia.com/gpu; a
// running pod whose claim asks for 2 of its devices is charged
// nvidia.com/gpu=2 in its queue's status.allocated, and a node whose
// ResourceSlice publishes 8 such devices adds nvidia.com/gpu=8 to the
// total the queues' shares divide. A pod whose claim (made from a
// template, named in its status) appears after the pod is charged when the
// claim's watch event comes; a slice's removal takes its devices off the
// total, a class relabelled recounts.
func TestQueueStatusCountsDevices(t *testing.T) {
	ctx := context.Background()
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{queue.Label: "train"}}}
	train := &phalanxv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "train"}}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1.NodeStatus{Allocatable: v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("64")}}}
	class := &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com", Annotations: map[string]string{devices.QueueResourceAnnotation: string(gpu)}},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: `device.driver == "gpu.example.com"`}}}},
	}
	slice := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "n1-gpus"},
		Spec: resourceapi.ResourceSliceSpec{Driver: "gpu.example.com", NodeName: ptr.To("n1"),
			Pool: resourceapi.ResourcePool{Name: "n1", ResourceSliceCount: 1}},
	}
	for i := range 8 {
		slice.Spec.Devices = append(slice.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i)})
	}
	claim := func(name string, count int64) *resourceapi.ResourceClaim {
		return &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: "gpus", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class.Name, Count: count,
					AllocationMode: resourceapi.DeviceAllocationModeExactCount}}}}},
		}
	}
	running := func(name string, pc v1.PodResourceClaim, status ...v1.PodResourceClaimStatus) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID("uid-" + name)},
			Spec: v1.PodSpec{NodeName: "n1", ResourceClaims: []v1.PodResourceClaim{pc},
				Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
					Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")},
					Claims:   []v1.ResourceClaim{{Name: pc.Name}}}}}},
			Status: v1.PodStatus{Phase: v1.PodRunning, ResourceClaimStatuses: status},
		}
	}
	// a: its claim named directly, 2 devices.
	a := running("a", v1.PodResourceClaim{Name: "gpus", ResourceClaimName: ptr.To("a-gpus")})
	// b: its claim made from a template, 3 devices, not there yet.
	b := running("b", v1.PodResourceClaim{Name: "gpus", ResourceClaimTemplateName: ptr.To("gpus")},
		v1.PodResourceClaimStatus{Name: "gpus", ResourceClaimName: ptr.To("b-gpus-x7k2")})

	c := fake.NewClientBuilder().WithScheme(Scheme()).
		WithObjects(ns, train, node, class, slice, claim("a-gpus", 2), a, b).
		WithStatusSubresource(&phalanxv1alpha1.Queue{}).
		WithIndex(&v1.Pod{}, claimField, claimsOf).Build()
	u := &QueueStatusUpdater{Client: c, Cache: readerCache{r: c}, DefaultQueue: "default", DRA: true,
		acct: queue.NewCache(), last: map[string]phalanxv1alpha1.QueueStatus{}}
	u.useDevices(ctx)
	handlers := map[string]watchHandler{}
	for _, h := range u.deviceHandlers(ctx) {
		handlers[fmt.Sprintf("%T", h.obj)] = h
	}
	u.setQueue(train)
	u.setNode(node)
	handlers["*v1.ResourceSlice"].h.OnAdd(slice, true)
	u.chargePod(ctx, a)
	u.chargePod(ctx, b)

	status := func() phalanxv1alpha1.QueueStatus {
		t.Helper()
		if err := u.sync(ctx); err != nil {
			t.Fatalf("sync: %v", err)
		}
		q := &phalanxv1alpha1.Queue{}
		if err := c.Get(ctx, client.ObjectKey{Name: "train"}, q); err != nil {
			t.Fatal(err)
		}
		return q.Status
	}
	check := func(what string, l v1.ResourceList, name v1.ResourceName, want int64) {
		t.Helper()
		if got := l[name]; got.Value() != want {
			t.Errorf("%s: %s = %s, want %d (%v)", what, name, got.String(), want, l)
		}
	}

	if got := u.acct.Snapshot(nil).Total[gpu]; got != 8 {
		t.Errorf("total nvidia.com/gpu = %d, want 8 (the node's slice)", got)
	}
	st := status()
	check("allocated", st.Allocated, gpu, 2)
	check("allocated", st.Allocated, v1.ResourceCPU, 2)

	// b's claim appears: the claim's event charges b.
	bClaim := claim("b-gpus-x7k2", 3)
	if err := c.Create(ctx, bClaim); err != nil {
		t.Fatal(err)
	}
	handlers["*v1.ResourceClaim"].h.OnAdd(bClaim, false)
	check("allocated once b's claim exists", status().Allocated, gpu, 5)

	// The class now counts as example.com/accel: pods and slices recount.
	relabelled := class.DeepCopy()
	relabelled.Annotations[devices.QueueResourceAnnotation] = "example.com/accel"
	if err := c.Update(ctx, relabelled); err != nil {
		t.Fatal(err)
	}
	handlers["*v1.DeviceClass"].h.OnUpdate(class, relabelled)
	st = status()
	check("allocated after the class is relabelled", st.Allocated, gpu, 0)
	check("allocated after the class is relabelled", st.Allocated, "example.com/accel", 5)
	if total := u.acct.Snapshot(nil).Total; total[gpu] != 0 || total["example.com/accel"] != 8 {
		t.Errorf("total after the class is relabelled: %v, want example.com/accel 8 and no nvidia.com/gpu", total)
	}

	// The slice goes: its devices leave the total.
	if err := c.Delete(ctx, slice); err != nil {
		t.Fatal(err)
	}
	handlers["*v1.ResourceSlice"].h.OnDelete(slice)
	if got := u.acct.Snapshot(nil).Total["example.com/accel"]; got != 0 {
		t.Errorf("total example.com/accel = %d after the slice went, want 0", got)
	}
}

// TestClassForResource: an extended resource maps to the class naming it
// in spec.extendedResourceName (the newest of several), else to the class
// of its implicit name.
func TestClassForResource(t *testing.T) {
	old := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "old", CreationTimestamp: metav1.Unix(100, 0)},
		Spec: resourceapi.DeviceClassSpec{ExtendedResourceName: ptr.To("example.com/gpu")}}
	newer := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "new", CreationTimestamp: metav1.Unix(200, 0)},
		Spec: resourceapi.DeviceClassSpec{ExtendedResourceName: ptr.To("example.com/gpu")}}
	plain := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "plain"}}
	c := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(old, newer, plain).Build()
	src := deviceSource{ctx: context.Background(), r: c}
	for name, want := range map[v1.ResourceName]string{
		"example.com/gpu":                          "new",
		"deviceclass.resource.kubernetes.io/plain": "plain",
		"deviceclass.resource.kubernetes.io/old":   "old",
		"example.com/other":                        "",
	} {
		got := ""
		if dc := src.ClassForResource(name); dc != nil {
			got = dc.Name
		}
		if got != want {
			t.Errorf("ClassForResource(%s) = %q, want %q", name, got, want)
		}
	}
}
