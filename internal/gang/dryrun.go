package gang

import (
	"context"
	"maps"
	"math"

	v1 "k8s.io/api/core/v1"

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
	Spec     *Spec
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
	groups := planner.GroupByKey(q.Members, m.demand(), func(p *v1.Pod) string { return MemberShape(q.Spec, p) })
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
	lim := newCopyLimits(req, groups, across)
	demand := planner.Demand(groups)
	_, shapes := planner.Shapes(groups)
	total := resources.List{}
	for _, w := range q.Assumed {
		if need, ok := m.placeAssumed(req, a.view.Nodes, lim.byName, w); ok && w[0].Namespace == a.Pod.Namespace {
			total.Add(need)
		}
	}
	if planner.Members(groups) == 1 {
		return singleCopies(req, groups[0], lim.zoneCap, total, demand, q)
	}
	planner.WithMemo(req.Nodes)
	var ans Answer
	for q.Max == 0 || ans.Copies < q.Max {
		if q.Admit != nil {
			next := total.Clone()
			next.Add(demand)
			if !q.Admit(next) {
				ans.Why = "the queue's allowance takes no more copies"
				return ans
			}
		}
		plan, diag := planner.Place(req)
		if plan == nil {
			ans.Why = planner.DescribeFailure(diag, 0, planner.Members(groups), constraint, req, a.view.NodeNames(), a.view.Verdicts)
			return ans
		}
		ans.Copies++
		total.Add(demand)
		lim.take(req, plan, shapes)
	}
	return ans
}

// copyLimits are a dry run's per-node member limits: one copy's own
// (perCopy) and, under limiters that count over all copies (NUMA zones,
// devices), what is left for further copies (zoneCap; nil without them).
type copyLimits struct {
	perCopy, zoneCap []map[string]int
	byName           map[string]int
}

// newCopyLimits records the request's limits and lowers each to what the
// limiters across copies allow.
func newCopyLimits(req planner.Request, groups []planner.ShapeGroup, across planner.Limiter) copyLimits {
	lim := copyLimits{
		perCopy: make([]map[string]int, len(req.Nodes)),
		zoneCap: make([]map[string]int, len(req.Nodes)),
		byName:  make(map[string]int, len(req.Nodes)),
	}
	for i := range req.Nodes {
		n := &req.Nodes[i]
		lim.byName[n.Name] = i
		lim.perCopy[i] = n.Limit
		if across == nil {
			continue
		}
		zc := make(map[string]int, len(groups))
		lim.zoneCap[i] = zc
		for _, g := range groups {
			if l, ok := n.Limit[g.Key]; ok {
				zc[g.Key] = across.Limit(g.Rep, n.Name, int(min(n.Free.Copies(g.Request, math.MaxInt32), n.FreePods)))
				if zc[g.Key] < l {
					n.Limit = withLimit(n.Limit, g.Key, zc[g.Key])
				}
			}
		}
	}
	return lim
}

// take removes a placed copy from the request's nodes: their free room, and
// what the limiters across copies leave.
func (lim copyLimits) take(req planner.Request, plan *planner.Plan, shapes map[string]resources.List) {
	for node, byShape := range plan.Slots {
		i := lim.byName[node]
		n := &req.Nodes[i]
		n.Free = n.Free.Clone()
		for shape, c := range byShape {
			n.Free.AddScaled(shapes[shape], -int64(c))
			n.FreePods -= int64(c)
			if lim.zoneCap[i] != nil {
				lim.zoneCap[i][shape] -= c
				if l := min(lim.perCopy[i][shape], lim.zoneCap[i][shape]); l != n.Limit[shape] {
					n.Limit = withLimit(n.Limit, shape, l)
				}
			}
		}
	}
}

// singleCopies counts copies of a one-member gang: each node's room, summed
// (the planner would place them one by one, node after node, to the same
// count). Karmada asks this for every single-template workload, and a
// cluster takes tens of thousands of small pods.
func singleCopies(req planner.Request, g planner.ShapeGroup, zoneCap []map[string]int, charged, demand resources.List, q Query) Answer {
	total := 0
	for i := range req.Nodes {
		n := &req.Nodes[i]
		if l, ok := n.Limit[g.Key]; !ok || l <= 0 || n.FreePods <= 0 {
			continue
		}
		c := int(n.Free.Copies(g.Request, n.FreePods))
		if zoneCap[i] != nil {
			c = min(c, zoneCap[i][g.Key])
		}
		total += c
	}
	ans := Answer{Copies: total, Why: "no node has room for another"}
	if q.Max > 0 && ans.Copies >= q.Max {
		return Answer{Copies: q.Max}
	}
	if q.Admit != nil {
		admits := func(k int) bool {
			need := charged.Clone()
			need.AddScaled(demand, int64(k))
			return q.Admit(need)
		}
		if !admits(ans.Copies) {
			// The largest count the queue takes: admission is monotone.
			lo, hi := 0, ans.Copies
			for lo < hi {
				mid := (lo + hi + 1) / 2
				if admits(mid) {
					lo = mid
				} else {
					hi = mid - 1
				}
			}
			ans = Answer{Copies: lo, Why: "the queue's allowance takes no more copies"}
		}
	}
	return ans
}

// placeAssumed places an in-flight workload whole on the request's nodes, by
// resources and node admission (its pods' other filters cannot be asked
// before they exist), and takes what it uses from their free room. It
// returns the workload's demand, and false when it does not fit.
func (m *Manager) placeAssumed(req planner.Request, nodes []planner.NodeState, byName map[string]int, workload []*v1.Pod) (resources.List, bool) {
	if len(workload) == 0 {
		return nil, false
	}
	groups := planner.GroupByShape(workload, m.demand())
	verdicts := make([]planner.Verdict, len(nodes))
	for i := range nodes {
		verdicts[i].Fits = planner.NodeAdmits(groups[0].Rep, nodes[i].Node)
	}
	room := func(i int) (resources.List, int64) {
		j, ok := byName[nodes[i].Node.Name]
		if !ok {
			return resources.List{}, 0
		}
		return req.Nodes[j].Free, req.Nodes[j].FreePods
	}
	shapes, requests := planner.Shapes(groups)
	plan, _ := planner.Place(planner.Request{Shapes: shapes, Nodes: planner.CandidateNodes(groups, nodes, verdicts, room, false, nil)})
	if plan == nil {
		return nil, false
	}
	for node, byShape := range plan.Slots {
		n := &req.Nodes[byName[node]]
		n.Free = n.Free.Clone()
		for shape, c := range byShape {
			n.Free.AddScaled(requests[shape], -int64(c))
			n.FreePods -= int64(c)
		}
	}
	return planner.Demand(groups), true
}

// withLimit returns a copy of limits with shape's limit set: the request's
// maps may be shared with the caller.
func withLimit(limits map[string]int, shape string, l int) map[string]int {
	out := maps.Clone(limits)
	out[shape] = l
	return out
}
