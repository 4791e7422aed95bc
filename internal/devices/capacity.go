package devices

import (
	"context"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Capacity counts the devices slices publish as queue resources: each
// device counts once under the ResourceName of every class whose selectors
// it matches. Queues add it to the cluster total, so a class's devices have
// a deserved share.
func Capacity(ctx context.Context, slices []*resourceapi.ResourceSlice, classes []*resourceapi.DeviceClass, celCache *cel.Cache) resources.List {
	out := resources.List{}
	for _, sl := range slices {
		for _, dev := range sl.Spec.Devices {
			for _, class := range classes {
				if matches(ctx, celCache, sl.Spec.Driver, dev, class) {
					out[ResourceName(class)]++
				}
			}
		}
	}
	return out
}

// SliceCapacity is Capacity of one slice under the current classes.
func (d *Devices) SliceCapacity(ctx context.Context, sl *resourceapi.ResourceSlice) resources.List {
	classes, err := d.src.Classes().List()
	if err != nil || len(classes) == 0 {
		return nil
	}
	return Capacity(ctx, []*resourceapi.ResourceSlice{sl}, classes, d.celCache)
}

func matches(ctx context.Context, celCache *cel.Cache, driver string, dev resourceapi.Device, class *resourceapi.DeviceClass) bool {
	if len(class.Spec.Selectors) == 0 {
		return false
	}
	for _, sel := range class.Spec.Selectors {
		if sel.CEL == nil {
			continue
		}
		res := celCache.GetOrCompile(sel.CEL.Expression)
		if res.Error != nil {
			return false
		}
		ok, _, err := res.DeviceMatches(ctx, cel.Device{Driver: driver, Attributes: dev.Attributes, Capacity: dev.Capacity, AllowMultipleAllocations: dev.AllowMultipleAllocations})
		if err != nil || !ok {
			return false
		}
	}
	return true
}

// NodeOf is the node a slice's devices are on ("" when shared by nodes).
func NodeOf(sl *resourceapi.ResourceSlice) string { return ptr.Deref(sl.Spec.NodeName, "") }
