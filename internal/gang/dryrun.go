package gang

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/gang/copies"
	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Query asks how many whole copies of a gang fit now.
type Query struct {
	// Members are one copy's members (each pod stands for itself; equal
	// shapes are grouped). The first member's shape is probed.
	Members []*v1.Pod
	// Spec carries the gang's annotations (topology) and its sub-groups
	// (each copy's sub-groups are placed whole, as Plan places them); may
	// be nil.
	Spec     *gangspec.Spec
	Priority int32
	Prober   Prober
	Limiter  planner.Limiter
	Topology *Constraint
	// Admit, when set, says whether the queue takes copies asking need in
	// all; counting stops at the first copy it refuses.
	Admit func(need resources.List) bool
	// Max stops counting there (0: no limit).
	Max int
	// Assumed are workloads already sent to this cluster whose pods the
	// scheduler has not seen yet (Karmada's in-flight placements): each is
	// placed whole first, by resources and node admission, and what it takes
	// is not counted again. Those in the members' namespace are charged to
	// the queue too.
	Assumed [][]*v1.Pod
}

// Answer is a dry run's result.
type Answer struct {
	Copies int
	// Why the next copy does not fit (empty when Max was reached).
	Why string
}

// Copies answers a dry run: how many whole copies of the gang — every member
// of a copy placed together, inside one domain of a required level — fit now,
// on the capacity that plans and reservations of other gangs leave. It
// decides exactly as Plan does, copy after copy, and changes nothing.
func (m *Manager) Copies(ctx context.Context, q Query) Answer {
	if len(q.Members) == 0 {
		return Answer{}
	}
	// Members of a dry run need not exist: grouped by shape (and sub-group),
	// not told apart by UID as GroupPending does.
	groups := planner.GroupByKey(q.Members, m.demand(), func(p *v1.Pod) string { return gangspec.MemberShape(q.Spec, p) })
	// The NUMA limiter caps members per node over all copies; the request's
	// own limits cap one copy.
	a := &Attempt{Pod: q.Members[0], Spec: q.Spec, Priority: q.Priority, Topology: q.Topology, groups: groups}
	if a.Spec != nil {
		a.Ref = a.Spec.Ref
	}
	a.view = q.Prober.Probe(ctx, a.Pod)
	if a.view == nil || ctx.Err() != nil {
		return Answer{Why: "the cluster could not be read"}
	}
	m.openDevices(ctx, a)
	req, constraint := m.request(a, m.room(a, nil), false)
	// Copies are counted, not kept: the fragmentation tie-break between
	// equally tight nodes would cost a fit test per shape and node per copy.
	req.Workload = nil
	if a.Spec == nil && a.Topology != nil {
		// Pods of no gang yet: the caller names the constraint.
		req.Constrain(a.Topology.Tree, a.Topology.Required, a.Topology.Preferred, nil)
		constraint = planner.DescribeConstraint(a.Topology.Required, a.Topology.Preferred)
	}
	// Limiters that count over all copies: NUMA zones and devices.
	var across planner.Limiter
	switch {
	case a.devices != nil:
		across = planner.Limiters{q.Limiter, a.devices}
	case q.Limiter != nil:
		across = q.Limiter
	}
	count := copies.Count{
		Req: req, Groups: groups, Nodes: a.view.Nodes, Across: across, Demand: m.demand(),
		Assumed: q.Assumed, Namespace: a.Pod.Namespace, Admit: q.Admit, Max: q.Max,
		Describe: func(diag *planner.Diagnosis, req planner.Request) string {
			return planner.DescribeFailure(diag, 0, planner.Members(groups), constraint, req, a.view.NodeNames(), a.view.Verdicts)
		},
	}
	n, why := count.Run()
	return Answer{Copies: n, Why: why}
}
