package runtime

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/internal/gang"
	"github.com/phalanx-sched/phalanx/internal/queue"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// What each plugin contributes to the gang planner in one scheduling cycle.
// A plugin that is enabled in the profile writes its part in its PreFilter;
// Coscheduling, whose planner runs after every PreFilter, reads what is
// there. A plugin that is not enabled contributes nothing.
const (
	// QueueStateKey holds a *QueueCycle (CapacityQueue).
	QueueStateKey fwk.StateKey = "phalanx.dev/queue"
	// TopologyStateKey holds a *TopologyCycle (NetworkTopology).
	TopologyStateKey fwk.StateKey = "phalanx.dev/topology"
	// NUMAStateKey holds a *NUMACycle (NUMATopology).
	NUMAStateKey fwk.StateKey = "phalanx.dev/numa"
)

// QueueCycle is CapacityQueue's part: the queue snapshot taken once for the
// cycle (PreFilter and PostFilter see the same numbers), the pod's queue and
// the reclaim policy.
type QueueCycle struct {
	// take computes the snapshot the first time the cycle reads it: members
	// of an admitted gang rarely do (only when they fail), and a snapshot
	// charges every gang's holds.
	take     func() *queue.Snapshot
	snapOnce sync.Once
	snap     *queue.Snapshot

	Queue   string
	QueueOf func(*v1.Pod) string
	// Admitted: the gang's remaining minimum (or the pod) fits its queue's
	// allowance; otherwise Refusal says why. A refusal that reclaim may
	// cure (an ancestor's capability filled by queues above their share)
	// lets the cycle go on to PostFilter.
	Admitted bool
	Refusal  string
	// Need is what admission charged: the members the planner places.
	Need resources.List
	// Reclaim: a queue below its deserved share may evict gangs of queues
	// above theirs; a gang younger than MinRuntime is not reclaimed.
	Reclaim    bool
	MinRuntime time.Duration
}

// NewQueueCycle returns a cycle whose snapshot is taken by take, once, when
// first read.
func NewQueueCycle(take func() *queue.Snapshot) *QueueCycle {
	return &QueueCycle{take: take}
}

// Snapshot is the queues as this cycle sees them: the same numbers for every
// reader of the cycle.
func (c *QueueCycle) Snapshot() *queue.Snapshot {
	c.snapOnce.Do(func() { c.snap = c.take() })
	return c.snap
}

// Clone shares the snapshot: it is read-only.
func (c *QueueCycle) Clone() fwk.StateData { return c }

// ReadQueueCycle returns CapacityQueue's part of the cycle, or nil.
func ReadQueueCycle(state fwk.CycleState) *QueueCycle {
	d, err := state.Read(QueueStateKey)
	if err != nil {
		return nil
	}
	c, _ := d.(*QueueCycle)
	return c
}

// TopologyCycle is NetworkTopology's part: the gang's constraint and the
// topology it refers to.
type TopologyCycle struct {
	Tree                gang.Topology
	Required, Preferred string
}

// Clone shares the tree: it is read-only.
func (c *TopologyCycle) Clone() fwk.StateData { return c }

// ReadTopologyCycle returns NetworkTopology's part of the cycle, or nil.
func ReadTopologyCycle(state fwk.CycleState) *TopologyCycle {
	d, err := state.Read(TopologyStateKey)
	if err != nil {
		return nil
	}
	c, _ := d.(*TopologyCycle)
	return c
}

// NUMACycle is NUMATopology's part: how many members fit a node's zones.
type NUMACycle struct {
	Limiter gang.Limiter
	// Aligned: the cycle's pod needs NUMA alignment.
	Aligned bool
}

// Clone shares the limiter.
func (c *NUMACycle) Clone() fwk.StateData { return c }

// ReadNUMACycle returns NUMATopology's part of the cycle, or nil.
func ReadNUMACycle(state fwk.CycleState) *NUMACycle {
	d, err := state.Read(NUMAStateKey)
	if err != nil {
		return nil
	}
	c, _ := d.(*NUMACycle)
	return c
}
