// Package planner places a gang's members on a snapshot of the nodes: the
// candidate nodes and their room, every member of each shape placed whole
// (inside one topology domain, sub-groups each inside one of their own), or
// why no placement exists. It is a pure function of its request.
package planner

import (
	"maps"
	"reflect"
	"slices"
	"sort"

	"github.com/phalanx-sched/phalanx/internal/gang/fragment"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Shape is a class of interchangeable members: same requests, same constraints.
type Shape struct {
	Key     string
	Request resources.List
	// Count is how many members of this shape must be placed.
	Count int
}

// Node is a candidate node as the planner sees it.
type Node struct {
	Name string
	// Free is allocatable minus requested minus capacity held by other gangs.
	Free     resources.List
	FreePods int64
	// Limit caps members per shape on this node, after every filter and
	// plugin refinement (NUMA zones, anti-affinity). Missing means ineligible.
	Limit map[string]int
	// Domains holds the node's value at each topology level, widest first;
	// "" where the node lacks the level's label.
	Domains []string
	// Busy breaks ties between equally good nodes: the one with less busy
	// goes first (a reservation prefers nodes that free up soonest).
	Busy int64

	// memo, when a caller sets it (WithMemo), keeps the node's member
	// counts per shape while Free, FreePods and Limit stay the same maps
	// and value: a dry run places copy after copy on the same nodes, most
	// of them untouched between copies. Whoever changes a node's room
	// assigns new maps (Clone).
	memo *copiesMemo
}

// SetLimit caps the node at l members of shape, on a copy of its limits:
// requests' maps may be shared, and a memo (WithMemo) sees a new map.
func (n *Node) SetLimit(shape string, l int) {
	n.Limit = maps.Clone(n.Limit)
	n.Limit[shape] = l
}

// WithMemo makes fill remember the nodes' member counts across calls.
func WithMemo(nodes []Node) {
	for i := range nodes {
		nodes[i].memo = &copiesMemo{}
	}
}

type copiesMemo struct {
	free, limit uintptr
	freePods    int64
	// copies per shape key: a gang has a few shapes, so a short list
	// compares keys faster than a map hashes them.
	copies []shapeCopies
}

type shapeCopies struct {
	key    string
	copies int
}

// cachedCopies is nodeCopies on the node's own room, remembered per shape
// when the node has a memo.
func cachedCopies(n *Node, s Shape) int {
	m := n.memo
	if m == nil {
		return nodeCopies(n, s, n.Free, n.FreePods)
	}
	free, limit := reflect.ValueOf(n.Free).Pointer(), reflect.ValueOf(n.Limit).Pointer()
	if m.free != free || m.limit != limit || m.freePods != n.FreePods {
		m.free, m.limit, m.freePods, m.copies = free, limit, n.FreePods, m.copies[:0]
	}
	for _, sc := range m.copies {
		if sc.key == s.Key {
			return sc.copies
		}
	}
	c := nodeCopies(n, s, n.Free, n.FreePods)
	m.copies = append(m.copies, shapeCopies{s.Key, c})
	return c
}

// Domain names one topology domain: a level and the label value.
type Domain struct {
	Level string
	Value string
}

// Request asks for a placement of every shape's Count.
type Request struct {
	Shapes []Shape
	Nodes  []Node
	// Levels are topology level names, widest first, aligned with Node.Domains.
	Levels []string
	// Required names a level: every member inside one domain of it, or nothing.
	Required string
	// Preferred names a level: the narrowest single domain from this level up
	// that fits; otherwise as few domains of the widest level as possible.
	Preferred string
	// Workload, when set, breaks ties between equally tight nodes: the one
	// whose GPUs the placement fragments least for these shapes
	// (FragmentationDelta).
	Workload []fragment.WorkloadShape
	// SubGroups, when set, split Shapes into sub-groups, each placed whole
	// inside one domain of SubLevel (required, or SubPreferred), all of
	// them inside the gang's domain (Required / Preferred).
	SubGroups    []SubGroup
	SubLevel     string
	SubPreferred bool
}

// Plan is a placement: node -> shape key -> members.
type Plan struct {
	Slots map[string]map[string]int
	// Domains are the topology domains the plan uses (none when unconstrained).
	Domains []Domain
}

// Members is the number of planned members.
func (p *Plan) Members() int {
	n := 0
	for _, byShape := range p.Slots {
		for _, c := range byShape {
			n += c
		}
	}
	return n
}

// DomainResult says how much of the gang one domain could take.
type DomainResult struct {
	Domain   Domain
	Placed   int
	Capacity int
}

// Diagnosis explains a failed plan.
type Diagnosis struct {
	Needed int
	// Placed is the most members any single candidate placement could take.
	Placed int
	// Best is the candidate that came closest; empty Level means the cluster.
	Best Domain
	// Tried lists the domains evaluated, closest first.
	Tried []DomainResult
	// UnknownLevel is set when the constraint names a level that does not exist.
	UnknownLevel string
	// SubGroups is set for a gang of sub-groups: how many of them the
	// closest domain took whole.
	SubGroups *SubGroupDiagnosis
}

// Place finds a placement for every member in req, or explains why none exists.
// It is deterministic: equal inputs give equal plans.
func Place(req Request) (*Plan, *Diagnosis) {
	needed := 0
	for _, s := range req.Shapes {
		needed += s.Count
	}
	diag := &Diagnosis{Needed: needed}
	if needed == 0 {
		return &Plan{Slots: map[string]map[string]int{}}, nil
	}
	if len(req.SubGroups) > 0 {
		diag.SubGroups = &SubGroupDiagnosis{Level: req.SubLevel, Need: len(req.SubGroups), Size: req.SubGroups[0].members()}
		if !req.SubPreferred && !slices.Contains(req.Levels, req.SubLevel) {
			diag.UnknownLevel = req.SubLevel
			return nil, diag
		}
	}

	level := req.Required
	if level == "" {
		level = req.Preferred
	}
	if level == "" {
		return placeWhole(req, diag)
	}
	li := slices.Index(req.Levels, level)
	if li < 0 {
		diag.UnknownLevel = level
		if req.Required != "" {
			return nil, diag
		}
		return placeWhole(req, diag)
	}
	if req.Required != "" {
		if plan := placeInOneDomain(req, li, diag); plan != nil {
			return plan, nil
		}
		return nil, diag
	}
	// Preferred: one domain of the named level, then of each wider level.
	for l := li; l >= 0; l-- {
		if plan := placeInOneDomain(req, l, diag); plan != nil {
			return plan, nil
		}
	}
	return placeAcrossDomains(req, diag)
}

func placeWhole(req Request, diag *Diagnosis) (*Plan, *Diagnosis) {
	slots, placed := req.fillIn(req.Nodes, diag, Domain{})
	if placed == diag.Needed {
		return &Plan{Slots: slots}, nil
	}
	diag.Placed = placed
	return nil, diag
}

// placeInOneDomain tries every domain of level li and keeps the tightest one
// that fits: big domains stay whole for big gangs.
func placeInOneDomain(req Request, li int, diag *Diagnosis) *Plan {
	groups := groupByDomain(req.Nodes, li)
	capacity := make([]int, len(groups))
	for i, g := range groups {
		capacity[i] = isolatedCapacity(req.Shapes, g.nodes)
	}
	// Tightest first (then by value): the first domain that takes the gang
	// is the plan, and the rest need not be filled. A domain that cannot
	// hold the first shape's members on its own is only filled when none
	// fits, for the diagnosis.
	order := make([]int, len(groups))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool {
		ga, gb := order[a], order[b]
		if capacity[ga] != capacity[gb] {
			return capacity[ga] < capacity[gb]
		}
		return groups[ga].value < groups[gb].value
	})
	firstCount := 0
	if len(req.Shapes) > 0 {
		firstCount = req.Shapes[0].Count
	}
	tried := make([]DomainResult, 0, len(groups))
	var skipped []int
	for _, gi := range order {
		g := groups[gi]
		if capacity[gi] < firstCount {
			skipped = append(skipped, gi)
			continue
		}
		d := Domain{Level: req.Levels[li], Value: g.value}
		slots, placed := req.fillIn(g.nodes, diag, d)
		if placed >= diag.Needed {
			return &Plan{Slots: slots, Domains: []Domain{d}}
		}
		tried = append(tried, DomainResult{Domain: d, Placed: placed, Capacity: capacity[gi]})
	}
	for _, gi := range skipped {
		_, placed := req.fillIn(groups[gi].nodes, diag, Domain{Level: req.Levels[li], Value: groups[gi].value})
		tried = append(tried, DomainResult{Domain: Domain{Level: req.Levels[li], Value: groups[gi].value}, Placed: placed, Capacity: capacity[gi]})
	}
	sort.SliceStable(tried, func(i, j int) bool {
		if tried[i].Placed != tried[j].Placed {
			return tried[i].Placed > tried[j].Placed
		}
		return tried[i].Domain.Value < tried[j].Domain.Value
	})
	diag.Tried = append(diag.Tried, tried...)
	if len(tried) > 0 && tried[0].Placed >= diag.Placed {
		diag.Placed = tried[0].Placed
		diag.Best = tried[0].Domain
	}
	return nil
}

