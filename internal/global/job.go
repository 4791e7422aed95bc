// Package global is phalanx's global tier on a Karmada control plane. It
// is a second Karmada scheduler: ResourceBindings whose PropagationPolicy
// names its schedulerName are dispatched by it, each whole to one member
// cluster, in the order of the same Queue objects phalanx orders gangs by
// inside a cluster, with deserved shares over the sum of the members.
//
// This package is the decision alone, free of Karmada's API: a pass reads
// the jobs, members and queues as the plane holds them (package plane turns
// the objects into these types) and the members' estimators' answers, and
// returns one verdict per waiting job. State lives in the bindings (which
// member each went to), so a restarted tier decides the same.
package global

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/phalanx-sched/phalanx/internal/estimator/karmadapb"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Member is a member cluster as the tier sees it.
type Member struct {
	Name string
	// Ready: Karmada reports it Ready and it takes new work (no NoSchedule
	// taint). Work already there still counts either way.
	Ready  bool
	Labels map[string]string
	// Allocatable is the member's allocatable total (its Cluster's
	// resource summary): the queues' global shares divide the sum.
	Allocatable resources.List
	// InUse is what the member's pods, bound or not, ask for (its
	// Cluster's resource summary: allocated and allocating).
	InUse resources.List
	// Cost orders members that fit equally well, lower first (label
	// CostLabel, 0 when absent).
	Cost int64
}

// CostLabel on a Cluster gives its cost, a non-negative integer: among
// members where a job starts now with the same fit, the cheaper one wins.
const CostLabel = "scheduling.phalanx.dev/cost"

// Job is one ResourceBinding the tier schedules: a whole set of replicas
// (a gang) that goes to one member.
type Job struct {
	// Key is the binding's namespace/name.
	Key string
	UID types.UID
	// Namespace, Kind and Name are the resource template's; dependencies
	// name templates.
	Namespace, Kind, Name string
	Queue                 string
	Priority              int32
	Created               time.Time
	// Request is the whole set's request: every replica of every
	// component.
	Request resources.List
	// Components are the set as the estimators are asked about it.
	Components []*karmadapb.Component
	// Member is where it was dispatched, "" while it waits.
	Member string
	// Since is when it was dispatched (zero while it waits).
	Since time.Time
	// Started: its quorum runs or has succeeded in its member (from the
	// binding's aggregated status). Done: it finished; it holds nothing.
	Started, Done bool
	// DependsOn are templates of the same namespace that must have
	// started first.
	DependsOn []string
	// Divides says why its placement would divide it over members; such
	// a job is refused ("" when it goes whole).
	Divides string
	// Allowed is the placement's cluster affinity (nil: every member).
	Allowed func(*Member) bool
	// Evicted are the members Karmada's failover evicted it from (the
	// binding's graceful eviction tasks): it goes to none of them while
	// the eviction lasts.
	Evicted []string
	// Invalid says what could not be read ("" when the job is well formed).
	Invalid string
}

// Reason says why a job waits, on its binding's Scheduled condition.
type Reason string

const (
	// Dispatched: sent whole to a member.
	Dispatched Reason = "Success"
	// QueueAboveShare: its queue would go above its global deserved share
	// while another queue waits below its own.
	QueueAboveShare Reason = "QueueAboveShare"
	// QueueRefused: the queue does not exist, is invalid or closed, or its
	// capability (or another queue's guarantee) leaves no room.
	QueueRefused Reason = "QueueRefused"
	// NoMemberFitsNow: no member can start the whole set now; it waits on
	// the plane, undivided, for the first member that can.
	NoMemberFitsNow Reason = "NoMemberFitsNow"
	// NoMemberCanHold: the set is larger than any member's allocatable
	// total: it can never start whole.
	NoMemberCanHold Reason = "NoMemberCanHold"
	// WouldDivide: its placement asks for more than one member.
	WouldDivide Reason = "WouldDivide"
	// DependencyWaiting: a job it depends on has not started.
	DependencyWaiting Reason = "DependencyWaiting"
	// DependencyMissing: a job it depends on does not exist.
	DependencyMissing Reason = "DependencyMissing"
	// InvalidJob: the binding could not be read.
	InvalidJob Reason = "InvalidJob"
	// DrainingForStarved: a member it would fit is kept for a job that has
	// waited past the bounded wait.
	DrainingForStarved Reason = "DrainingForStarved"
)

// Verdict is the pass's answer for one waiting job, or a move of a
// dispatched one.
type Verdict struct {
	Job *Job
	// Member to dispatch to ("" while it waits).
	Member string
	Reason Reason
	// Message says what the reason means for this job (members, shares).
	Message string
	// Position is its 1-based place among the jobs of its queue that still
	// wait after the pass (0 when dispatched).
	Position int
	// ClusterPosition is its 1-based place among every job still waiting
	// after the pass, the queues interleaved in the pass's order (0 when
	// dispatched).
	ClusterPosition int
	// Move: it was dispatched to Job.Member, has not started there, and
	// goes to Member instead.
	Move bool
}
