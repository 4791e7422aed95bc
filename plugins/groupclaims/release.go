package groupclaims

import (
	"context"
	"errors"
	"reflect"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// Reserve runs the in-tree Reserve, then drops the device allocator from the
// pod's cycle state. The allocator holds a copy of every allocated device and
// every node's slices (O(cluster) per pod); after Reserve nothing reads it,
// yet a gang member keeps its cycle state while it waits at Permit and for a
// bind slot, so a planned gang held one allocator per member (the DRA
// workload's peak heap was 37% allocators).
func (p *Plugin) Reserve(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	status := p.DynamicResources.Reserve(ctx, cs, pod, nodeName)
	if status.IsSuccess() && !releaseAllocator(cs) {
		p.unreleased.Do(func() {
			klog.FromContext(ctx).Error(nil, "The in-tree DynamicResources cycle state has no allocator field; waiting gang members keep their allocators", "plugin", Name)
		})
	}
	return status
}

// errReleased answers a call to an allocator dropped after Reserve: a clear
// error rather than a nil dereference if an upstream change reads it later.
var errReleased = errors.New("DynamicResources: the allocator was released after Reserve")

type releasedAllocator struct{}

func (releasedAllocator) Allocate(context.Context, *v1.Node, []*resourceapi.ResourceClaim) ([]resourceapi.AllocationResult, error) {
	return nil, errReleased
}

// releaseAllocator replaces a non-nil allocator in the in-tree plugin's state
// with releasedAllocator (non-nil: Reserve and Filter read "allocator != nil"
// as "claims to allocate"). It reports false when the state has no such
// field, which TestReleaseAllocator catches on a Kubernetes upgrade.
func releaseAllocator(cs fwk.CycleState) bool {
	field, ok := allocatorField(cs)
	if !ok {
		return false
	}
	if field.IsValid() && !field.IsNil() {
		field.Set(reflect.ValueOf(structured.Allocator(releasedAllocator{})))
	}
	return true
}

var allocatorType = reflect.TypeFor[structured.Allocator]()

// allocatorField is the settable "allocator" field of the in-tree plugin's
// unexported per-pod state. A pod with no state (the plugin was skipped) has
// nothing to release: an invalid Value and true.
func allocatorField(cs fwk.CycleState) (reflect.Value, bool) {
	data, err := cs.Read(fwk.StateKey(names.DynamicResources))
	if err != nil {
		return reflect.Value{}, errors.Is(err, fwk.ErrNotFound)
	}
	v := reflect.ValueOf(data)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return reflect.Value{}, false
	}
	f := v.Elem().FieldByName("allocator")
	if !f.IsValid() || f.Type() != allocatorType {
		return reflect.Value{}, false
	}
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem(), true
}