// placeAcrossDomains spans as few domains of the widest level as possible:
// while no single unused domain takes the rest, it fills the largest one; then
// the rest goes to the smallest domain that takes it all (big domains stay
// whole, most members share one domain).
func placeAcrossDomains(req Request, diag *Diagnosis) (*Plan, *Diagnosis) {
	if len(req.Levels) == 0 || len(req.SubGroups) > 0 {
		// Sub-groups keep their own domains wherever they go.
		return placeWhole(req, diag)
	}
	groups := groupByDomain(req.Nodes, 0)
	capacity := make(map[string]int, len(groups))
	for _, g := range groups {
		capacity[g.value] = isolatedCapacity(req.Shapes, g.nodes)
	}
	// Largest first; equal capacities by name.
	sort.SliceStable(groups, func(i, j int) bool {
		if capacity[groups[i].value] != capacity[groups[j].value] {
			return capacity[groups[i].value] > capacity[groups[j].value]
		}
		return groups[i].value < groups[j].value
	})
	remaining := append([]Shape(nil), req.Shapes...)
	left := diag.Needed
	slots := map[string]map[string]int{}
	var used []Domain
	take := func(g domainGroup) {
		s, _ := fill(remaining, g.nodes, req.Workload)
		for node, byShape := range s {
			slots[node] = byShape
			for i := range remaining {
				remaining[i].Count -= byShape[remaining[i].Key]
				left -= byShape[remaining[i].Key]
			}
		}
		used = append(used, Domain{Level: req.Levels[0], Value: g.value})
	}
	for len(groups) > 0 && left > 0 {
		// The smallest domain that takes all that is left, if any.
		best := -1
		for i := len(groups) - 1; i >= 0; i-- {
			if _, placed := fill(remaining, groups[i].nodes, req.Workload); placed == left {
				best = i
				break
			}
		}
		if best < 0 {
			best = 0
		}
		take(groups[best])
		groups = append(groups[:best], groups[best+1:]...)
	}
	if left == 0 {
		return &Plan{Slots: slots, Domains: used}, nil
	}
	// Nodes without the widest level's label still count across the cluster.
	if s, placed := fill(req.Shapes, req.Nodes, req.Workload); placed == diag.Needed {
		return &Plan{Slots: s}, nil
	} else if placed > diag.Placed {
		diag.Placed, diag.Best = placed, Domain{}
	}
	return nil, diag
}

