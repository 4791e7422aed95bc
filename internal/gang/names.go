package gang

import (
	"time"

	"github.com/phalanx-sched/phalanx/internal/gang/fragment"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// The planner's and the fragmentation score's names that callers of the
// manager use, kept here so that they build unchanged while plugins/runtime
// is split; new code imports internal/gang/planner and
// internal/gang/fragment.

// Plan is a placement: node -> shape key -> members (planner.Plan).
type Plan = planner.Plan

// Limiter caps copies of a pod per node beyond arithmetic (planner.Limiter).
type Limiter = planner.Limiter

// Verdict is the filters' answer on one node, as a Prober reports it
// (planner.Verdict).
type Verdict = planner.Verdict

// NodeState is a node of a Prober's view (planner.NodeState).
type NodeState = planner.NodeState

// WorkloadShape is one GPU pod shape of the expected workload
// (fragment.WorkloadShape).
type WorkloadShape = fragment.WorkloadShape

// NewShapeHistory is fragment.NewShapeHistory.
func NewShapeHistory(halfLife time.Duration) *fragment.ShapeHistory {
	return fragment.NewShapeHistory(halfLife)
}

// PlacedDomain is planner.PlacedDomain.
func PlacedDomain(t planner.Topology, required string, placedNodes []string) (string, int) {
	return planner.PlacedDomain(t, required, placedNodes)
}

// Demand is planner.Demand.
func Demand(groups []planner.ShapeGroup) resources.List { return planner.Demand(groups) }
