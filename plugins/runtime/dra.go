package runtime

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/internal/devices"
	"github.com/phalanx-sched/phalanx/internal/gang"
)

// draSource is the devices port over the framework's DRA manager: the same
// assume cache and in-flight claims the DynamicResources plugin allocates
// from.
type draSource struct{ m fwk.SharedDRAManager }

func (s draSource) Claim(namespace, name string) (*resourceapi.ResourceClaim, error) {
	return s.m.ResourceClaims().Get(namespace, name)
}

func (s draSource) Classes() structured.DeviceClassLister { return s.m.DeviceClasses() }

func (s draSource) ClassForResource(name v1.ResourceName) *resourceapi.DeviceClass {
	if r := s.m.DeviceClassResolver(); r != nil {
		return r.GetDeviceClass(name)
	}
	return nil
}

func (s draSource) Slices() ([]*resourceapi.ResourceSlice, error) {
	return s.m.ResourceSlices().ListWithDeviceTaintRules()
}

// Allocated retries briefly: the tracker refuses a read that races with a
// change of its state.
func (s draSource) Allocated() (*structured.AllocatedState, error) {
	var err error
	for range 100 {
		var st *structured.AllocatedState
		if st, err = s.m.ResourceClaims().GatherAllocatedState(); err == nil && st != nil {
			return st, nil
		}
	}
	return nil, fmt.Errorf("gathering allocated devices: %v", err)
}

// newDevices is the process's device view, nil when the scheduler has no
// DRA manager.
func newDevices(fw *FrameworkPorts) *devices.Devices {
	if fw.DRA == nil {
		return nil
	}
	features := dynamicresources.AllocatorFeatures(feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate))
	d := devices.New(draSource{fw.DRA}, features)
	if fw.Client != nil {
		d.SetWriter(claimWriter{fw.Client, fw.DRA})
	}
	return d
}

// claimWriter writes claim status with the scheduler's client, and tells
// the DRA manager's assume cache at once, as the DynamicResources plugin does
// after its own writes: a member must not be scheduled on the claim as it
// was before.
type claimWriter struct {
	c   kubernetes.Interface
	dra fwk.SharedDRAManager
}

func (w claimWriter) Unbound(ctx context.Context, namespace, name string, uid types.UID) (bool, error) {
	pod, err := w.c.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	return pod.UID == uid && pod.Spec.NodeName == "", nil
}

func (w claimWriter) GroupUnbound(ctx context.Context, namespace, podGroup string) (bool, error) {
	pods, err := w.c.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	for _, p := range pods.Items {
		if sg := p.Spec.SchedulingGroup; sg != nil && ptr.Deref(sg.PodGroupName, "") == podGroup && p.Spec.NodeName != "" {
			return false, nil
		}
	}
	return true, nil
}

func (w claimWriter) UpdateClaimStatus(ctx context.Context, claim *resourceapi.ResourceClaim) error {
	updated, err := w.c.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	return w.dra.ResourceClaims().AssumeClaimAfterAPICall(updated)
}

// watchDevices retries failed gangs when devices may have been freed or
// published: a claim deallocated or deleted, a slice or class changed. It
// wakes them too: the queue retries a member on such an event only if the
// plugin that turned it away registered it, and a gang turned away by its
// cached failure waited for another event (a slice published after the
// first plan left a gang unplanned for 20 s).
func (g *Gangs) watchDevices(fw *FrameworkPorts) error {
	changed := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { g.wakes.CapacityChanged() },
		UpdateFunc: func(any, any) { g.wakes.CapacityChanged() },
		DeleteFunc: func(any) { g.wakes.CapacityChanged() },
	}
	for _, inf := range []cache.SharedIndexInformer{
		fw.Informers.Resource().V1().ResourceSlices().Informer(),
		fw.Informers.Resource().V1().DeviceClasses().Informer(),
	} {
		if _, err := inf.AddEventHandler(changed); err != nil {
			return err
		}
	}
	_, err := fw.Informers.Resource().V1().ResourceClaims().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			o, _ := oldObj.(*resourceapi.ResourceClaim)
			n, _ := newObj.(*resourceapi.ResourceClaim)
			if o != nil && n != nil && o.Status.Allocation != nil && n.Status.Allocation == nil {
				g.wakes.CapacityChanged()
			}
		},
		DeleteFunc: func(any) { g.wakes.CapacityChanged() },
	})
	return err
}

// ClaimRiders counts the gang's pending members that wait on a claim a
// reserved (not yet bound) member shares with them: named by both, or their
// PodGroup's group-level claim. The DynamicResources plugin keeps such a
// member out until the claim's allocation, in flight for the reserved
// member, is written in PreBind; so it cannot reserve before the gang is let
// through. A rider's other claims must be its own (made from a template for
// it): their devices, like its node, are held by the plan. So it counts
// toward the quorum and follows once the shared claim is allocated.
func (g *Gangs) ClaimRiders(ref gang.Ref) int {
	reserved := sets.New(g.Lifecycle.Reserved(ref)...)
	if reserved.Len() == 0 {
		return 0
	}
	held := sets.New[string]()
	members := g.Members(ref)
	for _, m := range members {
		if reserved.Has(m.UID) {
			for i := range m.Spec.ResourceClaims {
				if name := devices.ClaimName(m, i); name != "" {
					held.Insert(name)
				}
			}
		}
	}
	if held.Len() == 0 {
		return 0
	}
	placed := g.Lifecycle.PlacedUIDs(ref)
	riders := 0
	for _, m := range members {
		if m.Spec.NodeName != "" || m.DeletionTimestamp != nil || placed.Has(m.UID) {
			continue
		}
		waits, rides := false, len(m.Spec.ResourceClaims) > 0
		for i, pc := range m.Spec.ResourceClaims {
			switch {
			case held.Has(devices.ClaimName(m, i)):
				waits = true
			case pc.ResourceClaimTemplateName == nil:
				rides = false
			}
		}
		if waits && rides {
			riders++
		}
	}
	return riders
}
