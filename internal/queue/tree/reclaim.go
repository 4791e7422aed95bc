package tree

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Gang is a running gang that reclaim may evict. Usage is what the whole gang
// holds (all members): reclaim evicts whole gangs only, so no gang is ever
// left below its MinMember.
type Gang struct {
	Key, Queue  string
	Priority    int32
	Usage       resources.List
	Members     int
	MinMember   int
	CreatedUnix int64
}

// Victims picks whole gangs to evict so that leaf queue starved can get need.
// It is PlanReclaim without the reason.
func (t *Tree) Victims(starved string, need resources.List, running []Gang, allocated, deserved map[string]resources.List) []Gang {
	v, _ := t.PlanReclaim(starved, need, running, allocated, deserved)
	return v
}

// PlanReclaim picks whole gangs to evict so that leaf queue starved can get
// need (only resources with a positive amount in need count), and says why
// when it cannot.
//
//   - The starved queue must stay within its deserved share after getting
//     need (usage + need <= deserved, per resource in need); otherwise it is
//     not starved and nothing is reclaimed. This prevents two queues from
//     taking the same resources back and forth.
//   - A gang can be a victim if its queue is a leaf other than starved and
//     every queue from that leaf up to (not including) the lowest common
//     ancestor with starved is Reclaimable and uses more than its deserved
//     share of at least one resource in need. Queues above the common
//     ancestor lose nothing, so they are not checked; the starved queue and
//     its ancestors never lose anything.
//   - No victim takes such a queue below its Guarantee in any resource.
//     Victims are first chosen so that no such queue falls below its deserved
//     share in the resources of need; only if that cannot cover need, a queue
//     may fall below deserved with one last gang taken while it was still
//     above.
//   - Order: lowest priority first; then newest first; then fewer members;
//     then Key. Within one priority level a single gang that covers what is
//     still missing is preferred over several; afterwards victims that turn
//     out unnecessary are dropped (highest priority and oldest first), so the
//     result is small but not guaranteed minimal (that is a knapsack).
//
// It returns nil (and a reason) if need cannot be covered, and an empty,
// non-nil slice if need asks for nothing. Victims come in the order above.
func (t *Tree) PlanReclaim(starved string, need resources.List, running []Gang, allocated, deserved map[string]resources.List) ([]Gang, string) {
	if !t.IsLeaf(starved) {
		return nil, fmt.Sprintf("queue %s is not a leaf queue", starved)
	}
	var needRes []v1.ResourceName
	for _, r := range sortedNames(need) {
		if need[r] > 0 {
			needRes = append(needRes, r)
		}
	}
	if len(needRes) == 0 {
		return []Gang{}, ""
	}
	usage := t.Usage(allocated)
	for _, r := range needRes {
		u, d := usage[starved][r], deserved[starved][r]
		if u+need[r] > d {
			return nil, fmt.Sprintf("queue %s: %s %s (allocated %s + needed %s) would exceed its deserved %s; reclaim only brings a queue up to its deserved share",
				starved, r, fmtAmount(r, u+need[r]), fmtAmount(r, u), fmtAmount(r, need[r]), fmtAmount(r, d))
		}
	}
	common := map[string]bool{}
	for _, a := range t.Ancestors(starved) {
		common[a] = true
	}

	var cands []candidate
	seen := map[string]bool{}
	for _, g := range running {
		if seen[g.Key] || g.Queue == starved || !t.IsLeaf(g.Queue) || !helps(g.Usage, need, needRes) {
			continue
		}
		path := []string{g.Queue}
		for _, a := range t.Ancestors(g.Queue) {
			if common[a] {
				break
			}
			path = append(path, a)
		}
		eligible := true
		for _, q := range path {
			if !t.nodes[q].q.Reclaimable || !overDeserved(usage[q], deserved[q], needRes) {
				eligible = false
				break
			}
		}
		if eligible {
			seen[g.Key] = true
			cands = append(cands, candidate{g: g, path: path})
		}
	}
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i].g, cands[j].g
		switch {
		case a.Priority != b.Priority:
			return a.Priority < b.Priority
		case a.CreatedUnix != b.CreatedUnix:
			return a.CreatedUnix > b.CreatedUnix
		case a.Members != b.Members:
			return a.Members < b.Members
		}
		return a.Key < b.Key
	})
	for _, relaxed := range []bool{false, true} {
		if v := t.pick(cands, need, needRes, usage, deserved, relaxed); v != nil {
			return v, ""
		}
	}
	var want []string
	for _, r := range needRes {
		want = append(want, string(r)+" "+fmtAmount(r, need[r]))
	}
	if len(cands) == 0 {
		return nil, fmt.Sprintf("queue %s: no running gang in a reclaimable queue above its deserved share uses %s", starved, strings.Join(want, ", "))
	}
	return nil, fmt.Sprintf("queue %s: gangs of reclaimable queues above their deserved share cannot free %s without taking a queue below its guarantee",
		starved, strings.Join(want, ", "))
}

