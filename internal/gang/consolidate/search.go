package consolidate

import (
	"sort"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
	"github.com/phalanx-sched/phalanx/internal/gang/preempt"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Choice is one proven move: the gangs to evict, where each goes, and the
// waiting gang's plan.
type Choice struct {
	Domain  string
	Victims []preempt.Victim
	Moves   []Move
	Plan    *planner.Plan
	Cost    float64
	Pods    int
}

// Move is where a moved gang was proven to fit.
type Move struct {
	Ref      ident.Ref
	Priority int32
	Plan     *planner.Plan
	Shapes   map[string]resources.List
}

// Cheapest tries, for each domain of the required level, the cheapest
// candidates in it whose eviction lets the waiting gang fit (planFor, on the
// room they free; dropping those it then does not need, the costliest
// first), and keeps the cheapest set whose gangs all fit elsewhere
// (relocate). nil: no domain can be freed.
func Cheapest(cands []Candidate, planFor func([]preempt.Victim) *planner.Plan,
	relocate func(moved []Candidate, victims []preempt.Victim, plan *planner.Plan) ([]Move, bool)) *Choice {
	byDomain := map[string][]Candidate{}
	var domains []string
	for _, c := range cands {
		for _, d := range c.Domains {
			if byDomain[d] == nil {
				domains = append(domains, d)
			}
			byDomain[d] = append(byDomain[d], c)
		}
	}
	sort.Strings(domains)
	tries := 0
	fits := func(vs []preempt.Victim) bool {
		tries++
		return tries <= maxTries && planFor(vs) != nil
	}
	var best *Choice
	for _, d := range domains {
		chosen := fewest(byDomain[d], fits)
		if chosen == nil {
			continue
		}
		cost, pods := 0.0, 0
		for _, c := range chosen {
			cost += c.Cost
			pods += c.Members
		}
		if best != nil && (cost > best.Cost || (cost == best.Cost && pods >= best.Pods)) {
			continue
		}
		victims := victimsOf(chosen)
		plan := planFor(victims)
		if plan == nil {
			continue
		}
		moves, ok := relocate(chosen, victims, plan)
		if !ok {
			continue
		}
		best = &Choice{Domain: d, Victims: victims, Moves: moves, Plan: plan, Cost: cost, Pods: pods}
	}
	return best
}

// fewest takes a domain's candidates, cheapest first, until the gang fits,
// then drops those it does not need, the costliest first (nil: it never
// fits).
func fewest(inDomain []Candidate, fits func([]preempt.Victim) bool) []Candidate {
	var chosen []Candidate
	ok := false
	for _, c := range inDomain {
		chosen = append(chosen, c)
		if fits(victimsOf(chosen)) {
			ok = true
			break
		}
	}
	if !ok {
		return nil
	}
	for i := len(chosen) - 1; i >= 0 && len(chosen) > 1; i-- {
		without := append(append([]Candidate(nil), chosen[:i]...), chosen[i+1:]...)
		if fits(victimsOf(without)) {
			chosen = without
		}
	}
	return chosen
}

func victimsOf(cs []Candidate) []preempt.Victim {
	out := make([]preempt.Victim, len(cs))
	for i, c := range cs {
		out[i] = c.Victim
	}
	return out
}

// Relocation is what proving moved gangs' new places reads: the waiting
// gang's view of the nodes and what its plan takes, and the cluster's holds.
type Relocation struct {
	Nodes []planner.NodeState
	// Requests are the waiting gang's shapes' requests (its plan's slots).
	Requests map[string]resources.List
	Demand   planner.DemandFunc
	Limiter  planner.Limiter
	Tree     planner.Topology
	// Held is what other gangs hold on a node against a moved gang of
	// priority.
	Held func(node string, priority int32) (resources.List, int64)
	// Required is a moved gang's required level, read from its spec and its
	// first member (false: the gang is gone).
	Required func(ref ident.Ref, rep *v1.Pod) (string, bool)
}

// Relocate proves that every moved gang fits, whole, on the room left once
// they are gone and the waiting gang holds its plan: largest first, each
// inside one domain of its own required level, each taking its room from
// the next. It returns where each goes.
func (r Relocation) Relocate(moved []Candidate, victims []preempt.Victim, plan *planner.Plan) ([]Move, bool) {
	n := len(r.Nodes)
	freed := preempt.Freed(victims)
	room, pods := make([]resources.List, n), make([]int64, n)
	for i, ns := range r.Nodes {
		name := ns.Node.Name
		room[i], pods[i] = ns.Free.Clone(), ns.FreePods
		if f, ok := freed[name]; ok {
			room[i].Add(f.Request)
			pods[i] += f.Pods
		}
		for shape, k := range plan.Slots[name] {
			room[i].AddScaled(r.Requests[shape], -int64(k))
			pods[i] -= int64(k)
		}
	}
	order := append([]Candidate(nil), moved...)
	sort.SliceStable(order, func(i, j int) bool { return order[i].Members > order[j].Members })
	moves := make([]Move, 0, len(order))
	for _, c := range order {
		groups := planner.GroupByShape(c.Pods, r.Demand)
		verdicts := make([]planner.Verdict, n)
		for i, ns := range r.Nodes {
			verdicts[i] = planner.Verdict{Fits: planner.NodeAdmits(groups[0].Rep, ns.Node)}
		}
		capacity := func(i int) (resources.List, int64) {
			held, heldPods := r.Held(r.Nodes[i].Node.Name, c.Priority)
			free := room[i].Clone()
			free.Sub(held)
			return free, pods[i] - heldPods
		}
		shapes, reqs := planner.Shapes(groups)
		req := planner.Request{Shapes: shapes, Nodes: planner.CandidateNodes(groups, r.Nodes, verdicts, capacity, false, r.Limiter)}
		required, ok := r.Required(c.Ref, groups[0].Rep)
		if !ok {
			return nil, false
		}
		req.Constrain(r.Tree, required, "", nil)
		p, _ := planner.Place(req)
		if p == nil {
			return nil, false
		}
		for i, ns := range r.Nodes {
			for shape, k := range p.Slots[ns.Node.Name] {
				room[i].AddScaled(reqs[shape], -int64(k))
				pods[i] -= int64(k)
			}
		}
		moves = append(moves, Move{Ref: c.Ref, Priority: c.Priority, Plan: p, Shapes: reqs})
	}
	return moves, true
}
