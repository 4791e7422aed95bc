package gang

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/phalanx-sched/phalanx/internal/gang/fragment"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/lifecycle"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// The names of gang's sub-packages that callers of the manager use, kept
// here so that they build unchanged while plugins/runtime is split. New code
// imports the sub-package: ident (names and order of gangs), lifecycle
// (gang states, holds, reservations), planner, fragment.

// Ref names a gang (ident.Ref).
type Ref = ident.Ref

// Source says where a gang's definition comes from (ident.Source).
type Source = ident.Source

// The kinds of group object (ident.Source*).
const (
	SourcePodGroup  = ident.SourcePodGroup
	SourceWorkload  = ident.SourceWorkload
	SourceComposite = ident.SourceComposite
)

// SortRefs is ident.SortRefs.
func SortRefs(refs []Ref) { ident.SortRefs(refs) }

// Order places a pending gang in the scheduling queue (ident.Order).
type Order = ident.Order

// Compare is ident.Compare.
func Compare(a, b Order, queues func(a, b string) int) (int, ident.Decider) {
	return ident.Compare(a, b, queues)
}

// Why is ident.Why.
func Why(first, second Order, d ident.Decider) string { return ident.Why(first, second, d) }

// Oldest is ident.Oldest.
func Oldest(pods []*v1.Pod) *v1.Pod { return ident.Oldest(pods) }

// CompareMembers is ident.CompareMembers.
func CompareMembers(a, b *v1.Pod) int { return ident.CompareMembers(a, b) }

// Lifecycle tracks every gang the scheduler works on (lifecycle.Lifecycle).
type Lifecycle = lifecycle.Lifecycle

// NewLifecycle is lifecycle.NewLifecycle.
func NewLifecycle(clk clock.WithDelayedExecution, l Listener) *Lifecycle {
	return lifecycle.NewLifecycle(clk, l)
}

// The lifecycle's listeners (lifecycle.*Listener).
type (
	Listener       = lifecycle.Listener
	ResumeListener = lifecycle.ResumeListener
	FreedListener  = lifecycle.FreedListener
	HoldsListener  = lifecycle.HoldsListener
)

// A gang's phases (lifecycle.Phase*).
const (
	PhaseIdle      = lifecycle.PhaseIdle
	PhasePlanned   = lifecycle.PhasePlanned
	PhaseReserving = lifecycle.PhaseReserving
	PhaseStarted   = lifecycle.PhaseStarted
)

// The reasons the lifecycle ends a plan with (lifecycle.Reason*).
const (
	ReasonPlanBroken   = lifecycle.ReasonPlanBroken
	ReasonTimeout      = lifecycle.ReasonTimeout
	ReasonStranded     = lifecycle.ReasonStranded
	ReasonGroupDeleted = lifecycle.ReasonGroupDeleted
)

// ReservationRequest asks for a reservation (lifecycle.ReservationRequest).
type ReservationRequest = lifecycle.ReservationRequest

// ReservationPreempting is lifecycle.ReservationPreempting.
const ReservationPreempting = lifecycle.ReservationPreempting

// Claimant is who asks what others hold on a node (lifecycle.Claimant).
type Claimant = lifecycle.Claimant

// TimeoutPause is lifecycle.TimeoutPause.
func TimeoutPause(ttl time.Duration, n int) time.Duration { return lifecycle.TimeoutPause(ttl, n) }

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
