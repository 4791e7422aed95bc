// Package preempt chooses victims: the running gangs (and plain pods)
// whose eviction lets a gang that fits nowhere be placed, fewest and lowest
// priority first, and what they free on each node.
package preempt

import (
	"sort"
	"time"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Victim is a running gang — or a plain pod, a gang of one — that may be
// evicted whole to make room for a gang that cannot be placed.
type Victim struct {
	// Key names it: "namespace/group" for a gang, "namespace/pod:name" for a
	// plain pod.
	Key      string
	Ref      ident.Ref // zero for a plain pod
	Queue    string
	Priority int32
	Members  int
	// Started is when its last member was bound (for a minimum runtime).
	Started time.Time
	// OnNode is what its pods use on each node: requests and pod slots.
	OnNode map[string]Usage
	// Total is what it uses in all.
	Total resources.List
	// Of is set on a member evicted alone: the key of its gang (whose
	// disruptionMode is single), which is a victim of its own too.
	Of string
}

// withoutCovered drops members evicted alone whose whole gang is among the
// victims too: it frees them already.
func withoutCovered(victims []Victim) []Victim {
	whole := map[string]bool{}
	for _, v := range victims {
		if v.Of == "" {
			whole[v.Key] = true
		}
	}
	out := victims[:0:0]
	for _, v := range victims {
		if v.Of == "" || !whole[v.Of] {
			out = append(out, v)
		}
	}
	return out
}

// Usage is what some pods use on one node.
type Usage struct {
	Request resources.List
	Pods    int64
}

// Freed sums what a set of victims frees on each node.
func Freed(victims []Victim) map[string]Usage {
	out := map[string]Usage{}
	for _, v := range withoutCovered(victims) {
		for node, u := range v.OnNode {
			f := out[node]
			if f.Request == nil {
				f.Request = resources.List{}
			}
			f.Request.Add(u.Request)
			f.Pods += u.Pods
			out[node] = f
		}
	}
	return out
}

// size is how much a victim's eviction costs: its pods.
func (v *Victim) size() int { return v.Members }

// ChooseVictims picks whole victims whose eviction lets the gang fit, as fits
// (the planner, on the capacity the victims free) says: lowest priority
// first; within a priority, a single victim that suffices (the smallest) over
// several, else the largest ones first; then victims that turn out
// unnecessary are dropped, highest priority and smallest first. It returns
// nil when no set of candidates lets the gang fit. Candidates come in any
// order; ties are broken by start time (newest first, the least work lost)
// and key.
//
// A gang whose disruptionMode is single is a candidate whole and, for each
// member above its minimum, a one-member candidate (Of): evicting one
// member is the smaller cost, and a chosen whole gang covers its members.
func ChooseVictims(candidates []Victim, fits func([]Victim) bool) []Victim {
	if len(candidates) == 0 {
		return nil
	}

	cands := append([]Victim(nil), candidates...)
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := &cands[i], &cands[j]
		switch {
		case a.Priority != b.Priority:
			return a.Priority < b.Priority
		case a.size() != b.size():
			return a.size() < b.size()
		case !a.Started.Equal(b.Started):
			return a.Started.After(b.Started)
		}
		return a.Key < b.Key
	})
	var chosen []Victim
	for i := 0; i < len(cands); {
		j := i
		for j < len(cands) && cands[j].Priority == cands[i].Priority {
			j++
		}
		level := cands[i:j]
		// The smallest single victim of this level that suffices.
		for _, v := range level {
			if fits(append(append([]Victim(nil), chosen...), v)) {
				return prune(append(chosen, v), fits)
			}
		}
		// Otherwise the level's victims, largest first, until the gang fits.
		for k := len(level) - 1; k >= 0; k-- {
			chosen = append(chosen, level[k])
			if fits(chosen) {
				return prune(chosen, fits)
			}
		}
		i = j
	}
	return nil
}

// prune drops victims the gang does not need, highest priority and smallest
// first.
func prune(chosen []Victim, fits func([]Victim) bool) []Victim {
	order := make([]int, len(chosen))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		va, vb := &chosen[order[a]], &chosen[order[b]]
		if va.Priority != vb.Priority {
			return va.Priority > vb.Priority
		}
		return va.size() < vb.size()
	})
	drop := make([]bool, len(chosen))
	for _, i := range order {
		drop[i] = true
		var without []Victim
		for k, v := range chosen {
			if !drop[k] {
				without = append(without, v)
			}
		}
		if len(without) == 0 || !fits(without) {
			drop[i] = false
		}
	}
	var out []Victim
	for k, v := range chosen {
		if !drop[k] {
			out = append(out, v)
		}
	}
	out = withoutCovered(out)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Priority != out[j].Priority {
			return out[i].Priority < out[j].Priority
		}
		return out[i].Key < out[j].Key
	})
	return out
}
