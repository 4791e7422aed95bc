package consolidate

import (
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
	"github.com/phalanx-sched/phalanx/internal/gang/preempt"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// cand is a candidate of cost in domains, freeing cpuM.
func cand(key string, cost float64, members int, cpuM int64, domains ...string) Candidate {
	return Candidate{Victim: preempt.Victim{Key: key, Ref: ident.Ref{Namespace: "ns", Name: key}, Members: members,
		OnNode: map[string]preempt.Usage{key: {Request: resources.List{v1.ResourceCPU: cpuM}, Pods: int64(members)}}},
		Cost: cost, Domains: domains}
}

func keys(vs []preempt.Victim) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Key)
	}
	return out
}

func TestCheapest(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cands []Candidate
		// needM: the waiting gang fits once the victims free this much.
		needM int64
		// stuck: a set holding this candidate cannot be relocated.
		stuck      string
		wantDomain string
		want       []string
		wantCost   float64
	}{
		{
			name:  "the cheaper domain wins",
			cands: []Candidate{cand("a", 1, 1, 4000, "r1"), cand("b", 5, 1, 4000, "r2")},
			needM: 4000, wantDomain: "r1", want: []string{"a"}, wantCost: 1,
		},
		{
			name:  "a set that cannot move elsewhere is passed over",
			cands: []Candidate{cand("a", 1, 1, 4000, "r1"), cand("b", 5, 1, 4000, "r2")},
			needM: 4000, stuck: "a", wantDomain: "r2", want: []string{"b"}, wantCost: 5,
		},
		{
			name:  "gangs it does not need are dropped",
			cands: []Candidate{cand("a", 1, 1, 1000, "r1"), cand("b", 2, 1, 4000, "r1")},
			needM: 4000, wantDomain: "r1", want: []string{"b"}, wantCost: 2,
		},
		{
			name:  "equal cost: the fewest pods",
			cands: []Candidate{cand("a", 3, 4, 4000, "r1"), cand("b", 3, 2, 4000, "r2")},
			needM: 4000, wantDomain: "r2", want: []string{"b"}, wantCost: 3,
		},
		{
			name:  "nothing frees enough",
			cands: []Candidate{cand("a", 1, 1, 1000, "r1"), cand("b", 1, 1, 1000, "r2")},
			needM: 4000,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			planFor := func(vs []preempt.Victim) *planner.Plan {
				var freed int64
				for _, u := range preempt.Freed(vs) {
					freed += u.Request[v1.ResourceCPU]
				}
				if freed < tc.needM {
					return nil
				}
				return &planner.Plan{Slots: map[string]map[string]int{"n": {"s": 1}}}
			}
			relocate := func(moved []Candidate, _ []preempt.Victim, _ *planner.Plan) ([]Move, bool) {
				var out []Move
				for _, c := range moved {
					if c.Key == tc.stuck {
						return nil, false
					}
					out = append(out, Move{Ref: c.Ref})
				}
				return out, true
			}
			got := Cheapest(tc.cands, planFor, relocate)
			if tc.want == nil {
				if got != nil {
					t.Fatalf("chose %+v, want none", got)
				}
				return
			}
			if got == nil {
				t.Fatal("chose none")
			}
			if got.Domain != tc.wantDomain || !reflect.DeepEqual(keys(got.Victims), tc.want) || got.Cost != tc.wantCost || got.Plan == nil {
				t.Errorf("chose %s %v cost %v, want %s %v cost %v", got.Domain, keys(got.Victims), got.Cost, tc.wantDomain, tc.want, tc.wantCost)
			}
			if len(got.Moves) != len(tc.want) {
				t.Errorf("moves %+v", got.Moves)
			}
		})
	}
}

// The search stops asking the planner after maxTries: a huge cluster does
// not stall a cycle.
func TestCheapestBoundsTries(t *testing.T) {
	var cands []Candidate
	for i := 0; i < 2*maxTries; i++ {
		cands = append(cands, cand(string(rune('A'+i%26))+time.Duration(i).String(), float64(i), 1, 1, "r1"))
	}
	calls := 0
	never := func([]preempt.Victim) *planner.Plan { calls++; return nil }
	if got := Cheapest(cands, never, nil); got != nil {
		t.Fatalf("chose %+v", got)
	}
	if calls != maxTries {
		t.Errorf("planner asked %d times, want %d", calls, maxTries)
	}
}