type domainGroup struct {
	value string
	nodes []Node
}

func groupByDomain(nodes []Node, li int) []domainGroup {
	idx := map[string]int{}
	var groups []domainGroup
	for _, n := range nodes {
		if li >= len(n.Domains) || n.Domains[li] == "" {
			continue
		}
		v := n.Domains[li]
		i, ok := idx[v]
		if !ok {
			i = len(groups)
			idx[v] = i
			groups = append(groups, domainGroup{value: v})
		}
		groups[i].nodes = append(groups[i].nodes, n)
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].value < groups[j].value })
	return groups
}

// isolatedCapacity counts how many members of the first shape the nodes could
// take if nothing else were placed: the size measure used to pick tight domains.
func isolatedCapacity(shapes []Shape, nodes []Node) int {
	if len(shapes) == 0 {
		return 0
	}
	s := shapes[0]
	total := 0
	for i := range nodes {
		total += cachedCopies(&nodes[i], s)
	}
	return total
}

func nodeCopies(n *Node, s Shape, free resources.List, freePods int64) int {
	limit, ok := n.Limit[s.Key]
	if !ok || limit <= 0 || freePods <= 0 {
		return 0
	}
	c := free.Copies(s.Request, int64(limit))
	if c > freePods {
		c = freePods
	}
	return int(c)
}
