package gangs

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"

	"github.com/phalanx-sched/phalanx/internal/devices"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/plugins/internal/ports"
)

// watchDevices retries failed gangs when devices may have been freed or
// published: a claim deallocated or deleted, a slice or class changed. It
// wakes them too: the queue retries a member on such an event only if the
// plugin that turned it away registered it, and a gang turned away by its
// cached failure waited for another event (a slice published after the
// first plan left a gang unplanned for 20 s).
func (g *Gangs) watchDevices(fw *ports.Framework) error {
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

// ClaimRiders counts the gang's pending members that ride on a claim a
// reserved member shares with them (devices.ClaimRiders).
func (g *Gangs) ClaimRiders(ref ident.Ref) int {
	return devices.ClaimRiders(g.Members(ref), sets.New(g.Lifecycle.Reserved(ref)...), g.Lifecycle.PlacedUIDs(ref))
}
