package gangs

import (
	"time"

	v1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"

	"k8s.io/client-go/tools/cache"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/metrics"
)

// sizes counts the entries of the runtime's per-gang and per-pod maps, which
// must all be pruned when gangs and pods are deleted.
func (g *Gangs) sizes() map[string]int {
	g.mu.Lock()
	out := map[string]int{
		"gangs.podEvents": len(g.podEvents),
		"gangs.inFlight":  g.inFlight.Len(),
		"gangs.startup":   g.StartupsTracked(),
	}
	g.mu.Unlock()
	out["implicitPGs.inFlight"] = g.implicitPGs.Tracked()
	for k, n := range g.wakes.Sizes() {
		if k != "gone" {
			out["gangs."+k] = n
		}
	}
	g.order.mu.Lock()
	out["gangs.order"] = len(g.order.keys)
	g.order.mu.Unlock()
	out["lifecycle.gangs"] = g.Lifecycle.Tracked()
	out["directory.memberAnnotations"] = g.Directory.Tracked()
	for k, n := range g.Status.Tracked() {
		out["status."+k] = n
	}
	if q := g.host.Queues(); q != nil {
		for k, n := range q.Sizes() {
			out["queues."+k] = n
		}
	}
	return out
}

// Sizes is sizes, for the tests of package runtime_test.
func (g *Gangs) Sizes() map[string]int { return g.sizes() }

// GroupAdded, GroupDeleted, PodAdded and PodDeleted deliver an event as the
// informers do: the object is already in (or out of) the informer's store,
// then the handlers run.
func (g *Gangs) GroupAdded(obj any) {
	if err := g.PodGroupIndex().Add(obj); err != nil {
		panic(err)
	}
	g.onGroup(nil, g.SpecOf(obj))
}

func (g *Gangs) GroupUpdated(oldObj, obj any) {
	if err := g.PodGroupIndex().Update(obj); err != nil {
		panic(err)
	}
	g.onGroup(g.SpecOf(oldObj), g.SpecOf(obj))
}

func (g *Gangs) GroupDeleted(obj any) {
	if err := g.PodGroupIndex().Delete(obj); err != nil {
		panic(err)
	}
	g.onGroupDelete(g.SpecOf(obj))
}

func (g *Gangs) PodAdded(obj any) {
	if err := g.PodIndex().Add(obj); err != nil {
		panic(err)
	}
	g.host.PodEvents.Each(func(h cache.ResourceEventHandler) { h.OnAdd(obj, false) })
}

func (g *Gangs) PodUpdated(oldObj, obj any) {
	if err := g.PodIndex().Update(obj); err != nil {
		panic(err)
	}
	g.host.PodEvents.Each(func(h cache.ResourceEventHandler) { h.OnUpdate(oldObj, obj) })
}

func (g *Gangs) PodDeleted(obj any) {
	if err := g.PodIndex().Delete(obj); err != nil {
		panic(err)
	}
	g.host.PodEvents.Each(func(h cache.ResourceEventHandler) { h.OnDelete(obj) })
}

// WakeFailed runs the change signal's wakes in the caller's goroutine.
func (g *Gangs) WakeFailed() { g.wakes.CapacityChanged() }

// Sweep runs one sweep in the caller's goroutine.
func (g *Gangs) Sweep() { g.sweep(g.host.Ctx, time.Minute) }

// PodLister is the runtime's view of pods (its informer's).
func (g *Gangs) PodLister() corelisters.PodLister { return g.pods }

// WakeOne is wakeOne, for the tests of package runtime_test.
func (g *Gangs) WakeOne(ref ident.Ref) { g.wakes.WakeOne(metrics.WokenFailedRetry, ref) }

// RetryStaleFailure is retryStaleFailure, for the tests of package runtime_test.
func (g *Gangs) RetryStaleFailure(pod *v1.Pod, gone any) bool {
	return g.wakes.RetryStaleFailure(pod, gone)
}

// MarkLeading is what Coscheduling's PreFilter calls on each cycle: the
// scheduling loop has started.
func (g *Gangs) MarkLeading() { g.host.Leader.CycleRan() }
