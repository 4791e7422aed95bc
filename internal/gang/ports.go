package gang

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
	"github.com/phalanx-sched/phalanx/internal/queue"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// The manager reaches the scheduler only through these ports. The scheduler
// adapter (plugins/coscheduling) implements them over the framework; the
// estimator and the simulator implement them over informers.

// Prober runs the scheduler's filters for a member on every node of one
// planning attempt.
type Prober interface {
	Probe(ctx context.Context, pod *v1.Pod) *View
}

// ProberFunc adapts a function to Prober.
type ProberFunc func(ctx context.Context, pod *v1.Pod) *View

// Probe calls f.
func (f ProberFunc) Probe(ctx context.Context, pod *v1.Pod) *View { return f(ctx, pod) }

// View is the cluster as one planning attempt saw it: every node's free room,
// the filters' verdict for the member there, and the pods it runs.
type View struct {
	Nodes    []planner.NodeState
	Verdicts []planner.Verdict
	// PodsOn lists the pods on node i (asked only to reserve or make room).
	PodsOn func(i int) []*v1.Pod
}

// NodeNames lists the view's nodes in order.
func (v *View) NodeNames() []string {
	out := make([]string, len(v.Nodes))
	for i, n := range v.Nodes {
		out[i] = n.Node.Name
	}
	return out
}

func (v *View) index(node string) (int, bool) {
	for i, n := range v.Nodes {
		if n.Node.Name == node {
			return i, true
		}
	}
	return 0, false
}

// Directory answers who belongs to which gang.
type Directory interface {
	// Spec is the gang's definition; an error when its group object is
	// missing.
	Spec(ref ident.Ref) (*gangspec.Spec, error)
	// RefOf is the gang of a pod (false outside gangs).
	RefOf(pod *v1.Pod) (ident.Ref, bool)
	// PriorityOf is the priority a pod counts with (its gang's, else its own).
	PriorityOf(pod *v1.Pod) int32
	// Pending lists the gang's members that wait for a node.
	Pending(ref ident.Ref) []*v1.Pod
	// Members lists the gang's pods, bound or not.
	Members(ref ident.Ref) []*v1.Pod
}

// Effects are what the manager's decisions do outside it.
type Effects interface {
	// SetCondition says why a gang waits (its Scheduled condition, False).
	SetCondition(spec *gangspec.Spec, reason, message string)
	// Wake puts a planned gang's pending members into the active queue.
	Wake(ref ident.Ref)
	// WakeOne retries a gang without a plan through one member (the one
	// standing for its failed plan, or a lead; its plan wakes the rest); why
	// is a Wake* reason, counted by the runtime's metrics.
	WakeOne(ref ident.Ref, why string)
	// Activate puts one pod back into the active queue.
	Activate(pod *v1.Pod)
	// Evict deletes the pods of a victim, saying why on them.
	Evict(ctx context.Context, pods []*v1.Pod, reason, message string)
	// Observe records a decision for the operators' metrics: outcome is
	// planned, unschedulable or reserved; d is the planning time (0 when
	// not timed).
	Observe(outcome string, d time.Duration)
	// Evicted counts whole victims evicted for reason (and the queue that
	// reclaimed, if any).
	Evicted(reason, forQueue string, victims int)
}

// Condition reasons the manager writes. The adapter's effects port writes
// them on the group object; docs/user-guide.md lists them.
const (
	ReasonMembersPending = "MembersPending"
	ReasonUnschedulable  = "Unschedulable"
	ReasonReserving      = "Reserving"
	ReasonPreempting     = "Preempting"
	ReasonPreempted      = "Preempted"
	// ReasonInvalidSubGroups: the gang's sub-groups cannot be formed (a
	// size that does not divide the gang, an unknown level, a sub-group
	// level not inside the gang's).
	ReasonInvalidSubGroups = "InvalidSubGroups"
	ReasonReclaimed        = "Reclaimed"
)

// Admission is the queue's verdict on one attempt (CapacityQueue): the
// snapshot taken once for the attempt — so admission and reclaim see the same
// numbers — the pod's queue and the reclaim policy.
type Admission struct {
	// take computes the snapshot the first time it is read: members of an
	// admitted gang rarely need it (only when they fail), and a snapshot
	// charges every gang's holds.
	take     func() *queue.Snapshot
	snapOnce sync.Once
	snap     *queue.Snapshot

	Queue   string
	QueueOf func(*v1.Pod) string
	// Admitted: the gang's remaining minimum (or the pod) fits its queue's
	// allowance; otherwise Refusal says why.
	Admitted bool
	Refusal  string
	// Need is what admission charged: the members the planner places.
	Need resources.List
	// Reclaim: a queue below its deserved share may evict gangs of queues
	// above theirs; a gang younger than MinRuntime is not reclaimed.
	Reclaim    bool
	MinRuntime time.Duration
}

// NewAdmission returns an admission whose snapshot is taken by take, once,
// when first read.
func NewAdmission(take func() *queue.Snapshot) *Admission {
	return &Admission{take: take}
}

// Snapshot is the queues as this attempt sees them.
func (a *Admission) Snapshot() *queue.Snapshot {
	a.snapOnce.Do(func() { a.snap = a.take() })
	return a.snap
}

// Constraint is a gang's topology constraint and the topology it refers to.
type Constraint struct {
	Tree                planner.Topology
	Required, Preferred string
	// SubRequired or SubPreferred is the level of each sub-group's domain
	// in a gang of sub-groups.
	SubRequired, SubPreferred string
	// SubErr says why the sub-groups' level cannot be used (unknown, or not
	// inside the gang's level).
	SubErr string
}

// Why the manager retries a gang (Effects.WakeOne) or a pod (Activate).
const (
	// WakeDisplaced: a gang ahead in its queue took its reservation.
	WakeDisplaced = "Displaced"
	// WakeRetryAfter: a victim became old enough to reclaim.
	WakeRetryAfter = "RetryAfter"
)
