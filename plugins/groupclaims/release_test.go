package groupclaims

import (
	"context"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

type testHandle struct {
	fwk.Handle
	client    clientset.Interface
	informers informers.SharedInformerFactory
}

func (h testHandle) ClientSet() clientset.Interface                         { return h.client }
func (h testHandle) SharedInformerFactory() informers.SharedInformerFactory { return h.informers }
func (h testHandle) SharedDRAManager() fwk.SharedDRAManager                 { return nil }
func (h testHandle) ProfileName() string                                    { return "test" }

type heldAllocator struct{}

func (heldAllocator) Allocate(context.Context, *v1.Node, []*resourceapi.ResourceClaim) ([]resourceapi.AllocationResult, error) {
	return nil, nil
}

// TestReleaseAllocator: after a successful Reserve the in-tree plugin's
// per-pod state no longer references its allocator. It runs the real in-tree
// PreFilter, so a Kubernetes upgrade that renames or retypes the field fails
// here instead of silently keeping one allocator per waiting gang member.
func TestReleaseAllocator(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	h := testHandle{client: client, informers: informers.NewSharedInformerFactory(client, 0)}
	pl, err := dynamicresources.New(ctx, &config.DynamicResourcesArgs{}, h, feature.Features{EnableDynamicResourceAllocation: true})
	if err != nil {
		t.Fatal(err)
	}
	plugin := &Plugin{DynamicResources: pl.(*dynamicresources.DynamicResources)}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "worker-0", UID: "w0"}}
	cs := framework.NewCycleState()
	if _, status := plugin.PreFilter(ctx, cs, pod, nil); status.Code() != fwk.Skip {
		t.Fatalf("PreFilter of a pod without claims: %v, want Skip", status)
	}
	field, ok := allocatorField(cs)
	if !ok || !field.IsValid() {
		t.Fatalf("the in-tree state %T has no allocator field of type %v", mustRead(t, cs), allocatorType)
	}
	// Stand in for the allocator PreFilter builds for a pod with claims.
	field.Set(reflect.ValueOf(heldAllocator{}))

	if status := plugin.Reserve(ctx, cs, pod, "node-0"); !status.IsSuccess() {
		t.Fatalf("Reserve: %v", status)
	}
	if got := field.Interface(); got != (releasedAllocator{}) {
		t.Fatalf("after Reserve the state holds allocator %#v, want it released", got)
	}
	if _, err := field.Interface().(releasedAllocator).Allocate(ctx, nil, nil); err != errReleased {
		t.Fatalf("a released allocator answers %v, want %v", err, errReleased)
	}

	// No state (the plugin was skipped before writing one): nothing to do.
	if !releaseAllocator(framework.NewCycleState()) {
		t.Fatal("a cycle state without the plugin's state reported an unknown layout")
	}
	// A state of another shape is reported, not touched.
	other := framework.NewCycleState()
	otherData := &otherState{allocator: heldAllocator{}}
	other.Write(fwk.StateKey(names.DynamicResources), otherData)
	if releaseAllocator(other) || otherData.allocator != (heldAllocator{}) {
		t.Fatalf("a state whose allocator field has another type was reported released or changed: %#v", otherData.allocator)
	}
}

// otherState has an allocator field of another type than the in-tree one.
type otherState struct{ allocator any }

func (s *otherState) Clone() fwk.StateData { return s }

func mustRead(t *testing.T, cs fwk.CycleState) fwk.StateData {
	data, err := cs.Read(fwk.StateKey(names.DynamicResources))
	if err != nil {
		t.Fatal(err)
	}
	return data
}
