// Package topology maps nodes to their network domains, level by level.
//
// A Tree has an ordered list of levels, widest first (for example ib-cluster,
// leaf, host), and for every known node the name of its domain at each level.
// A domain is identified by its value alone: two nodes with the same value at
// a level are in the same domain of that level, whatever their wider domains
// are. The empty value means "no domain at this level" and is never shared.
//
// Trees are built either from node labels (FromLevels, the NetworkTopology
// API) or from Volcano HyperNode objects (FromHyperNodes). A Tree is immutable
// once built and safe for concurrent readers; every method also works on a nil
// *Tree, which behaves like a tree without levels or nodes.
package topology

import (
	"sort"

	v1 "k8s.io/api/core/v1"
)

// Level is one network level: a name (used in gang annotations) and the node
// label whose value is the node's domain at that level.
type Level struct{ Name, NodeLabel string }

// Tree maps nodes to their domain at each level, widest level first.
type Tree struct {
	levels []string
	// index maps a level name to its position; the first one wins when a
	// name repeats.
	index map[string]int
	// domains maps a node name to its domain value per level.
	domains map[string][]string
	// members holds, per level, the sorted node names of each domain value.
	members []map[string][]string
}

// newTree indexes domains (node -> value per level, aligned with levels).
// It takes ownership of both arguments.
func newTree(levels []string, domains map[string][]string) *Tree {
	t := &Tree{
		levels:  levels,
		index:   make(map[string]int, len(levels)),
		domains: domains,
		members: make([]map[string][]string, len(levels)),
	}
	for i, l := range levels {
		if _, dup := t.index[l]; !dup {
			t.index[l] = i
		}
		t.members[i] = map[string][]string{}
	}
	names := make([]string, 0, len(domains))
	for n := range domains {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for i, v := range domains[n] {
			if v != "" {
				t.members[i][v] = append(t.members[i][v], n)
			}
		}
	}
	return t
}

// FromLevels builds a tree from node labels: levels widest first (e.g.
// ib-cluster, leaf, host). A node without a level's label (or a level without
// a label key) has domain "" at that level. Nil nodes are skipped; when a node
// name repeats, its first occurrence counts. If a level name repeats, Nodes
// and Values look at its first occurrence.
func FromLevels(levels []Level, nodes []*v1.Node) *Tree {
	names := make([]string, len(levels))
	for i, l := range levels {
		names[i] = l.Name
	}
	domains := make(map[string][]string, len(nodes))
	for _, n := range nodes {
		if n == nil {
			continue
		}
		if _, seen := domains[n.Name]; seen {
			continue
		}
		d := make([]string, len(levels))
		for i, l := range levels {
			if l.NodeLabel != "" {
				d[i] = n.Labels[l.NodeLabel]
			}
		}
		domains[n.Name] = d
	}
	return newTree(names, domains)
}

// Levels returns the level names, widest first.
func (t *Tree) Levels() []string {
	if t == nil {
		return nil
	}
	return append([]string(nil), t.levels...)
}

// Domains returns the node's domain value per level (same order as Levels);
// nil for an unknown node. A known node's slice is never nil (it is empty when
// the tree has no levels).
func (t *Tree) Domains(node string) []string {
	if t == nil {
		return nil
	}
	d, ok := t.domains[node]
	if !ok {
		return nil
	}
	return append([]string{}, d...)
}

// Has reports whether the node is known to the tree.
func (t *Tree) Has(node string) bool {
	if t == nil {
		return false
	}
	_, ok := t.domains[node]
	return ok
}

// Nodes returns the node names in the domain `value` of level `level`
// (sorted). It returns nil for an unknown level, an unknown value, or the
// empty value (nodes without a domain at a level do not form a domain).
func (t *Tree) Nodes(level, value string) []string {
	if t == nil || value == "" {
		return nil
	}
	i, ok := t.index[level]
	if !ok {
		return nil
	}
	return append([]string(nil), t.members[i][value]...)
}

// Values returns the domain values of level `level` that hold at least one
// node (sorted); nil for an unknown level.
func (t *Tree) Values(level string) []string {
	if t == nil {
		return nil
	}
	i, ok := t.index[level]
	if !ok {
		return nil
	}
	out := make([]string, 0, len(t.members[i]))
	for v := range t.members[i] {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// Distance returns how far apart two nodes are, for scoring "close to the
// gang's other members" (smaller is closer). With L = len(Levels()):
//
//   - 0 when a == b (the same node, known or not);
//   - otherwise k, where the narrowest level at which both nodes have the same
//     non-empty domain is the k-th level counted from the narrowest (1 = the
//     narrowest level, L = the widest);
//   - L+1 when they share no domain at any level, or either node is unknown.
//
// For levels (ib-cluster, leaf, host): two different nodes under the same
// leaf are 2 apart (they differ at host, share leaf), under the same
// ib-cluster but different leaves 3, in different ib-clusters 4. For the
// HyperNode levels (tier-2, tier-1): same tier-1 HyperNode 1, same tier-2
// HyperNode only 2, nothing shared 3. Distinct nodes are never 0 apart.
func (t *Tree) Distance(a, b string) int {
	if a == b {
		return 0
	}
	if t == nil {
		return 1
	}
	l := len(t.levels)
	da, oka := t.domains[a]
	db, okb := t.domains[b]
	if !oka || !okb {
		return l + 1
	}
	for i := l - 1; i >= 0; i-- {
		if da[i] != "" && da[i] == db[i] {
			return l - i
		}
	}
	return l + 1
}
