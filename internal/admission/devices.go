package admission

import (
	"context"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// SliceHandler keeps each slice's device count and the node totals current.
func (q *Queues) SliceHandler(ctx context.Context) cache.ResourceEventHandlerFuncs {
	set := func(obj any) {
		if sl, ok := obj.(*resourceapi.ResourceSlice); ok {
			q.feed.SetSlice(ctx, sl)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, n any) { set(n) },
		DeleteFunc: func(obj any) {
			if sl, ok := deleted(obj).(*resourceapi.ResourceSlice); ok {
				q.feed.DeleteSlice(sl)
			}
		},
	}
}

// Recount counts every slice again, and the demand of every pod that asks
// for devices (asks): a DeviceClass was added, changed or deleted.
func (q *Queues) Recount(ctx context.Context, slices []*resourceapi.ResourceSlice, asks func(*v1.Pod) bool) {
	for _, sl := range slices {
		q.feed.SetSlice(ctx, sl)
	}
	pods, err := q.ports.Pods.List(labels.Everything())
	if err != nil {
		return
	}
	for _, p := range pods {
		if asks(p) {
			q.Charge(p)
		}
	}
}

// ClaimMade charges again the pod a claim was made for from its template:
// the pod's demand grew.
func (q *Queues) ClaimMade(obj any) {
	claim, ok := obj.(*resourceapi.ResourceClaim)
	if !ok {
		return
	}
	for _, o := range claim.OwnerReferences {
		if o.Kind != "Pod" {
			continue
		}
		if p, err := q.ports.Pods.Pods(claim.Namespace).Get(o.Name); err == nil && p.UID == o.UID {
			q.Charge(p)
		}
	}
}
