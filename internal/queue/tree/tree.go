// Package tree is the queue model of phalanx: a validated hierarchy of
// weighted queues, deserved shares by hierarchical water-filling (decayed by
// recent usage when asked), usage aggregation, gang admission against
// capabilities and guarantees, fair-share ordering and the choice of whole
// gangs to reclaim.
//
// Everything here is pure logic over resources.List values (CPU in
// millicores) with no state over time; package queue keeps the accounting
// that feeds it and adapts Queue objects and pods to it.
package tree

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Queue is one queue as the model sees it.
type Queue struct {
	Name, Parent string // Parent "" = top level
	// Weight is the queue's weight among its siblings. 0 means unset and is
	// read as 1; a negative weight is invalid.
	Weight int32
	// Guarantee is kept for the queue even when it does not use it; Capability
	// is a hard maximum. Resources not listed in Capability are unbounded.
	Guarantee, Capability resources.List
	Reclaimable           bool
	Open                  bool // State Open
}

// QueueError reports why a queue was left out of the tree.
type QueueError struct{ Queue, Reason string }

func (e QueueError) Error() string {
	if e.Queue == "" {
		return "queue with empty name: " + e.Reason
	}
	return fmt.Sprintf("queue %q: %s", e.Queue, e.Reason)
}

type node struct {
	q        Queue
	children []string // sorted
}

// Tree is a validated queue hierarchy. Leaves take pods; inner queues only
// aggregate. A Tree is immutable after Build and safe for concurrent reads.
type Tree struct {
	nodes map[string]*node
	roots []string // sorted
	names []string // all queues, sorted
}

// Build validates and links queues. Every queue that is left out gets at least
// one QueueError naming it: a duplicated or empty name, a negative weight or
// amount, a guarantee above its own capability or above an ancestor's
// capability, a missing parent, a parent cycle, or an invalid ancestor (a
// queue under an invalid queue is left out with it). Errors are sorted by
// queue name; the result does not depend on the input order. Build never
// panics and always returns a non-nil Tree.
func Build(queues []Queue) (*Tree, []QueueError) {
	b := &treeBuilder{status: map[string]resolution{}}
	names, defs := b.collect(queues)
	b.checkOwn(names, defs)
	b.onCycle = findCycles(names, b.norm, b.bad)
	t := b.link(names)
	sort.SliceStable(b.errs, func(i, j int) bool { return b.errs[i].Queue < b.errs[j].Queue })
	return t, b.errs
}

// treeBuilder is Build's state: the queues by name and what is wrong with
// them, in the order it is found.
type treeBuilder struct {
	errs  []QueueError
	count map[string]int
	norm  map[string]Queue
	// bad holds queues rejected on their own (duplicate or bad spec); their
	// parent link is not followed.
	bad     map[string]bool
	onCycle map[string]bool
	status  map[string]resolution
}

// resolution is Build's verdict on a queue, as resolve finds it.
type resolution int

const (
	unresolved resolution = iota
	resolvedValid
	resolvedInvalid
)

