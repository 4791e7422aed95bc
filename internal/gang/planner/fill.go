package planner

import (
	"slices"
	"sort"

	"github.com/phalanx-sched/phalanx/internal/gang/fragment"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// fill places shapes in order on nodes. For each shape it prefers the smallest
// node that takes all remaining members (best fit), else the node that takes
// the most: few nodes per gang, little fragmentation. Between equally tight
// nodes the least busy goes first, then, with a workload, the one whose GPUs
// the placement fragments least, then the smallest name. It returns the slots
// and the number of members placed.
func fill(shapes []Shape, nodes []Node, workload []fragment.WorkloadShape) (map[string]map[string]int, int) {
	// free and slots are kept apart from f: escape analysis sees f whole,
	// and the orders holding free or returning slots would move f's other
	// slices to the heap.
	free, slots := make([]resources.List, len(nodes)), map[string]map[string]int{}
	f := filler{free: free, freePods: make([]int64, len(nodes)), cloned: make([]bool, len(nodes)), slots: slots}
	for i := range nodes {
		free[i] = nodes[i].Free
		f.freePods[i] = nodes[i].FreePods
	}
	for _, s := range shapes {
		order := &nodeOrder{nodes: nodes, free: free, workload: workload, s: s, frag: map[int]float64{}}
		if s.Count == 1 {
			f.placeOne(order)
		} else {
			f.placeMany(order)
		}
	}
	return slots, f.placed
}

// filler is what fill keeps over shapes: the nodes' room left and the
// slots taken.
type filler struct {
	free     []resources.List
	freePods []int64
	// cloned: free[i] is fill's own copy, no longer the caller's list.
	cloned []bool
	slots  map[string]map[string]int
	placed int
}

// copiesOn is how many members of o's shape node i takes now.
func (f *filler) copiesOn(o *nodeOrder, i int) int {
	if f.cloned[i] {
		return nodeCopies(&o.nodes[i], o.s, f.free[i], f.freePods[i])
	}
	return cachedCopies(&o.nodes[i], o.s)
}

// take places n members of o's shape on node i.
func (f *filler) take(o *nodeOrder, i, n int) {
	if !f.cloned[i] {
		// Copy on first write so callers' Free lists stay untouched.
		f.free[i], f.cloned[i] = f.free[i].Clone(), true
	}
	f.free[i].AddScaled(o.s.Request, -int64(n))
	f.freePods[i] -= int64(n)
	name := o.nodes[i].Name
	if f.slots[name] == nil {
		f.slots[name] = map[string]int{}
	}
	f.slots[name][o.s.Key] += n
	f.placed += n
}

// placeOne places a shape of one member on the best node that takes it, in
// one pass.
func (f *filler) placeOne(o *nodeOrder) {
	best, bestCopies := -1, 0
	for i := range o.nodes {
		if c := f.copiesOn(o, i); c > 0 && (best < 0 || o.better(i, c, best, bestCopies)) {
			best, bestCopies = i, c
		}
	}
	if best >= 0 {
		f.take(o, best, 1)
	}
}

// placeMany places a shape's members, each time on the tightest node that
// takes all remaining, else on one that takes the most.
func (f *filler) placeMany(o *nodeOrder) {
	// Nodes by how many members they take; within one count, best first
	// (a heap, so that only the nodes taken are ordered).
	buckets := map[int]*nodeHeap{}
	better := o.better // one closure for every heap
	for i := range o.nodes {
		if c := f.copiesOn(o, i); c > 0 {
			b := buckets[c]
			if b == nil {
				b = &nodeHeap{c: c, better: better}
				buckets[c] = b
			}
			b.nodes = append(b.nodes, i)
		}
	}
	counts := make([]int, 0, len(buckets))
	for c, b := range buckets {
		b.init()
		counts = append(counts, c)
	}
	slices.Sort(counts)
	remaining := o.s.Count
	for remaining > 0 && len(counts) > 0 {
		// The tightest count that takes all remaining, else the largest.
		k := sort.SearchInts(counts, remaining)
		n := remaining
		if k == len(counts) {
			k = len(counts) - 1
			n = counts[k]
		}
		b := buckets[counts[k]]
		f.take(o, b.pop(), n)
		remaining -= n
		if len(b.nodes) == 0 {
			counts = slices.Delete(counts, k, k+1)
		}
	}
}

// nodeOrder ranks the nodes for the shape s being placed. It reads the free
// room fill leaves (free shares filler's), and is kept apart from filler so
// that only it escapes with the heaps' comparator.
type nodeOrder struct {
	nodes    []Node
	free     []resources.List
	workload []fragment.WorkloadShape
	s        Shape
	// frag is what placing the members a node takes costs in
	// fragmentation; computed only to break a tie, and only once.
	frag map[int]float64
}

func (o *nodeOrder) fragments(i, c int) float64 {
	if len(o.workload) == 0 || o.s.Request[fragment.GPUResource] <= 0 {
		return 0
	}
	v, ok := o.frag[i]
	if !ok {
		v = fragment.FragmentationDelta(o.free[i], o.s.Request, int64(min(c, o.s.Count)), o.workload)
		o.frag[i] = v
	}
	return v
}

// better says whether node i (taking ci members) goes before node j (cj)
// among nodes that both take what is asked: tighter, less busy, less
// fragmenting, smaller name.
func (o *nodeOrder) better(i, ci, j, cj int) bool {
	nodes := o.nodes
	switch {
	case ci != cj:
		return ci < cj
	case nodes[i].Busy != nodes[j].Busy:
		return nodes[i].Busy < nodes[j].Busy
	}
	if fi, fj := o.fragments(i, ci), o.fragments(j, cj); fi != fj {
		return fi < fj
	}
	return nodes[i].Name < nodes[j].Name
}

// nodeHeap holds the indexes of nodes that take c members each, the best
// (by better) on top.
type nodeHeap struct {
	c      int
	nodes  []int
	better func(i, ci, j, cj int) bool
}

func (h *nodeHeap) less(a, b int) bool {
	return h.better(h.nodes[a], h.c, h.nodes[b], h.c)
}

func (h *nodeHeap) init() {
	for i := len(h.nodes)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *nodeHeap) pop() int {
	top := h.nodes[0]
	last := len(h.nodes) - 1
	h.nodes[0] = h.nodes[last]
	h.nodes = h.nodes[:last]
	h.down(0)
	return top
}

func (h *nodeHeap) down(i int) {
	for {
		best := i
		if l := 2*i + 1; l < len(h.nodes) && h.less(l, best) {
			best = l
		}
		if r := 2*i + 2; r < len(h.nodes) && h.less(r, best) {
			best = r
		}
		if best == i {
			return
		}
		h.nodes[i], h.nodes[best] = h.nodes[best], h.nodes[i]
		i = best
	}
}
