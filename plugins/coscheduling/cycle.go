package coscheduling

import (
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/internal/gang"
	"github.com/phalanx-sched/phalanx/plugins/capacityqueue"
	"github.com/phalanx-sched/phalanx/plugins/networktopology"
	"github.com/phalanx-sched/phalanx/plugins/numatopology"
)

// withCycleParts fills the planner's attempt with what the other phalanx
// plugins' PreFilters wrote in this cycle (each keeps its state private and
// exports one typed read): queue admission, NUMA limits, the topology
// constraint. A plugin the profile does not enable contributes nothing.
// Coscheduling's PreFilter runs after theirs, as the profile orders them.
func withCycleParts(state fwk.CycleState, a *gang.Attempt) *gang.Attempt {
	a.Queue = capacityqueue.Admission(state)
	a.Limiter = numatopology.Limiter(state)
	a.Topology = networktopology.Constraint(state)
	return a
}
