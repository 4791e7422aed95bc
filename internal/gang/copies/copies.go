// Package copies counts, for a dry run, how many whole copies of a gang fit
// on a planner request: copy after copy placed by the planner, each taking
// its room, under the limits that count over all copies (NUMA zones,
// devices) and the queue's allowance. The manager builds the request as it
// builds a plan's; nothing here changes the cluster.
package copies

import (
	"math"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/gang/planner"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Count is one dry run's question on a built request.
type Count struct {
	// Req is one copy's request, its nodes sized by the room plans and
	// reservations of other gangs leave; Count takes what copies use from
	// it.
	Req    planner.Request
	Groups []planner.ShapeGroup
	// Nodes are the view the request was built from (in-flight workloads
	// are placed on them).
	Nodes []planner.NodeState
	// Across limits members per node over all copies (nil: only Req's own
	// limits, which cap one copy).
	Across planner.Limiter
	Demand planner.DemandFunc
	// Assumed are workloads already sent whose pods the scheduler has not
	// seen: each is placed whole first; those in Namespace are charged to
	// the queue too.
	Assumed   [][]*v1.Pod
	Namespace string
	// Admit, when set, says whether the queue takes copies asking need in
	// all; counting stops at the first copy it refuses.
	Admit func(need resources.List) bool
	// Max stops counting there (0: no limit).
	Max int
	// Describe says why the next copy does not fit, from the planner's
	// diagnosis.
	Describe func(diag *planner.Diagnosis, req planner.Request) string
}

// Why the count stops, other than the planner's diagnosis.
const (
	WhyAllowance = "the queue's allowance takes no more copies"
	WhyNoRoom    = "no node has room for another"
)

// Run counts the copies that fit and says why the next does not (empty
// when Max was reached).
func (c Count) Run() (int, string) {
	req, groups := c.Req, c.Groups
	lim := newLimits(req, groups, c.Across)
	demand := planner.Demand(groups)
	_, shapes := planner.Shapes(groups)
	total := resources.List{}
	for _, w := range c.Assumed {
		if need, ok := placeAssumed(req, c.Nodes, lim.byName, w, c.Demand); ok && w[0].Namespace == c.Namespace {
			total.Add(need)
		}
	}
	if planner.Members(groups) == 1 {
		return c.single(groups[0], lim.zoneCap, total, demand)
	}
	planner.WithMemo(req.Nodes)
	copies := 0
	for c.Max == 0 || copies < c.Max {
		if c.Admit != nil {
			next := total.Clone()
			next.Add(demand)
			if !c.Admit(next) {
				return copies, WhyAllowance
			}
		}
		plan, diag := planner.Place(req)
		if plan == nil {
			return copies, c.Describe(diag, req)
		}
		copies++
		total.Add(demand)
		lim.take(req, plan, shapes)
	}
	return copies, ""
}

// limits are a dry run's per-node member limits: one copy's own (perCopy)
// and, under limiters that count over all copies (NUMA zones, devices),
// what is left for further copies (zoneCap; nil without them).
type limits struct {
	perCopy, zoneCap []map[string]int
	byName           map[string]int
}

// newLimits records the request's limits and lowers each to what the
// limiters across copies allow.
func newLimits(req planner.Request, groups []planner.ShapeGroup, across planner.Limiter) limits {
	lim := limits{
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
					n.SetLimit(g.Key, zc[g.Key])
				}
			}
		}
	}
	return lim
}

// take removes a placed copy from the request's nodes: their free room, and
// what the limiters across copies leave.
func (lim limits) take(req planner.Request, plan *planner.Plan, shapes map[string]resources.List) {
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
					n.SetLimit(shape, l)
				}
			}
		}
	}
}

// single counts copies of a one-member gang: each node's room, summed (the
// planner would place them one by one, node after node, to the same count).
// Karmada asks this for every single-template workload, and a cluster takes
// tens of thousands of small pods.
func (c Count) single(g planner.ShapeGroup, zoneCap []map[string]int, charged, demand resources.List) (int, string) {
	total := 0
	for i := range c.Req.Nodes {
		n := &c.Req.Nodes[i]
		if l, ok := n.Limit[g.Key]; !ok || l <= 0 || n.FreePods <= 0 {
			continue
		}
		k := int(n.Free.Copies(g.Request, n.FreePods))
		if zoneCap[i] != nil {
			k = min(k, zoneCap[i][g.Key])
		}
		total += k
	}
	if c.Max > 0 && total >= c.Max {
		return c.Max, ""
	}
	if c.Admit != nil {
		admits := func(k int) bool {
			need := charged.Clone()
			need.AddScaled(demand, int64(k))
			return c.Admit(need)
		}
		if !admits(total) {
			// The largest count the queue takes: admission is monotone.
			lo, hi := 0, total
			for lo < hi {
				mid := (lo + hi + 1) / 2
				if admits(mid) {
					lo = mid
				} else {
					hi = mid - 1
				}
			}
			return lo, WhyAllowance
		}
	}
	return total, WhyNoRoom
}

// placeAssumed places an in-flight workload whole on the request's nodes, by
// resources and node admission (its pods' other filters cannot be asked
// before they exist), and takes what it uses from their free room. It
// returns the workload's demand, and false when it does not fit.
func placeAssumed(req planner.Request, nodes []planner.NodeState, byName map[string]int, workload []*v1.Pod, demand planner.DemandFunc) (resources.List, bool) {
	if len(workload) == 0 {
		return nil, false
	}
	groups := planner.GroupByShape(workload, demand)
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
