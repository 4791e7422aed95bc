package planner

import (
	"fmt"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

func cpu(m int64) resources.List { return resources.List{v1.ResourceCPU: m} }

// node with free CPU (millicores), eligible for the given shapes.
func node(name string, freeCPU int64, shapes ...string) Node {
	n := Node{Name: name, Free: cpu(freeCPU), FreePods: 110, Limit: map[string]int{}}
	for _, s := range shapes {
		n.Limit[s] = 1 << 20
	}
	return n
}

func withDomains(n Node, d ...string) Node { n.Domains = d; return n }

func TestPlace(t *testing.T) {
	w := func(count int, req int64) []Shape { return []Shape{{Key: "w", Request: cpu(req), Count: count}} }
	tests := []struct {
		name       string
		req        Request
		want       map[string]map[string]int // nil: no plan
		wantPlaced int                       // when no plan
		wantBest   Domain
	}{
		{
			name: "reference: 20 × 4 CPU on 4 × 4 CPU does not fit",
			req: Request{Shapes: w(20, 4000), Nodes: []Node{
				node("n0", 4000, "w"), node("n1", 4000, "w"), node("n2", 4000, "w"), node("n3", 4000, "w"),
			}},
			wantPlaced: 4,
		},
		{
			name: "reference: 4 × 4 CPU on 4 × 4 CPU fits one per node",
			req: Request{Shapes: w(4, 4000), Nodes: []Node{
				node("n0", 4000, "w"), node("n1", 4000, "w"), node("n2", 4000, "w"), node("n3", 4000, "w"),
			}},
			want: map[string]map[string]int{"n0": {"w": 1}, "n1": {"w": 1}, "n2": {"w": 1}, "n3": {"w": 1}},
		},
		{
			name: "fragmentation: 12 CPU free in total, no node takes a 4-CPU member",
			req: Request{Shapes: w(3, 4000), Nodes: []Node{
				node("n0", 3000, "w"), node("n1", 3000, "w"), node("n2", 3000, "w"), node("n3", 3000, "w"),
			}},
			wantPlaced: 0,
		},
		{
			name: "ineligible nodes are not counted",
			req: Request{Shapes: w(3, 1000), Nodes: []Node{
				node("n0", 8000), node("n1", 1000, "w"), node("n2", 1000, "w"),
			}},
			wantPlaced: 2,
		},
		{
			name: "fewest nodes: the biggest node first, best fit for the rest",
			req: Request{Shapes: w(5, 1000), Nodes: []Node{
				node("a", 4000, "w"), node("b", 2000, "w"), node("c", 1000, "w"),
			}},
			want: map[string]map[string]int{"a": {"w": 4}, "c": {"w": 1}},
		},
		{
			name: "best fit: the smallest node that takes all",
			req: Request{Shapes: w(2, 1000), Nodes: []Node{
				node("a", 4000, "w"), node("b", 2000, "w"), node("c", 3000, "w"),
			}},
			want: map[string]map[string]int{"b": {"w": 2}},
		},
		{
			name: "ties break by name",
			req: Request{Shapes: w(1, 1000), Nodes: []Node{
				node("z", 1000, "w"), node("m", 1000, "w"), node("a", 1000, "w"),
			}},
			want: map[string]map[string]int{"a": {"w": 1}},
		},
		{
			name: "limit caps members per node (one per host)",
			req: Request{Shapes: w(2, 1000), Nodes: []Node{
				{Name: "a", Free: cpu(8000), FreePods: 110, Limit: map[string]int{"w": 1}},
				{Name: "b", Free: cpu(8000), FreePods: 110, Limit: map[string]int{"w": 1}},
			}},
			want: map[string]map[string]int{"a": {"w": 1}, "b": {"w": 1}},
		},
		{
			name: "pod slots bound members",
			req: Request{Shapes: w(3, 100), Nodes: []Node{
				{Name: "a", Free: cpu(8000), FreePods: 2, Limit: map[string]int{"w": 100}},
			}},
			wantPlaced: 2,
		},
		{
			name: "two shapes share a node's capacity",
			req: Request{Shapes: []Shape{
				{Key: "big", Request: cpu(3000), Count: 1},
				{Key: "small", Request: cpu(1000), Count: 2},
			}, Nodes: []Node{node("a", 4000, "big", "small"), node("b", 1000, "small")}},
			want: map[string]map[string]int{"a": {"big": 1, "small": 1}, "b": {"small": 1}},
		},
		{
			name: "required domain: the tightest domain that fits",
			req: Request{Shapes: w(2, 1000), Levels: []string{"ib"}, Required: "ib", Nodes: []Node{
				withDomains(node("a1", 4000, "w"), "ib-a"), withDomains(node("a2", 4000, "w"), "ib-a"),
				withDomains(node("b1", 2000, "w"), "ib-b"),
				withDomains(node("c1", 1000, "w"), "ib-c"),
			}},
			want: map[string]map[string]int{"b1": {"w": 2}},
		},
		{
			name: "required domain: none big enough, the best is named",
			req: Request{Shapes: w(5, 1000), Levels: []string{"ib"}, Required: "ib", Nodes: []Node{
				withDomains(node("a1", 3000, "w"), "ib-a"), withDomains(node("b1", 4000, "w"), "ib-b"),
			}},
			wantPlaced: 4,
			wantBest:   Domain{Level: "ib", Value: "ib-b"},
		},
		{
			name: "required domain: filtered capacity does not count",
			req: Request{Shapes: w(3, 1000), Levels: []string{"ib"}, Required: "ib", Nodes: []Node{
				withDomains(node("a1", 8000), "ib-a"), withDomains(node("a2", 8000), "ib-a"),
				withDomains(node("b1", 3000, "w"), "ib-b"),
			}},
			want: map[string]map[string]int{"b1": {"w": 3}},
		},
		{
			name: "preferred: widen to the next level",
			req: Request{Shapes: w(4, 1000), Levels: []string{"ib", "leaf"}, Preferred: "leaf", Nodes: []Node{
				withDomains(node("l1", 2000, "w"), "ib-a", "leaf-1"), withDomains(node("l2", 2000, "w"), "ib-a", "leaf-2"),
				withDomains(node("l3", 3000, "w"), "ib-b", "leaf-3"),
			}},
			want: map[string]map[string]int{"l1": {"w": 2}, "l2": {"w": 2}},
		},
		{
			name: "preferred: span the fewest widest domains",
			req: Request{Shapes: w(6, 1000), Levels: []string{"ib"}, Preferred: "ib", Nodes: []Node{
				withDomains(node("a", 4000, "w"), "ib-a"), withDomains(node("b", 1000, "w"), "ib-b"), withDomains(node("c", 2000, "w"), "ib-c"),
			}},
			want: map[string]map[string]int{"a": {"w": 4}, "c": {"w": 2}},
		},
		{
			name:       "unknown required level: no plan",
			req:        Request{Shapes: w(1, 1000), Levels: []string{"ib"}, Required: "rack", Nodes: []Node{withDomains(node("a", 1000, "w"), "ib-a")}},
			wantPlaced: 0,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := fmt.Sprint(tc.req.Nodes)
			plan, diag := Place(tc.req)
			if fmt.Sprint(tc.req.Nodes) != before {
				t.Fatalf("Place modified its input nodes")
			}
			if tc.want == nil {
				if plan != nil {
					t.Fatalf("want no plan, got %v", plan.Slots)
				}
				if diag.Placed != tc.wantPlaced {
					t.Errorf("diagnosis placed %d, want %d", diag.Placed, tc.wantPlaced)
				}
				if diag.Best != tc.wantBest {
					t.Errorf("best domain %v, want %v", diag.Best, tc.wantBest)
				}
				return
			}
			if plan == nil {
				t.Fatalf("no plan: %+v", diag)
			}
			if !reflect.DeepEqual(plan.Slots, tc.want) {
				t.Fatalf("slots %v, want %v", plan.Slots, tc.want)
			}
		})
	}
}

