// Package queue is the queue accounting of phalanx: the Cache of queues,
// nodes and pods charged to them, fed by a Feed from the cluster's objects,
// the per-decision Snapshot that admission, ordering, reclaim and
// Queue.status read, decayed recent usage, held charges and the resolution
// of a pod's queue. The pure model it decides with (hierarchy, deserved
// shares, admission, reclaim victims) is package queue/tree.
package queue

import (
	"github.com/phalanx-sched/phalanx/internal/queue/tree"
)

// Queue is one queue as the model sees it (tree.Queue), as the cache is fed
// it.
type Queue tree.Queue

// Gang is a running gang that reclaim may evict (tree.Gang).
type Gang tree.Gang

// Build validates and links queues (tree.Build).
func Build(queues []Queue) (*tree.Tree, []tree.QueueError) {
	qs := make([]tree.Queue, len(queues))
	for i, q := range queues {
		qs[i] = tree.Queue(q)
	}
	return tree.Build(qs)
}
