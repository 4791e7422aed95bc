package admission

import (
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/metrics"
	"github.com/phalanx-sched/phalanx/internal/queue"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Snapshot is the queue state for one scheduling cycle: capacity that plans
// and reservations hold counts against their gangs' queues (queue.ChargeHeld,
// as the controller counts the held annotation the status.Writer
// publishes). A request being decided counts as demand of its queue
// (wanting), even before the informer has charged every member that asks
// for it.
func (q *Queues) Snapshot(wanting ...queue.Want) *queue.Snapshot {
	held := queue.ChargeHeld(q.ports.Holds.HeldByGang(), func(ref ident.Ref) (string, bool) {
		spec, err := q.ports.Gangs.Spec(ref)
		if err != nil {
			return "", false
		}
		return q.QueueOfGang(spec, ident.Oldest(q.ports.Gangs.Members(ref))), true
	})
	snap := q.cache.Snapshot(held, wanting...)
	snap.Stalled = q.stalled()
	snap.Blocked = q.blockedDemand()
	q.mu.Lock()
	record := time.Since(q.metricsAt) > time.Second
	var gone []string
	if record {
		q.metricsAt = time.Now()
		gone, q.gone = q.gone, nil
	}
	q.mu.Unlock()
	if record {
		metrics.RecordQueues(snap.Allocated, snap.Deserved, snap.Recent, snap.Pending, gone)
	}
	return snap
}

// stalled sums, by queue, the demand of pending members of gangs that
// cannot start on the room free now (queue.Snapshot.Stalled).
func (q *Queues) stalled() map[string]resources.List {
	return q.demandOf(q.ports.Holds.Stalled(), nil)
}

// blockedDemand sums, by queue, the demand of what waits refused admission
// (queue.Snapshot.Blocked).
func (q *Queues) blockedDemand() map[string]resources.List {
	refs, pods := q.refused()
	return q.demandOf(refs, pods)
}

// demandOf sums, by queue, the demand of the pending members of gangs refs
// and of pods.
func (q *Queues) demandOf(refs []ident.Ref, pods []*v1.Pod) map[string]resources.List {
	out := map[string]resources.List{}
	add := func(name string, p *v1.Pod) {
		if out[name] == nil {
			out[name] = resources.List{}
		}
		out[name].Add(q.ports.Demand(p))
	}
	for _, ref := range refs {
		spec, err := q.ports.Gangs.Spec(ref)
		pending := q.ports.Gangs.Pending(ref)
		if err != nil || len(pending) == 0 {
			continue
		}
		name := q.QueueOfGang(spec, ident.Oldest(pending))
		for _, p := range pending {
			add(name, p)
		}
	}
	for _, p := range pods {
		add(q.QueueOf(p), p)
	}
	return out
}

// Ordering is the snapshot QueueSort compares with: reused while the cache is
// unchanged, and at most orderingMaxAge old otherwise.
func (q *Queues) Ordering() *queue.Snapshot {
	version := q.cache.Version()
	q.mu.Lock()
	snap := q.ordering
	age := time.Since(q.orderingAt)
	// With decayed fair share an unchanged cache still ages: its order is
	// reused for orderingMaxAgeDecaying at most.
	fresh := snap != nil && (age < orderingMaxAge || (q.orderingVersion == version && (q.opts.UsageHalfLife == 0 || age < orderingMaxAgeDecaying)))
	q.mu.Unlock()
	if fresh {
		return snap
	}
	snap = q.Snapshot()
	q.mu.Lock()
	q.ordering, q.orderingAt, q.orderingVersion = snap, time.Now(), version
	q.mu.Unlock()
	return snap
}
