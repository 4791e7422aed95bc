package tree

import (
	"fmt"
	"math"
	"math/big"
	"sort"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Deserved computes each queue's deserved share per resource by hierarchical
// water-filling, every resource of total independently.
//
// At each level the amount (the cluster total at the top, a queue's deserved
// below it) is split among sibling queues: queue i gets
// clamp(λ·weight_i, floor_i, ceiling_i) with λ chosen so that the parts add up
// to the amount. That is the fixed point of "split by weight, cap the queues
// that reach their ceiling, give the rest to the others by weight, until
// stable", with guarantees as floors:
//
//   - ceiling: the queue's demand (for a leaf, its entry in demand:
//     allocated + pending requests; for an inner queue, the sum of its
//     children's ceilings), capped by its Capability;
//   - floor: its Guarantee (for an inner queue, at least the sum of its
//     children's floors), capped by its Capability. A guarantee is a floor
//     even when the queue demands less: it is held for the queue.
//
// When the amount does not cover the floors it is split by weight with the
// floors as ceilings (guarantees are satisfied first, as far as they go).
// When it exceeds the ceilings the rest stays undistributed. Integer parts
// are rounded by largest remainder, so siblings' parts never exceed the amount.
//
// Demand entries for inner or unknown queues are ignored. The result has an
// entry for every queue and, in it, every resource of total.
func (t *Tree) Deserved(total resources.List, demand map[string]resources.List) map[string]resources.List {
	return t.DeservedRecent(total, demand, nil)
}

// DeservedRecent is Deserved with decayed fair share: where sibling queues
// have recent usage (by leaf queue, summed up the tree) of a resource, the
// room above their floors is split by weights that recentWeights adjusts
// by it. Guarantees and ceilings are unchanged. recent nil is Deserved.
func (t *Tree) DeservedRecent(total resources.List, demand, recent map[string]resources.List) map[string]resources.List {
	if recent != nil {
		recent = t.Usage(recent)
	}
	out := make(map[string]resources.List, len(t.nodes))
	for _, n := range t.names {
		out[n] = resources.List{}
	}
	for _, r := range sortedNames(total) {
		amount := total[r]
		if amount < 0 {
			amount = 0
		}
		t.deservedFor(r, amount, demand, recent, out)
	}
	return out
}

func (t *Tree) deservedFor(r v1.ResourceName, amount int64, demand, recent map[string]resources.List, out map[string]resources.List) {
	lo := make(map[string]int64, len(t.nodes))
	hi := make(map[string]int64, len(t.nodes))
	var bounds func(name string)
	bounds = func(name string) {
		n := t.nodes[name]
		g := n.q.Guarantee[r]
		var l, u int64
		if len(n.children) == 0 {
			l, u = g, max(0, demand[name][r])
		} else {
			var sl, su int64
			for _, c := range n.children {
				bounds(c)
				sl, su = satAdd(sl, lo[c]), satAdd(su, hi[c])
			}
			l, u = max(g, sl), su
		}
		if c, ok := n.q.Capability[r]; ok {
			l, u = min(l, c), min(u, c)
		}
		lo[name], hi[name] = l, max(u, l)
	}
	for _, root := range t.roots {
		bounds(root)
	}
	var split func(amount int64, names []string)
	split = func(amount int64, names []string) {
		w := make([]int64, len(names))
		l := make([]int64, len(names))
		h := make([]int64, len(names))
		for i, n := range names {
			w[i], l[i], h[i] = int64(t.nodes[n].q.Weight), lo[n], hi[n]
		}
		if recent != nil {
			u := make([]int64, len(names))
			for i, n := range names {
				u[i] = recent[n][r]
			}
			w = recentWeights(w, u)
		}
		x := fill(amount, w, l, h)
		for i, n := range names {
			out[n][r] = x[i]
			if ch := t.nodes[n].children; len(ch) > 0 {
				split(x[i], ch)
			}
		}
	}
	split(amount, t.roots)
}

func satAdd(a, b int64) int64 {
	s := a + b
	switch {
	case b > 0 && s < a:
		return math.MaxInt64
	case b < 0 && s > a:
		return math.MinInt64
	}
	return s
}

// fill splits amount among claimants with positive weights w, floors lo and
// ceilings hi (lo[i] <= hi[i]): x[i] = clamp(λ·w[i], lo[i], hi[i]) with
// Σx = amount, rounded to integers by largest remainder. If amount exceeds
// Σhi every claimant gets hi; if it does not cover Σlo it is split with lo as
// the ceilings. Products are computed exactly (math/big): memory in bytes
// times a weight can overflow int64.
func fill(amount int64, w, lo, hi []int64) []int64 {
	n := len(w)
	x := make([]int64, n)
	if n == 0 || amount <= 0 {
		return x
	}
	var sumLo, sumHi int64
	for i := range w {
		sumLo, sumHi = satAdd(sumLo, lo[i]), satAdd(sumHi, hi[i])
	}
	if amount >= sumHi {
		copy(x, hi)
		return x
	}
	if amount < sumLo {
		return fill(amount, w, make([]int64, n), lo)
	}
	// Fix the claimants that violate a bound at the plain weighted split:
	// if the excess above ceilings is at least the shortfall below floors the
	// final λ is not smaller, so the ceiling violators stay capped; otherwise
	// λ shrinks and the floor violators stay floored. Each round fixes one
	// claimant at least.
	fixed := make([]bool, n)
	rem := amount
	for {
		var W int64
		for i := range w {
			if !fixed[i] {
				W += w[i]
			}
		}
		if W == 0 {
			break
		}
		bRem, bW := big.NewInt(rem), big.NewInt(W)
		up, down := new(big.Int), new(big.Int)
		var ups, downs []int
		for i := range w {
			if fixed[i] {
				continue
			}
			s := new(big.Int).Mul(bRem, big.NewInt(w[i]))
			hW := new(big.Int).Mul(big.NewInt(hi[i]), bW)
			lW := new(big.Int).Mul(big.NewInt(lo[i]), bW)
			if s.Cmp(hW) > 0 {
				up.Add(up, s.Sub(s, hW))
				ups = append(ups, i)
			} else if s.Cmp(lW) < 0 {
				down.Add(down, lW.Sub(lW, s))
				downs = append(downs, i)
			}
		}
		if len(ups) == 0 && len(downs) == 0 {
			type part struct {
				i   int
				rem int64
			}
			var parts []part
			var given int64
			for i := range w {
				if fixed[i] {
					continue
				}
				q, r := new(big.Int).QuoRem(new(big.Int).Mul(bRem, big.NewInt(w[i])), bW, new(big.Int))
				x[i] = q.Int64()
				given += x[i]
				parts = append(parts, part{i, r.Int64()})
			}
			sort.SliceStable(parts, func(a, b int) bool {
				if parts[a].rem != parts[b].rem {
					return parts[a].rem > parts[b].rem
				}
				return w[parts[a].i] > w[parts[b].i]
			})
			for k := int64(0); k < rem-given && int(k) < len(parts); k++ {
				x[parts[k].i]++
			}
			break
		}
		c := up.Cmp(down)
		if c >= 0 {
			for _, i := range ups {
				fixed[i], x[i] = true, hi[i]
			}
		}
		if c <= 0 {
			for _, i := range downs {
				fixed[i], x[i] = true, lo[i]
			}
		}
		rem = amount
		for i := range w {
			if fixed[i] {
				rem -= x[i]
			}
		}
	}
	return x
}

// Share is the queue's dominant share over its deserved: the largest
// allocated/deserved over the resources it uses (a deserved of 0 with an
// allocation counts as +Inf). Weights are already in deserved. Lower share =
// further below deserved = schedule first.
//
// For a leaf, allocated[leaf] is its usage; for an inner queue the usage is
// summed over its leaves. deserved is read for the queue itself (as returned
// by Deserved). An unknown queue has share +Inf.
func (t *Tree) Share(leaf string, allocated map[string]resources.List, deserved map[string]resources.List) float64 {
	if _, ok := t.nodes[leaf]; !ok {
		return math.Inf(1)
	}
	return dominant(t.usageOf(leaf, allocated), deserved[leaf])
}

// Exceeds reports the first resource of need, by name, for which used plus
// need goes above deserved, rendered for messages ("cpu 7000m of 6000m").
func Exceeds(used, deserved, need resources.List) (string, bool) {
	for _, r := range sortedNames(need) {
		if need[r] > 0 && used[r]+need[r] > deserved[r] {
			return fmt.Sprintf("%s %s of %s", r, fmtAmount(r, used[r]+need[r]), fmtAmount(r, deserved[r])), true
		}
	}
	return "", false
}

func dominant(use, des resources.List) float64 {
	best := 0.0
	for r, a := range use {
		if a <= 0 {
			continue
		}
		d := des[r]
		if d <= 0 {
			return math.Inf(1)
		}
		best = max(best, float64(a)/float64(d))
	}
	return best
}

// Compare orders two queues for scheduling, hierarchically: at the first level
// where their paths from the top differ, the branch with the lower Share goes
// first (so a team under a starved department beats a team under a
// well-served one); on a tie, the queues' own shares. It returns -1 if a goes
// first, 1 if b does, and 0 when their shares tie: queues of equal share are
// equal here, and the gangs' own order (gang.Compare: priority, submission
// time, then names) decides between their gangs. Unknown queues go last.
func (t *Tree) Compare(a, b string, allocated, deserved map[string]resources.List) int {
	if a == b {
		return 0
	}
	_, okA := t.nodes[a]
	_, okB := t.nodes[b]
	switch {
	case !okA && !okB:
		return 0
	case !okA:
		return 1
	case !okB:
		return -1
	}
	pa, pb := t.pathFromTop(a), t.pathFromTop(b)
	for i := 0; i < len(pa) && i < len(pb); i++ {
		if pa[i] != pb[i] {
			if c := cmpFloat(t.Share(pa[i], allocated, deserved), t.Share(pb[i], allocated, deserved)); c != 0 {
				return c
			}
			break
		}
	}
	return cmpFloat(t.Share(a, allocated, deserved), t.Share(b, allocated, deserved))
}

func (t *Tree) pathFromTop(name string) []string {
	anc := t.Ancestors(name)
	out := make([]string, 0, len(anc)+1)
	for i := len(anc) - 1; i >= 0; i-- {
		out = append(out, anc[i])
	}
	return append(out, name)
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// minWeightFactor bounds how far recent usage lowers a queue's weight: to a
// tenth of what it is configured, so a queue that ran hot still gets some
// of the room nobody else asks for first, and returns to its weight as its
// usage decays.
const minWeightFactor = 0.1

// weightScale turns the fractional weights of recentWeights into the
// integers fill splits by.
const weightScale = 1 << 20

// recentWeights adjusts sibling queues' weights w by their recent usage u
// (of one resource): with s the weight's part of the siblings' total and h
// the usage's, a queue splits room by s + (s − h), at least s/10. A queue
// that used more than its weight's part recently gets less of the room
// above guarantees, one that used less gets more, until recent usage
// matches the weights. Without recent usage the weights are unchanged.
func recentWeights(w, u []int64) []int64 {
	var sw, su float64
	for i := range w {
		sw += float64(w[i])
		su += float64(max(0, u[i]))
	}
	if su <= 0 || sw <= 0 {
		return w
	}
	out := make([]int64, len(w))
	for i := range w {
		s, h := float64(w[i])/sw, float64(max(0, u[i]))/su
		out[i] = max(1, int64(math.Round(max(minWeightFactor*s, 2*s-h)*weightScale)))
	}
	return out
}
