package runtime

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// watchSlices keeps each slice's device count and the node totals current.
func (q *Queues) watchSlices(fw *FrameworkPorts) error {
	d := q.gangs.Devices
	if d == nil {
		return nil
	}
	set := func(obj any) {
		if sl, ok := obj.(*resourceapi.ResourceSlice); ok {
			q.feed.SetSlice(q.rt.ctx, sl)
		}
	}
	remove := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if sl, ok := obj.(*resourceapi.ResourceSlice); ok {
			q.feed.DeleteSlice(sl)
		}
	}
	slices := fw.Informers.Resource().V1().ResourceSlices()
	if _, err := slices.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: set, UpdateFunc: func(_, n any) { set(n) }, DeleteFunc: remove,
	}); err != nil {
		return err
	}
	// A class added or changed recounts every slice, and the demand of
	// every pod that asks for devices.
	recount := func(any) {
		list, err := slices.Lister().List(labels.Everything())
		if err != nil {
			return
		}
		for _, sl := range list {
			set(sl)
		}
		pods, err := q.pods.List(labels.Everything())
		if err != nil {
			return
		}
		for _, p := range pods {
			if d.Asks(p) {
				q.charge(p)
			}
		}
	}
	if _, err := fw.Informers.Resource().V1().DeviceClasses().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: recount, UpdateFunc: func(_, n any) { recount(n) }, DeleteFunc: recount,
	}); err != nil {
		return err
	}
	// A claim made from a template after its pod: the pod's demand grows.
	_, err := fw.Informers.Resource().V1().ResourceClaims().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			claim, ok := obj.(*resourceapi.ResourceClaim)
			if !ok {
				return
			}
			for _, o := range claim.OwnerReferences {
				if o.Kind != "Pod" {
					continue
				}
				if p, err := q.pods.Pods(claim.Namespace).Get(o.Name); err == nil && p.UID == o.UID {
					q.charge(p)
				}
			}
		},
	})
	return err
}