// collect counts the queues by name and returns the names, sorted, with a
// definition of each.
func (b *treeBuilder) collect(queues []Queue) ([]string, map[string]Queue) {
	b.count = map[string]int{}
	defs := map[string]Queue{}
	emptyNames := 0
	for _, q := range queues {
		if q.Name == "" {
			emptyNames++
			continue
		}
		b.count[q.Name]++
		defs[q.Name] = q
	}
	if emptyNames > 0 {
		b.errs = append(b.errs, QueueError{Reason: "a queue needs a name"})
	}
	names := make([]string, 0, len(b.count))
	for n := range b.count {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, defs
}

// checkOwn normalises each queue and rejects those wrong on their own.
func (b *treeBuilder) checkOwn(names []string, defs map[string]Queue) {
	b.bad, b.norm = map[string]bool{}, map[string]Queue{}
	for _, n := range names {
		if b.count[n] > 1 {
			b.errs = append(b.errs, QueueError{n, fmt.Sprintf("defined %d times; every definition is left out", b.count[n])})
			b.bad[n] = true
			continue
		}
		q := normalize(defs[n])
		own := ownProblems(q)
		for _, p := range own {
			b.errs = append(b.errs, QueueError{n, p})
		}
		if len(own) > 0 {
			b.bad[n] = true
		}
		b.norm[n] = q
	}
}

// resolve reports whether queue n and all its ancestors are valid, noting
// why not the first time it is asked.
func (b *treeBuilder) resolve(n string) bool {
	switch b.status[n] {
	case resolvedValid:
		return true
	case resolvedInvalid:
		return false
	}
	b.status[n] = resolvedInvalid
	if b.bad[n] {
		return false
	}
	q := b.norm[n]
	switch {
	case b.onCycle[n]:
		b.errs = append(b.errs, QueueError{n, "parent chain forms a cycle: " + cyclePath(n, b.norm)})
		return false
	case q.Parent == "":
	case b.count[q.Parent] == 0:
		b.errs = append(b.errs, QueueError{n, fmt.Sprintf("parent %q does not exist", q.Parent)})
		return false
	case !b.resolve(q.Parent):
		b.errs = append(b.errs, QueueError{n, fmt.Sprintf("parent %q is invalid, so this queue is left out too", q.Parent)})
		return false
	default:
		if p := guaranteeAboveAncestors(q, b.norm); len(p) > 0 {
			for _, s := range p {
				b.errs = append(b.errs, QueueError{n, s})
			}
			return false
		}
	}
	b.status[n] = resolvedValid
	return true
}

// link builds the tree of the valid queues.
func (b *treeBuilder) link(names []string) *Tree {
	t := &Tree{nodes: map[string]*node{}}
	for _, n := range names {
		if b.resolve(n) {
			t.nodes[n] = &node{q: b.norm[n]}
			t.names = append(t.names, n)
		}
	}
	for _, n := range t.names { // sorted, so children lists come out sorted
		q := t.nodes[n].q
		if q.Parent == "" {
			t.roots = append(t.roots, n)
		} else {
			p := t.nodes[q.Parent]
			p.children = append(p.children, n)
		}
	}
	return t
}

func normalize(q Queue) Queue {
	if q.Weight == 0 {
		q.Weight = 1
	}
	q.Guarantee = cloneOrNil(q.Guarantee)
	q.Capability = cloneOrNil(q.Capability)
	return q
}

func cloneOrNil(l resources.List) resources.List {
	if l == nil {
		return nil
	}
	return l.Clone()
}

func ownProblems(q Queue) []string {
	var out []string
	if q.Weight < 0 {
		out = append(out, fmt.Sprintf("weight %d is invalid: it must be at least 1", q.Weight))
	}
	for _, r := range sortedNames(q.Guarantee) {
		if v := q.Guarantee[r]; v < 0 {
			out = append(out, fmt.Sprintf("guarantee %s %s is negative", r, fmtAmount(r, v)))
		}
	}
	for _, r := range sortedNames(q.Capability) {
		if v := q.Capability[r]; v < 0 {
			out = append(out, fmt.Sprintf("capability %s %s is negative", r, fmtAmount(r, v)))
		}
	}
	for _, r := range sortedNames(q.Guarantee) {
		c, ok := q.Capability[r]
		if g := q.Guarantee[r]; ok && c >= 0 && g > c {
			out = append(out, fmt.Sprintf("guarantee %s %s exceeds its own capability %s", r, fmtAmount(r, g), fmtAmount(r, c)))
		}
	}
	return out
}

// guaranteeAboveAncestors reports each resource whose guarantee exceeds the
// tightest capability among the queue's ancestors (all already valid).
func guaranteeAboveAncestors(q Queue, norm map[string]Queue) []string {
	var out []string
	for _, r := range sortedNames(q.Guarantee) {
		g := q.Guarantee[r]
		tightest, limit := "", int64(0)
		for p := q.Parent; p != ""; p = norm[p].Parent {
			if c, ok := norm[p].Capability[r]; ok && (tightest == "" || c < limit) {
				tightest, limit = p, c
			}
		}
		if tightest != "" && g > limit {
			rel := "parent"
			if tightest != q.Parent {
				rel = "ancestor"
			}
			out = append(out, fmt.Sprintf("guarantee %s %s exceeds the capability %s of %s %q",
				r, fmtAmount(r, g), fmtAmount(r, limit), rel, tightest))
		}
	}
	return out
}

// findCycles marks every queue that lies on a parent cycle. Links into
// rejected queues are not followed.
func findCycles(names []string, norm map[string]Queue, bad map[string]bool) map[string]bool {
	onCycle := map[string]bool{}
	done := map[string]bool{}
	for _, start := range names {
		pos := map[string]int{}
		var path []string
		n := start
		for n != "" && !bad[n] && !done[n] {
			if _, ok := norm[n]; !ok {
				break
			}
			if i, seen := pos[n]; seen {
				for _, c := range path[i:] {
					onCycle[c] = true
				}
				break
			}
			pos[n] = len(path)
			path = append(path, n)
			n = norm[n].Parent
		}
		for _, p := range path {
			done[p] = true
		}
	}
	return onCycle
}

func cyclePath(start string, norm map[string]Queue) string {
	parts := []string{start}
	for n := norm[start].Parent; ; n = norm[n].Parent {
		parts = append(parts, n)
		if n == start || len(parts) > len(norm)+1 {
			break
		}
	}
	return strings.Join(parts, " -> ")
}

// Get returns a queue of the tree (weight normalised, lists copied).
func (t *Tree) Get(name string) (Queue, bool) {
	n, ok := t.nodes[name]
	if !ok {
		return Queue{}, false
	}
	q := n.q
	q.Guarantee = cloneOrNil(q.Guarantee)
	q.Capability = cloneOrNil(q.Capability)
	return q, true
}

// IsLeaf reports whether name is a queue of the tree without child queues.
func (t *Tree) IsLeaf(name string) bool {
	n, ok := t.nodes[name]
	return ok && len(n.children) == 0
}

// Ancestors returns the queue's ancestors, parent first, up to the root; nil
// for a top-level or unknown queue.
func (t *Tree) Ancestors(name string) []string {
	n, ok := t.nodes[name]
	if !ok {
		return nil
	}
	var out []string
	for p := n.q.Parent; p != ""; p = t.nodes[p].q.Parent {
		out = append(out, p)
	}
	return out
}

// Children returns the child queues of name, sorted.
func (t *Tree) Children(name string) []string {
	n, ok := t.nodes[name]
	if !ok {
		return nil
	}
	return append([]string(nil), n.children...)
}

// Roots returns the top-level queues, sorted.
func (t *Tree) Roots() []string { return append([]string(nil), t.roots...) }

// Names returns every queue of the tree, sorted.
func (t *Tree) Names() []string { return append([]string(nil), t.names...) }

// Usage aggregates leaf allocations up to inner queues. It returns a list for
// every queue of the tree; entries of allocated that do not name a leaf of
// the tree are ignored.
func (t *Tree) Usage(allocated map[string]resources.List) map[string]resources.List {
	out := make(map[string]resources.List, len(t.nodes))
	for _, n := range t.names {
		out[n] = resources.List{}
	}
	for _, n := range t.names {
		if !t.IsLeaf(n) {
			continue
		}
		a := allocated[n]
		if len(a) == 0 {
			continue
		}
		out[n].Add(a)
		for _, p := range t.Ancestors(n) {
			out[p].Add(a)
		}
	}
	return out
}

// usageOf is the usage of one queue: its own allocation for a leaf, the sum
// over its leaves for an inner queue.
func (t *Tree) usageOf(name string, allocated map[string]resources.List) resources.List {
	n, ok := t.nodes[name]
	if !ok {
		return resources.List{}
	}
	if len(n.children) == 0 {
		return allocated[name].Clone()
	}
	out := resources.List{}
	for _, c := range n.children {
		out.Add(t.usageOf(c, allocated))
	}
	return out
}

func sortedNames(l resources.List) []v1.ResourceName {
	out := make([]v1.ResourceName, 0, len(l))
	for k := range l {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// fmtAmount renders an amount the way users write it in a quantity: CPU in
// millicores ("64000m"), other resources through resource.Quantity ("64Gi").
func fmtAmount(r v1.ResourceName, v int64) string {
	if r == v1.ResourceCPU {
		return fmt.Sprintf("%dm", v)
	}
	return quantityString(v)
}

func quantityString(v int64) string {
	return resource.NewQuantity(v, resource.BinarySI).String()
}