func node(name, rack string) planner.NodeState {
	return planner.NodeState{Node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"rack": rack}}},
		Free: resources.List{v1.ResourceCPU: 2000}, FreePods: 10}
}

// Two racks of two 2-CPU nodes. The waiting gang's plan takes all of rack
// r1, where x runs; x must find its place in r2.
func TestRelocate(t *testing.T) {
	tree := racks{"a1": "r1", "a2": "r1", "b1": "r2", "b2": "r2"}
	nodes := []planner.NodeState{node("a1", "r1"), node("a2", "r1"), node("b1", "r2"), node("b2", "r2")}
	nodes[0].Free = resources.List{v1.ResourceCPU: 0} // x runs there
	waiting := mpod("w", 2000, 0)
	shape := planner.ShapeKey(waiting)
	plan := &planner.Plan{Slots: map[string]map[string]int{"a1": {shape: 1}, "a2": {shape: 1}}}
	for _, tc := range []struct {
		name string
		// heldOn is a node others hold whole against the moved gangs.
		heldOn string
		// gone: the moved gangs' group objects are gone.
		gone  bool
		extra bool // y moves too: two 1-CPU members, larger than x
		want  map[string]string
	}{
		{name: "x goes to the other rack", want: map[string]string{"x": "r2"}},
		{name: "both go, the larger first, without sharing room", extra: true, want: map[string]string{"x": "r2", "y": "r2"}},
		{name: "held room is not taken", heldOn: "b1", want: map[string]string{"x": "r2"}},
		{name: "no room left", extra: true, heldOn: "b1"},
		{name: "a gang that is gone fails", gone: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, xPods := running("x", 0, 2000, t0, "a1")
			moved := []Candidate{{Victim: x, Pods: xPods}}
			if tc.extra {
				y, yPods := running("y", 0, 1000, t0, "b1", "b1")
				moved = append(moved, Candidate{Victim: y, Pods: yPods})
			}
			ns := append([]planner.NodeState(nil), nodes...)
			if tc.extra {
				ns[2].Free = resources.List{v1.ResourceCPU: 0}
			}
			r := Relocation{
				Nodes: ns, Requests: map[string]resources.List{shape: {v1.ResourceCPU: 2000}}, Tree: tree,
				Held: func(node string, _ int32) (resources.List, int64) {
					if node == tc.heldOn {
						return resources.List{v1.ResourceCPU: 2000}, 0
					}
					return nil, 0
				},
				Required: func(ident.Ref, *v1.Pod) (string, bool) { return "rack", !tc.gone },
			}
			var victims []preempt.Victim
			for _, c := range moved {
				victims = append(victims, c.Victim)
			}
			moves, ok := r.Relocate(moved, victims, plan)
			if tc.want == nil {
				if ok {
					t.Fatalf("relocated %+v", moves)
				}
				return
			}
			if !ok || len(moves) != len(moved) {
				t.Fatalf("not relocated: %+v %v", moves, ok)
			}
			if tc.extra && moves[0].Ref.Name != "y" {
				t.Errorf("moved %s first, want the larger y", moves[0].Ref.Name)
			}
			used := map[string]int64{}
			for _, mv := range moves {
				for n, byShape := range mv.Plan.Slots {
					if tree[n] != tc.want[mv.Ref.Name] {
						t.Errorf("%s goes to %s in %s, want %s", mv.Ref.Name, n, tree[n], tc.want[mv.Ref.Name])
					}
					if n == tc.heldOn {
						t.Errorf("%s takes held node %s", mv.Ref.Name, n)
					}
					for s, k := range byShape {
						used[n] += mv.Shapes[s][v1.ResourceCPU] * int64(k)
					}
				}
			}
			for n, u := range used {
				if u > 2000 {
					t.Errorf("node %s takes %d CPU of 2000", n, u)
				}
			}
		})
	}
}
