package planner

import (
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Verdict is the scheduler's filters' answer for a gang's representative
// member on one node.
type Verdict struct {
	Fits bool
	// ResourceOnly: the member does not fit for lack of free capacity only
	// (resource fit, NUMA zones, held capacity), so it would fit if pods left.
	ResourceOnly bool
	// Plugin and Reasons name the filter that rejected the node.
	Plugin  string
	Reasons []string
}

// NodeState is a node as the scheduler's snapshot shows it.
type NodeState struct {
	Node *v1.Node
	// Free is allocatable minus what the scheduler has assumed on the node.
	Free     resources.List
	FreePods int64
}

// ShapeGroup is a set of interchangeable pending members to place.
type ShapeGroup struct {
	Key     string
	Rep     *v1.Pod
	Request resources.List
	Count   int
	// Members are the group's pods, Rep first.
	Members []*v1.Pod
}

// DemandFunc is a pod's request as plans and queues count it (its DRA
// devices included); nil means its containers' requests.
type DemandFunc func(*v1.Pod) resources.List

func (f DemandFunc) of(pod *v1.Pod) resources.List {
	if f == nil {
		return resources.PodRequests(pod)
	}
	return f(pod)
}

// GroupPending picks the members a plan places — the pod in the scheduling
// cycle first, then the oldest pending members — up to needed, grouped by
// shape with the cycle pod's shape first. Queue admission charges exactly
// these members, so it admits what the planner places.
func GroupPending(pod *v1.Pod, pending []*v1.Pod, needed int, demand DemandFunc) []ShapeGroup {
	others := make([]*v1.Pod, 0, len(pending))
	for _, m := range pending {
		if m.UID != pod.UID {
			others = append(others, m)
		}
	}
	sort.Slice(others, func(i, j int) bool {
		ti, tj := others[i].CreationTimestamp, others[j].CreationTimestamp
		if !ti.Equal(&tj) {
			return ti.Before(&tj)
		}
		return others[i].Name < others[j].Name
	})
	if needed < 1 {
		needed = 1
	}
	members := append([]*v1.Pod{pod}, others[:min(len(others), needed-1)]...)
	return GroupByShape(members, demand)
}

// GroupByShape groups members by shape, the first member's shape first.
func GroupByShape(members []*v1.Pod, demand DemandFunc) []ShapeGroup {
	return GroupByKey(members, demand, ShapeKey)
}

// GroupByKey groups members by key (a shape, or a member shape within a
// gang of sub-groups), the first member's key first.
func GroupByKey(members []*v1.Pod, demand DemandFunc, key func(*v1.Pod) string) []ShapeGroup {
	var groups []ShapeGroup
	index := map[string]int{}
	for _, m := range members {
		k := key(m)
		gi, ok := index[k]
		if !ok {
			gi = len(groups)
			index[k] = gi
			groups = append(groups, ShapeGroup{Key: k, Rep: m, Request: demand.of(m)})
		}
		groups[gi].Count++
		groups[gi].Members = append(groups[gi].Members, m)
	}
	return groups
}

// Members is the number of members in groups.
func Members(groups []ShapeGroup) int {
	n := 0
	for _, g := range groups {
		n += g.Count
	}
	return n
}

// Demand is what the groups ask for in total.
func Demand(groups []ShapeGroup) resources.List {
	out := resources.List{}
	for _, g := range groups {
		out.AddScaled(g.Request, int64(g.Count))
	}
	return out
}

// Shapes returns the planner's shapes and each shape's request.
func Shapes(groups []ShapeGroup) ([]Shape, map[string]resources.List) {
	shapes := make([]Shape, len(groups))
	requests := make(map[string]resources.List, len(groups))
	for i, g := range groups {
		shapes[i] = Shape{Key: g.Key, Request: g.Request, Count: g.Count}
		requests[g.Key] = g.Request
	}
	return shapes, requests
}

// Limiter caps how many copies of a pod fit a node beyond resource arithmetic
// (NUMA zones); max is the cap so far.
type Limiter interface {
	Limit(pod *v1.Pod, node string, max int) int
}

// Limiters applies each limiter in turn (nil ones are skipped).
type Limiters []Limiter

// Limit is the tightest limit of all.
func (ls Limiters) Limit(pod *v1.Pod, node string, max int) int {
	for _, l := range ls {
		if l != nil && max > 0 {
			max = l.Limit(pod, node, max)
		}
	}
	return max
}

// Capacity gives node i's room for the plan: free capacity and pod slots.
type Capacity func(i int) (resources.List, int64)

// CandidateNodes turns the snapshot and the verdicts into the planner's nodes.
// A node is eligible for the cycle's shape when its verdict fits (or, with
// relaxed, fails for capacity only); for other shapes the planner checks node
// selectors, affinity and taints itself. room gives each node's capacity.
func CandidateNodes(groups []ShapeGroup, nodes []NodeState, verdicts []Verdict, room Capacity, relaxed bool, limiter Limiter) []Node {
	needed := Members(groups)
	out := make([]Node, len(nodes))
	onePerNode := make([]bool, len(groups))
	// Members of different sub-groups differ only in their sub-group: the
	// first group of each shape is checked, the others take its limit (the
	// cycle pod's filter verdict, for its own shape's sub-groups).
	first := make([]int, len(groups))
	seen := map[string]int{}
	for gi, g := range groups {
		onePerNode[gi] = OnePerNode(g.Rep)
		base := g.Key
		if i := strings.Index(base, subGroupSep); i >= 0 {
			base = base[:i]
		}
		if j, ok := seen[base]; ok {
			first[gi] = j
		} else {
			seen[base], first[gi] = gi, gi
		}
	}
	for i, ns := range nodes {
		free, pods := room(i)
		c := Node{Name: ns.Node.Name, Free: free, FreePods: pods, Limit: make(map[string]int, len(groups))}
		v := verdicts[i]
		for gi, g := range groups {
			if j := first[gi]; j != gi {
				if l, ok := c.Limit[groups[j].Key]; ok {
					c.Limit[g.Key] = l
				}
				continue
			}
			admits := NodeAdmits(g.Rep, ns.Node)
			if first[gi] == first[0] {
				admits = v.Fits || (relaxed && v.ResourceOnly)
			}
			if !admits {
				continue
			}
			l := limitFor(onePerNode[gi], needed)
			if limiter != nil {
				// Arithmetic first: limiters (NUMA zones, device
				// allocation) need not look past what fits anyway.
				l = int(min(free.Copies(g.Request, int64(l)), pods))
				l = limiter.Limit(g.Rep, c.Name, l)
			}
			c.Limit[g.Key] = l
		}
		out[i] = c
	}
	return out
}

func limitFor(onePerNode bool, needed int) int {
	if onePerNode {
		return 1
	}
	return needed
}

// Topology is the network topology as the planner needs it.
type Topology interface {
	// Levels are level names, widest first.
	Levels() []string
	// Domains returns the node's value at each level ("" where unlabelled).
	Domains(node string) []string
}

// Constrain applies a gang's topology constraint to the request: levels and
// each node's domains, the required or preferred level, and — for a required
// level — the domain of members already placed, which later members join.
// t may be nil (no topology defined): a required level is then reported by
// the planner as unknown.
func (r *Request) Constrain(t Topology, required, preferred string, placedNodes []string) {
	r.Required, r.Preferred = required, preferred
	if t == nil {
		return
	}
	r.Levels = t.Levels()
	for i := range r.Nodes {
		r.Nodes[i].Domains = t.Domains(r.Nodes[i].Name)
	}
	domain, li := PlacedDomain(t, required, placedNodes)
	if domain == "" {
		return
	}
	kept := r.Nodes[:0]
	for _, n := range r.Nodes {
		if li < len(n.Domains) && n.Domains[li] == domain {
			kept = append(kept, n)
		}
	}
	r.Nodes = kept
}

// PlacedDomain is the domain at the required level of a gang's placed
// members, so that later members (scale-out, replacements, a replan after a
// restart) join them; "" when there is none.
func PlacedDomain(t Topology, required string, placedNodes []string) (string, int) {
	if t == nil || required == "" || len(placedNodes) == 0 {
		return "", -1
	}
	levels := t.Levels()
	li := -1
	for i, l := range levels {
		if l == required {
			li = i
		}
	}
	if li < 0 {
		return "", -1
	}
	// The first placed node in name order decides, whatever order the
	// nodes come in.
	first, domain := "", ""
	for _, n := range placedNodes {
		if d := t.Domains(n); li < len(d) && d[li] != "" && (first == "" || n < first) {
			first, domain = n, d[li]
		}
	}
	if first == "" {
		return "", -1
	}
	return domain, li
}

// DescribeConstraint renders a constraint for messages.
func DescribeConstraint(required, preferred string) string {
	switch {
	case required != "":
		return "required " + required
	case preferred != "":
		return "preferred " + preferred
	}
	return ""
}
