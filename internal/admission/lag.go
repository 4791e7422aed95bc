package admission

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/internal/queue"
)

// catchUpMaxWait bounds how long an admission waits for the queue
// accounting to give back pods the cycle's snapshot no longer holds
// (AwaitLeft).
const catchUpMaxWait = 250 * time.Millisecond

// AwaitLeft is for an admission of queue admitted above its deserved share
// on snap: it waits until the accounting charges no other waiting queue for
// a pod bound to one of the cycle's nodes that the node's snapshot no longer
// holds, for catchUpMaxWait at most. It reports whether the admission must
// be decided again on a new snapshot: the accounting was behind, or has
// changed since snap.
//
// The scheduler's cache and the runtime's pod handler each get a pod's
// leaving on their own, in either order. With the cache first, a cycle
// plans on the room the pod freed while the pod's queue is still charged
// for it: that queue seems to be at its share, not waiting below it, and
// the admitted queue goes above its own in its place (of two queues waiting
// for the room of a gang that just finished, the one after in order could
// win). Behind the other way, the accounting refuses, and the wake of the
// share given back retries. A pod bound after the snapshot was taken also
// looks missing; it costs this wait, and only here.
func (q *Queues) AwaitLeft(ctx context.Context, nodes []fwk.NodeInfo, snap *queue.Snapshot, admitted string) bool {
	waiting := map[string]bool{}
	for name, pending := range snap.Pending {
		if name != admitted && !pending.IsZero() {
			waiting[name] = true
		}
	}
	if len(waiting) == 0 {
		return false
	}
	byName := make(map[string]fwk.NodeInfo, len(nodes))
	for _, ni := range nodes {
		if n := ni.Node(); n != nil {
			byName[n.Name] = ni
		}
	}
	var expired chan struct{}
	for {
		q.mu.Lock()
		if q.left == nil {
			q.left = make(chan struct{})
		}
		left := q.left
		q.mu.Unlock()
		// Checked after taking the channel: a charge given back in between
		// closes it.
		if !q.behindSnapshot(byName, waiting) {
			return expired != nil || q.cache.Version() != snap.Version
		}
		if expired == nil {
			expired = make(chan struct{})
			timer := q.ports.Clock.AfterFunc(catchUpMaxWait, func() { close(expired) })
			defer timer.Stop()
		}
		select {
		case <-left:
		case <-expired:
			klog.FromContext(ctx).V(4).Info("Queue accounting still charges pods the scheduler's snapshot does not hold; deciding anyway", "waited", catchUpMaxWait)
			return true
		case <-ctx.Done():
			return true
		}
	}
}

// behindSnapshot reports whether the accounting charges one of queues for
// a pod bound to a node of the cycle's snapshot (by name) that the node's
// snapshot does not hold.
func (q *Queues) behindSnapshot(byName map[string]fwk.NodeInfo, queues map[string]bool) bool {
	return q.cache.AnyBound(queues, func(uid types.UID, node string) bool {
		ni, ok := byName[node]
		if !ok {
			return false // no plan of this cycle uses the node
		}
		for _, p := range ni.GetPods() {
			if p.GetPod().UID == uid {
				return false
			}
		}
		return true
	})
}

// gaveBack is for a placed pod whose charge was given back: it wakes
// AwaitLeft at once, and the gangs refused admission soon (the share may
// have moved).
func (q *Queues) gaveBack() {
	q.mu.Lock()
	if q.left != nil {
		close(q.left)
		q.left = nil
	}
	q.mu.Unlock()
	q.wakeSoon()
}
