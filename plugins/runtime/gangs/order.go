package gangs

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/phalanx-sched/phalanx/internal/admission"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
)

// OrderKey is what the queue sort compares of one pod: its gang's order
// (or the pod's own, outside gangs), and when it entered the queue.
type OrderKey struct {
	ident.Order
	// Queued is when the pod entered the scheduling queue.
	Queued time.Time
}

// Less orders two keys by ident.Compare (queues' shares when queues is set),
// then by the time each pod entered the queue.
func Less(a, b OrderKey, queues *admission.Queues) bool {
	var byQueue func(a, b string) int
	if queues != nil {
		byQueue = queues.Ordering().Compare
	}
	if c, _ := ident.Compare(a.Order, b.Order, byQueue); c != 0 {
		return c < 0
	}
	return a.Queued.Before(b.Queued)
}

// orderKeys caches each pending pod's key: the queue sort compares a pod
// many times, and reading its gang and queue each time costs more than the
// comparison. A key holds until the pod or any group object, namespace
// label or queue label changes (generation); whether the gang is
// incomplete is read fresh.
type orderKeys struct {
	mu   sync.Mutex
	gen  uint64
	keys map[types.UID]cachedKey
}

type cachedKey struct {
	gen             uint64
	resourceVersion string
	byQueue         bool
	// member: the pod names a gang; hasSpec: its group object exists.
	member, hasSpec bool
	ref             ident.Ref
	key             OrderKey
}

// OrderChanged voids every cached sort key: a namespace's or queue's label
// changed what queue pods sort under.
func (g *Gangs) OrderChanged() { g.order.changed() }

// changed voids every cached key.
func (o *orderKeys) changed() {
	o.mu.Lock()
	o.gen++
	o.mu.Unlock()
}

func (o *orderKeys) forget(uid types.UID) {
	o.mu.Lock()
	delete(o.keys, uid)
	o.mu.Unlock()
}

// OrderKey returns the pod's sort key; queues is nil unless the profile
// orders by queue share. It reads caches only: it never writes to the API.
func (g *Gangs) OrderKey(pod *v1.Pod, queued time.Time, queues *admission.Queues) OrderKey {
	o := &g.order
	o.mu.Lock()
	c, ok := o.keys[pod.UID]
	gen := o.gen
	o.mu.Unlock()
	if !ok || c.gen != gen || c.resourceVersion != pod.ResourceVersion || c.byQueue != (queues != nil) {
		c = g.orderKey(pod, gen, queues)
		o.mu.Lock()
		if o.keys == nil {
			o.keys = map[types.UID]cachedKey{}
		}
		o.keys[pod.UID] = c
		o.mu.Unlock()
	}
	k := c.key
	k.Queued = queued
	if !c.hasSpec {
		k.Created = queued
	}
	if c.member {
		k.Incomplete = g.Lifecycle.Incomplete(c.ref)
	}
	return k
}

func (g *Gangs) orderKey(pod *v1.Pod, gen uint64, queues *admission.Queues) cachedKey {
	c := cachedKey{gen: gen, resourceVersion: pod.ResourceVersion, byQueue: queues != nil}
	c.key = OrderKey{Order: ident.Order{Priority: corev1helpers.PodPriority(pod), Namespace: pod.Namespace, Name: pod.Name}}
	ref, spec, ok, err := g.GangOf(pod)
	c.member, c.ref = ok, ref
	if ok && err == nil {
		c.hasSpec = true
		c.key.Created, c.key.Name, c.key.Source = spec.Created, ref.Name, ref.Source
		c.key.Priority = spec.PriorityOf(pod)
		if queues != nil {
			c.key.Queue = queues.QueueOfGang(spec, pod)
		}
	} else if queues != nil {
		c.key.Queue = queues.QueueOf(pod)
	}
	return c
}
