package planner

import (
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/gang/fragment"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// TestFillPicksAsSortedOrder checks fill's per-count heaps against the
// definition they replaced: every candidate sorted by count (ties best last),
// then, while members remain, the best node of the tightest count that takes
// them all, else the best of the largest. Random rooms, busy figures, limits
// and shapes; with and without the dry run's memo.
func TestFillPicksAsSortedOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 300; round++ {
		nodes := make([]Node, 1+rng.IntN(60))
		for i := range nodes {
			nodes[i] = Node{
				Name:     "n" + string(rune('a'+i%26)) + string(rune('a'+i/26)),
				Free:     resources.List{v1.ResourceCPU: int64(rng.IntN(9)) * 1000, fragment.GPUResource: int64(rng.IntN(9))},
				FreePods: int64(rng.IntN(12)),
				Limit:    map[string]int{"a": 1 + rng.IntN(8), "b": 1 + rng.IntN(8)},
				Busy:     int64(rng.IntN(3)),
			}
			if rng.IntN(5) == 0 {
				delete(nodes[i].Limit, "b")
			}
		}
		shapes := []Shape{
			{Key: "a", Request: resources.List{v1.ResourceCPU: 1000, fragment.GPUResource: 1}, Count: 1 + rng.IntN(40)},
			{Key: "b", Request: resources.List{v1.ResourceCPU: 2000}, Count: rng.IntN(20)},
		}
		want, wantPlaced := sortedFill(shapes, nodes)
		if round%2 == 1 {
			WithMemo(nodes)
		}
		got, placed := fill(shapes, nodes, nil)
		if placed != wantPlaced || !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: fill placed %d as %v, the sorted order places %d as %v", round, placed, got, wantPlaced, want)
		}
	}
}

// sortedFill is fill's definition for shapes of more than one member and no
// fragmentation tie-break, written as a full sort.
func sortedFill(shapes []Shape, nodes []Node) (map[string]map[string]int, int) {
	free := make([]resources.List, len(nodes))
	freePods := make([]int64, len(nodes))
	for i := range nodes {
		free[i], freePods[i] = nodes[i].Free.Clone(), nodes[i].FreePods
	}
	better := func(i, ci, j, cj int) bool {
		switch {
		case ci != cj:
			return ci < cj
		case nodes[i].Busy != nodes[j].Busy:
			return nodes[i].Busy < nodes[j].Busy
		}
		return nodes[i].Name < nodes[j].Name
	}
	slots := map[string]map[string]int{}
	placed := 0
	for _, s := range shapes {
		type cand struct{ i, c int }
		var cands []cand
		for i := range nodes {
			if c := nodeCopies(&nodes[i], s, free[i], freePods[i]); c > 0 {
				cands = append(cands, cand{i, c})
			}
		}
		sort.Slice(cands, func(a, b int) bool {
			if cands[a].c != cands[b].c {
				return cands[a].c < cands[b].c
			}
			return better(cands[b].i, cands[b].c, cands[a].i, cands[a].c)
		})
		take := func(i, n int) {
			free[i].AddScaled(s.Request, -int64(n))
			freePods[i] -= int64(n)
			if slots[nodes[i].Name] == nil {
				slots[nodes[i].Name] = map[string]int{}
			}
			slots[nodes[i].Name][s.Key] += n
			placed += n
		}
		if s.Count == 1 {
			if len(cands) > 0 {
				best := cands[0]
				for _, c := range cands[1:] {
					if better(c.i, c.c, best.i, best.c) {
						best = c
					}
				}
				take(best.i, 1)
			}
			continue
		}
		remaining := s.Count
		for remaining > 0 && len(cands) > 0 {
			k := sort.Search(len(cands), func(j int) bool { return cands[j].c >= remaining })
			pick, n := len(cands)-1, cands[len(cands)-1].c
			if k < len(cands) {
				pick = k
				for pick+1 < len(cands) && cands[pick+1].c == cands[k].c {
					pick++
				}
				n = remaining
			}
			take(cands[pick].i, n)
			remaining -= n
			cands = append(cands[:pick], cands[pick+1:]...)
		}
	}
	return slots, placed
}
