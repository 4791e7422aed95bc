package tree

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Admit says whether a gang whose minimum request is min may start in leaf
// queue leaf, given the cluster total and the allocation of every leaf queue:
//
//   - the leaf and all its ancestors are Open;
//   - usage + min stays within the Capability of the leaf and of every
//     ancestor (usage of an inner queue = sum over its leaves);
//   - it does not eat into other queues' unmet guarantees: free
//     (total - Σ allocated) minus what other queues still hold of their
//     guarantees must cover min. "Other queues" are those that are not the
//     leaf or one of its ancestors. A subtree holds
//     max(own guarantee - own usage, Σ what its children hold), so a guarantee
//     is not counted twice when a parent and its child both have one.
//
// Only resources with a positive amount in min are checked. Entries of
// allocated that name an inner queue are ignored; entries for queues that
// are not in the tree still use the cluster (they reduce free). reason
// explains a refusal in user terms, naming queue, resource and amounts.
func (t *Tree) Admit(leaf string, min resources.List, total resources.List, allocated map[string]resources.List) (ok bool, reason string) {
	n, found := t.nodes[leaf]
	if !found {
		return false, fmt.Sprintf("queue %s does not exist or is invalid", leaf)
	}
	if len(n.children) > 0 {
		return false, fmt.Sprintf("queue %s has child queues; only leaf queues take pods", leaf)
	}
	path := append([]string{leaf}, t.Ancestors(leaf)...)
	for _, q := range path {
		if !t.nodes[q].q.Open {
			if q == leaf {
				return false, fmt.Sprintf("queue %s is closed", leaf)
			}
			return false, fmt.Sprintf("queue %s: parent queue %s is closed", leaf, q)
		}
	}
	var req []v1.ResourceName
	for _, r := range sortedNames(min) {
		if min[r] > 0 {
			req = append(req, r)
		}
	}
	usage := t.Usage(allocated)
	for _, q := range path {
		for _, r := range req {
			c, capped := t.nodes[q].q.Capability[r]
			if !capped || usage[q][r]+min[r] <= c {
				continue
			}
			s := fmt.Sprintf("queue %s: %s %s of capability %s (allocated %s + gang minimum %s)",
				q, r, fmtAmount(r, usage[q][r]+min[r]), fmtAmount(r, c), fmtAmount(r, usage[q][r]), fmtAmount(r, min[r]))
			if q != leaf {
				s += fmt.Sprintf("; %s is an ancestor of queue %s", q, leaf)
			}
			return false, s
		}
	}

	free := total.Clone()
	for name, a := range allocated {
		if qn, ok := t.nodes[name]; ok && len(qn.children) > 0 {
			continue
		}
		free.Sub(a)
	}
	// A cluster without room is not the queue's business (the planner says so,
	// and reclaim needs the gang admitted); taking what other queues are
	// guaranteed but not yet using is.
	for _, r := range req {
		held, holders := t.heldOutside(leaf, r, usage)
		if held > 0 && free[r]-held < min[r] {
			parts := make([]string, len(holders))
			for i, h := range holders {
				parts[i] = h.queue + " " + fmtAmount(r, h.amount)
			}
			return false, fmt.Sprintf("queue %s: gang minimum %s %s exceeds the %s left of %s free after the unmet guarantees of other queues (%s)",
				leaf, r, fmtAmount(r, min[r]), fmtAmount(r, max(0, free[r]-held)), fmtAmount(r, free[r]), strings.Join(parts, ", "))
		}
	}
	return true, ""
}

type holder struct {
	queue  string
	amount int64
}

// heldOutside sums, for resource r, what the queues off leaf's path still
// hold of their guarantees, with the subtrees holding it.
func (t *Tree) heldOutside(leaf string, r v1.ResourceName, usage map[string]resources.List) (int64, []holder) {
	onPath := map[string]bool{leaf: true}
	for _, a := range t.Ancestors(leaf) {
		onPath[a] = true
	}
	var held int64
	var holders []holder
	level := t.roots
	for len(level) > 0 {
		var next []string
		for _, q := range level {
			if onPath[q] {
				next = t.nodes[q].children
				continue
			}
			if v := t.unmetGuarantee(q, r, usage); v > 0 {
				held = satAdd(held, v)
				holders = append(holders, holder{q, v})
			}
		}
		level = next
	}
	return held, holders
}

// unmetGuarantee is what the subtree of q still holds of guarantees for r.
func (t *Tree) unmetGuarantee(q string, r v1.ResourceName, usage map[string]resources.List) int64 {
	n := t.nodes[q]
	own := max(0, n.q.Guarantee[r]-usage[q][r])
	var kids int64
	for _, c := range n.children {
		kids = satAdd(kids, t.unmetGuarantee(c, r, usage))
	}
	return max(own, kids)
}
