package queue

import (
	"context"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/devices"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Feed turns the cluster's objects into a Cache's accounting: the one
// translation of nodes, slices, queues and pods that the scheduler and
// phalanx-controller share, whatever informers hand them the objects.
type Feed struct {
	cache *Cache
	// slices count the devices each node's ResourceSlices publish (nil:
	// devices are not counted).
	slices *devices.NodeSlices
	// node reads a node by name, for a node whose slices changed.
	node func(name string) (*v1.Node, error)
}

// NewFeed feeds c; slices may be nil (no DRA). node reads a node by name.
func NewFeed(c *Cache, slices *devices.NodeSlices, node func(name string) (*v1.Node, error)) *Feed {
	return &Feed{cache: c, slices: slices, node: node}
}

// Cache is the accounting fed.
func (f *Feed) Cache() *Cache { return f.cache }

// NodeTotal is a node's allocatable plus the devices its slices publish.
func (f *Feed) NodeTotal(n *v1.Node) resources.List {
	allocatable := resources.FromResourceList(n.Status.Allocatable)
	if f.slices == nil {
		return allocatable
	}
	return f.slices.Total(n.Name, allocatable)
}

// SetNode counts a node (an unschedulable node's capacity is not shared out).
func (f *Feed) SetNode(n *v1.Node) { f.cache.SetNode(n.Name, f.NodeTotal(n), !n.Spec.Unschedulable) }

// DeleteNode forgets a node.
func (f *Feed) DeleteNode(name string) { f.cache.DeleteNode(name) }

// SetSlice counts a slice's devices and recounts the nodes it changed.
func (f *Feed) SetSlice(ctx context.Context, sl *resourceapi.ResourceSlice) {
	if f.slices == nil {
		return
	}
	for _, name := range f.slices.Set(ctx, sl) {
		f.setNodeByName(name)
	}
}

// DeleteSlice forgets a slice's devices and recounts its node.
func (f *Feed) DeleteSlice(sl *resourceapi.ResourceSlice) {
	if f.slices == nil {
		return
	}
	if name := f.slices.Delete(sl); name != "" {
		f.setNodeByName(name)
	}
}

func (f *Feed) setNodeByName(name string) {
	if n, err := f.node(name); err == nil && n != nil {
		f.SetNode(n)
	}
}

// SetQueue takes a Queue's spec. After a restart, decayed fair share goes on
// from the recent usage phalanx-controller last wrote in its status.
func (f *Feed) SetQueue(q *phalanxv1alpha1.Queue) {
	f.cache.SetQueue(FromAPI(q))
	f.cache.SeedRecent(q.Name, resources.FromResourceList(q.Status.RecentUsage))
}

// DeleteQueue forgets a queue.
func (f *Feed) DeleteQueue(name string) { f.cache.DeleteQueue(name) }

// ChargePod charges the pod's demand to its queue (ChargeOf), or forgets a
// pod that no longer holds anything; it reports whether a placed pod gave
// its queue's share back.
func (f *Feed) ChargePod(pod *v1.Pod, queue string, demand resources.List, reserved bool) (gaveBack bool) {
	if ch, ok := ChargeOf(pod, queue, demand, reserved); ok {
		f.cache.SetPod(pod.UID, ch)
		return false
	}
	return f.cache.DeletePod(pod.UID)
}

// DeletePod forgets a pod; it reports whether it was placed.
func (f *Feed) DeletePod(uid types.UID) bool { return f.cache.DeletePod(uid) }
