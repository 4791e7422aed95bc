package controller

import (
	"context"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/structured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/phalanx-sched/phalanx/internal/devices"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// deviceSource is the devices port over the manager's cache: the
// controller only counts devices (Devices.Demand, SliceCapacity), never
// allocates, so Allocated is empty and slices carry no taint rules.
type deviceSource struct {
	ctx context.Context
	r   client.Reader
}

var _ devices.Source = deviceSource{}

func (s deviceSource) Claim(namespace, name string) (*resourceapi.ResourceClaim, error) {
	c := &resourceapi.ResourceClaim{}
	if err := s.r.Get(s.ctx, types.NamespacedName{Namespace: namespace, Name: name}, c); err != nil {
		return nil, err
	}
	return c, nil
}

func (s deviceSource) Classes() structured.DeviceClassLister { return classLister(s) }

func (s deviceSource) ClassForResource(name v1.ResourceName) *resourceapi.DeviceClass {
	classes, err := classLister(s).List()
	if err != nil {
		return nil
	}
	return devices.ClassForResource(classes, name)
}

func (s deviceSource) Slices() ([]*resourceapi.ResourceSlice, error) {
	var list resourceapi.ResourceSliceList
	if err := s.r.List(s.ctx, &list); err != nil {
		return nil, err
	}
	out := make([]*resourceapi.ResourceSlice, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

func (s deviceSource) Allocated() (*structured.AllocatedState, error) {
	return &structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
	}, nil
}

// classLister lists DeviceClasses from the cache.
type classLister deviceSource

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	var list resourceapi.DeviceClassList
	if err := l.r.List(l.ctx, &list); err != nil {
		return nil, err
	}
	out := make([]*resourceapi.DeviceClass, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	c := &resourceapi.DeviceClass{}
	if err := l.r.Get(l.ctx, types.NamespacedName{Name: name}, c); err != nil {
		return nil, err
	}
	return c, nil
}

// claimField indexes pods by the ResourceClaims they use: those named in
// spec.resourceClaims and those made for them from templates (named in
// status.resourceClaimStatuses), so a claim that appears recharges them.
const claimField = "phalanx.claim"

// claimsOf are the names of the ResourceClaims a pod uses.
func claimsOf(obj client.Object) []string {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return nil
	}
	names := sets.New[string]()
	for _, c := range pod.Spec.ResourceClaims {
		if c.ResourceClaimName != nil && *c.ResourceClaimName != "" {
			names.Insert(*c.ResourceClaimName)
		}
	}
	for _, st := range pod.Status.ResourceClaimStatuses {
		if st.ResourceClaimName != nil && *st.ResourceClaimName != "" {
			names.Insert(*st.ResourceClaimName)
		}
	}
	if names.Len() == 0 {
		return nil
	}
	return sets.List(names)
}

// indexClaims registers claimField (only where resource.k8s.io/v1 is
// served: the updater watches claims only then).
func indexClaims(mgr ctrl.Manager) error {
	return mgr.GetFieldIndexer().IndexField(context.Background(), &v1.Pod{}, claimField, claimsOf)
}

// useDevices makes the updater count devices (resource.k8s.io/v1 served).
func (u *QueueStatusUpdater) useDevices(ctx context.Context) {
	u.devices = devices.New(deviceSource{ctx: ctx, r: u.Cache}, structured.Features{})
	u.slices = devices.NewNodeSlices(u.devices)
}

// demand is what a pod asks for in queue resources: with DRA, its claims'
// devices counted as their classes' queue resources (Devices.Demand, as
// the scheduler charges it); else its containers' requests.
func (u *QueueStatusUpdater) demand(p *v1.Pod) resources.List {
	if u.devices != nil {
		return u.devices.Demand(p)
	}
	return resources.PodRequests(p)
}

// deviceHandlers watch what changes pods' device demand and nodes' device
// totals: a claim that appears or goes recharges the pods that use it; a
// slice recounts its node; a class recounts everything at the next sync.
func (u *QueueStatusUpdater) deviceHandlers(ctx context.Context) []watchHandler {
	rechargeClaim := func(obj any) {
		if c, ok := unwrap(obj).(*resourceapi.ResourceClaim); ok {
			u.recharge(ctx, client.InNamespace(c.Namespace), client.MatchingFields{claimField: c.Name})
		}
	}
	setSlice := func(obj any) {
		if sl, ok := obj.(*resourceapi.ResourceSlice); ok {
			u.feed(ctx).SetSlice(ctx, sl)
			u.poke()
		}
	}
	classChanged := func(any) {
		u.recount.Store(true)
		u.poke()
	}
	return []watchHandler{
		{&resourceapi.ResourceClaim{}, toolscache.ResourceEventHandlerFuncs{
			// A claim's spec is immutable: only its coming and going
			// change its pods' demand.
			AddFunc:    rechargeClaim,
			DeleteFunc: rechargeClaim,
		}},
		{&resourceapi.ResourceSlice{}, toolscache.ResourceEventHandlerFuncs{
			AddFunc:    setSlice,
			UpdateFunc: func(_, obj any) { setSlice(obj) },
			DeleteFunc: func(obj any) {
				if sl, ok := unwrap(obj).(*resourceapi.ResourceSlice); ok {
					u.feed(ctx).DeleteSlice(sl)
					u.poke()
				}
			},
		}},
		{&resourceapi.DeviceClass{}, toolscache.ResourceEventHandlerFuncs{
			AddFunc:    classChanged,
			UpdateFunc: func(_, obj any) { classChanged(obj) },
			DeleteFunc: classChanged,
		}},
	}
}

// recountDevices counts every slice and charges every pod again under the
// current classes.
func (u *QueueStatusUpdater) recountDevices(ctx context.Context) error {
	var slices resourceapi.ResourceSliceList
	if err := u.Cache.List(ctx, &slices); err != nil {
		return err
	}
	feed := u.feed(ctx)
	for i := range slices.Items {
		feed.SetSlice(ctx, &slices.Items[i])
	}
	u.recharge(ctx)
	return nil
}
