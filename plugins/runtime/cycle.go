package runtime

import (
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/internal/gang"
	"github.com/phalanx-sched/phalanx/internal/queue"
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

// QueueCycle is CapacityQueue's part: the gang manager's Admission for the
// cycle (the queue snapshot taken once, so PreFilter and PostFilter see the
// same numbers).
type QueueCycle struct{ *gang.Admission }

// NewQueueCycle returns a cycle whose snapshot is taken by take, once, when
// first read.
func NewQueueCycle(take func() *queue.Snapshot) *QueueCycle {
	return &QueueCycle{gang.NewAdmission(take)}
}

// Clone shares the admission: CapacityQueue's PreFilter writes it before
// any copy is made, and the snapshot is read-only.
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
	gang.Constraint
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

// WithCycleParts fills the gang manager's attempt with the other plugins'
// parts of the cycle: queue admission, NUMA limits, topology constraint.
func WithCycleParts(state fwk.CycleState, a *gang.Attempt) *gang.Attempt {
	if qc := ReadQueueCycle(state); qc != nil {
		a.Queue = qc.Admission
	}
	if nc := ReadNUMACycle(state); nc != nil {
		a.Limiter = nc.Limiter
	}
	if tc := ReadTopologyCycle(state); tc != nil {
		c := tc.Constraint
		a.Topology = &c
	}
	return a
}