type candidate struct {
	g    Gang
	path []string // victim leaf, then ancestors below the common ancestor
}

func helps(use, need resources.List, needRes []v1.ResourceName) bool {
	for _, r := range needRes {
		if need[r] > 0 && use[r] > 0 {
			return true
		}
	}
	return false
}

func overDeserved(use, des resources.List, needRes []v1.ResourceName) bool {
	for _, r := range needRes {
		if use[r] > des[r] {
			return true
		}
	}
	return false
}

func (t *Tree) pick(cands []candidate, need resources.List, needRes []v1.ResourceName, usage, deserved map[string]resources.List, relaxed bool) []Gang {
	taken := map[string]resources.List{}
	remaining := resources.List{}
	for _, r := range needRes {
		remaining[r] = need[r]
	}
	covered := func(rem resources.List) bool {
		for _, r := range needRes {
			if rem[r] > 0 {
				return false
			}
		}
		return true
	}
	allowed := func(c candidate) bool {
		for _, q := range c.path {
			cur := usage[q].Clone()
			cur.Sub(taken[q])
			if relaxed && !overDeserved(cur, deserved[q], needRes) {
				return false
			}
			guarantee := t.nodes[q].q.Guarantee
			for r, v := range c.g.Usage {
				if v <= 0 {
					continue
				}
				after := cur[r] - v
				if g := guarantee[r]; g > 0 && after < g {
					return false
				}
				if !relaxed && need[r] > 0 && after < deserved[q][r] {
					return false
				}
			}
		}
		return true
	}
	var chosen []int
	take := func(i int) {
		chosen = append(chosen, i)
		for _, q := range cands[i].path {
			if taken[q] == nil {
				taken[q] = resources.List{}
			}
			taken[q].Add(cands[i].g.Usage)
		}
		for _, r := range needRes {
			remaining[r] -= cands[i].g.Usage[r]
		}
	}
	for i := 0; i < len(cands) && !covered(remaining); {
		j := i
		for j < len(cands) && cands[j].g.Priority == cands[i].g.Priority {
			j++
		}
		single := -1
		for k := i; k < j; k++ {
			g := cands[k].g
			alone := remaining.Clone()
			alone.Sub(g.Usage)
			if covered(alone) && allowed(cands[k]) {
				single = k
				break
			}
		}
		if single >= 0 {
			take(single)
		} else {
			for k := i; k < j && !covered(remaining); k++ {
				if helps(cands[k].g.Usage, remaining, needRes) && allowed(cands[k]) {
					take(k)
				}
			}
		}
		i = j
	}
	if !covered(remaining) {
		return nil
	}
	// Drop victims that are not needed, highest priority and oldest first.
	for x := len(chosen) - 1; x >= 0; x-- {
		without := remaining.Clone()
		without.Add(cands[chosen[x]].g.Usage)
		if covered(without) {
			remaining = without
			chosen = append(chosen[:x], chosen[x+1:]...)
		}
	}
	sort.Ints(chosen)
	out := make([]Gang, len(chosen))
	for i, k := range chosen {
		out[i] = cands[k].g
	}
	return out
}