// TestPlaceDeterministic: equal inputs give equal plans, whatever the order.
func TestPlaceDeterministic(t *testing.T) {
	var nodes []Node
	for i := 0; i < 50; i++ {
		nodes = append(nodes, node(fmt.Sprintf("n%02d", i), int64(1000*(1+i%4)), "w"))
	}
	req := Request{Shapes: []Shape{{Key: "w", Request: cpu(1000), Count: 37}}, Nodes: nodes}
	first, _ := Place(req)
	for i := 0; i < 5; i++ {
		rev := append([]Node(nil), nodes...)
		for a, b := 0, len(rev)-1; a < b; a, b = a+1, b-1 {
			rev[a], rev[b] = rev[b], rev[a]
		}
		req.Nodes = rev
		again, _ := Place(req)
		if !reflect.DeepEqual(first.Slots, again.Slots) {
			t.Fatalf("plans differ with node order: %v vs %v", first.Slots, again.Slots)
		}
	}
}

// BenchmarkPlace1024On4096 measures the planner alone: a 1024-member gang on
// 4096 nodes in 3 levels (64 IB clusters × 8 leaves × 8 hosts).
func BenchmarkPlace1024On4096(b *testing.B) {
	var nodes []Node
	for i := 0; i < 4096; i++ {
		n := node(fmt.Sprintf("n%04d", i), 8000, "w")
		n.Domains = []string{fmt.Sprintf("ib-%02d", i/64), fmt.Sprintf("leaf-%03d", i/8), n.Name}
		nodes = append(nodes, n)
	}
	req := Request{Shapes: []Shape{{Key: "w", Request: cpu(1000), Count: 1024}}, Nodes: nodes,
		Levels: []string{"ib", "leaf", "host"}, Preferred: "leaf"}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if plan, _ := Place(req); plan == nil {
			b.Fatal("no plan")
		}
	}
}

// SetLimit gives the node a new map: the old one may be shared.
func TestNodeSetLimit(t *testing.T) {
	shared := map[string]int{"a": 2, "b": 3}
	n := Node{Limit: shared}
	n.SetLimit("a", 1)
	if n.Limit["a"] != 1 || n.Limit["b"] != 3 {
		t.Errorf("limits %v, want a=1 b=3", n.Limit)
	}
	if shared["a"] != 2 {
		t.Errorf("the shared map changed: %v", shared)
	}
}
