package planner

import (
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

var created = time.Unix(10_000, 0)

// pod asks cpuM millicores; age orders members (older first).
func pod(name string, cpuM int64, age int) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name),
			CreationTimestamp: metav1.NewTime(created.Add(-time.Duration(age) * time.Second))},
		Spec: v1.PodSpec{Containers: []v1.Container{{Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(cpuM, resource.DecimalSI)},
		}}}},
	}
}

func names(pods []*v1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

func TestGroupPending(t *testing.T) {
	cycle := pod("cycle", 1000, 0)
	tests := []struct {
		name    string
		pending []*v1.Pod
		needed  int
		want    [][]string // members per group, in group order
	}{
		{name: "the cycle pod alone", needed: 1, want: [][]string{{"cycle"}}},
		{name: "needed below one still places the cycle pod", needed: 0, want: [][]string{{"cycle"}}},
		{
			name:    "oldest others next, up to needed",
			pending: []*v1.Pod{pod("young", 1000, 1), pod("old", 1000, 9), pod("mid", 1000, 5)},
			needed:  3,
			want:    [][]string{{"cycle", "old", "mid"}},
		},
		{
			name:    "the cycle pod is not counted twice",
			pending: []*v1.Pod{cycle, pod("a", 1000, 1)},
			needed:  5,
			want:    [][]string{{"cycle", "a"}},
		},
		{
			name:    "equal ages by name; other shapes in groups of their own, after the cycle pod's",
			pending: []*v1.Pod{pod("b", 2000, 3), pod("a", 2000, 3), pod("c", 1000, 3)},
			needed:  4,
			want:    [][]string{{"cycle", "c"}, {"a", "b"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			groups := GroupPending(cycle, tt.pending, tt.needed, nil)
			var got [][]string
			for _, g := range groups {
				if g.Rep != g.Members[0] || g.Count != len(g.Members) {
					t.Errorf("group %s: rep %s, count %d of %d members", g.Key, g.Rep.Name, g.Count, len(g.Members))
				}
				got = append(got, names(g.Members))
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("groups = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestGroupTotals(t *testing.T) {
	members := []*v1.Pod{pod("a", 1000, 0), pod("b", 3000, 0), pod("c", 1000, 0)}
	double := func(p *v1.Pod) resources.List {
		r := resources.PodRequests(p)
		r.AddScaled(r, 1)
		return r
	}
	for _, tt := range []struct {
		name       string
		demand     DemandFunc
		wantDemand int64
	}{
		{name: "containers' requests", wantDemand: 5000},
		{name: "the demand function's", demand: double, wantDemand: 10000},
	} {
		t.Run(tt.name, func(t *testing.T) {
			groups := GroupByShape(members, tt.demand)
			if len(groups) != 2 || Members(groups) != 3 {
				t.Fatalf("%d groups of %d members, want 2 of 3", len(groups), Members(groups))
			}
			if got := Demand(groups)[v1.ResourceCPU]; got != tt.wantDemand {
				t.Errorf("Demand = %d, want %d", got, tt.wantDemand)
			}
			shapes, requests := Shapes(groups)
			for i, s := range shapes {
				if s.Key != groups[i].Key || s.Count != groups[i].Count || !reflect.DeepEqual(requests[s.Key], groups[i].Request) {
					t.Errorf("shape %d = %+v, want group %s's key, count and request", i, s, groups[i].Key)
				}
			}
		})
	}
}

// capLimiter caps every node at max members, and node "tight" at one.
type capLimiter struct{ max int }

func (c capLimiter) Limit(_ *v1.Pod, node string, max int) int {
	if node == "tight" {
		return min(max, 1)
	}
	return min(max, c.max)
}

func TestLimiters(t *testing.T) {
	p := pod("p", 1000, 0)
	ls := Limiters{nil, capLimiter{max: 5}, nil, capLimiter{max: 3}}
	if got := ls.Limit(p, "any", 10); got != 3 {
		t.Errorf("Limit = %d, want the tightest (3)", got)
	}
	if got := ls.Limit(p, "tight", 10); got != 1 {
		t.Errorf("Limit on tight = %d, want 1", got)
	}
	if got := (Limiters{nil}).Limit(p, "any", 7); got != 7 {
		t.Errorf("only nil limiters: Limit = %d, want 7 unchanged", got)
	}
}

func TestCandidateNodes(t *testing.T) {
	small, big := pod("small", 1000, 0), pod("big", 3000, 0)
	cordoned := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cordoned"}, Spec: v1.NodeSpec{Unschedulable: true}}
	nodes := []NodeState{
		{Node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "fits"}}},
		{Node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "full"}}},
		{Node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "tainted"}}},
		{Node: cordoned},
		{Node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "tight"}}},
	}
	verdicts := []Verdict{{Fits: true}, {ResourceOnly: true}, {Plugin: "TaintToleration"}, {Fits: true}, {Fits: true}}
	room := func(i int) (resources.List, int64) { return cpu(8000), 10 }
	groups := GroupByShape([]*v1.Pod{small, big}, nil)
	sk, bk := groups[0].Key, groups[1].Key
	tests := []struct {
		name    string
		relaxed bool
		limiter Limiter
		want    map[string]map[string]int
	}{
		{
			name: "the cycle shape by verdict, the others by node admission",
			want: map[string]map[string]int{
				"fits": {sk: 2, bk: 2}, "full": {bk: 2}, "tainted": {bk: 2}, "cordoned": {sk: 2}, "tight": {sk: 2, bk: 2},
			},
		},
		{
			name:    "relaxed: nodes short of capacity only are candidates",
			relaxed: true,
			want: map[string]map[string]int{
				"fits": {sk: 2, bk: 2}, "full": {sk: 2, bk: 2}, "tainted": {bk: 2}, "cordoned": {sk: 2}, "tight": {sk: 2, bk: 2},
			},
		},
		{
			name:    "a limiter lowers the limit only where it is tighter",
			limiter: capLimiter{max: 9},
			want: map[string]map[string]int{
				"fits": {sk: 2, bk: 2}, "full": {bk: 2}, "tainted": {bk: 2}, "cordoned": {sk: 2}, "tight": {sk: 1, bk: 1},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := CandidateNodes(groups, nodes, verdicts, room, tt.relaxed, tt.limiter)
			got := map[string]map[string]int{}
			for i, n := range out {
				if n.Name != nodes[i].Node.Name || n.FreePods != 10 || n.Free[v1.ResourceCPU] != 8000 {
					t.Errorf("node %d = %s with %v and %d pods, want %s sized by room", i, n.Name, n.Free, n.FreePods, nodes[i].Node.Name)
				}
				got[n.Name] = n.Limit
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("limits = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCandidateNodesOnePerNodeAndSubGroups(t *testing.T) {
	w := pod("w", 1000, 0)
	w.Labels = map[string]string{"app": "w"}
	w.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
			TopologyKey: HostnameLabel, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "w"}},
		}},
	}}
	shape := ShapeKey(w)
	// Members of two sub-groups: the second takes the first's limit.
	groups := []ShapeGroup{
		{Key: SubGroupShape(shape, "0"), Rep: w, Request: cpu(1000), Count: 2, Members: []*v1.Pod{w, w}},
		{Key: SubGroupShape(shape, "1"), Rep: w, Request: cpu(1000), Count: 2, Members: []*v1.Pod{w, w}},
	}
	nodes := []NodeState{{Node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}}}, {Node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b"}}}}
	room := func(int) (resources.List, int64) { return cpu(8000), 10 }
	out := CandidateNodes(groups, nodes, []Verdict{{Fits: true}, {}}, room, false, nil)
	if want := map[string]int{groups[0].Key: 1, groups[1].Key: 1}; !reflect.DeepEqual(out[0].Limit, want) {
		t.Errorf("node a limits = %v, want one member per node for each sub-group, %v", out[0].Limit, want)
	}
	if len(out[1].Limit) != 0 {
		t.Errorf("node b limits = %v: its verdict failed, for every sub-group", out[1].Limit)
	}
}

// treeTopology: one level, "rack", by node name.
type treeTopology map[string]string

func (t treeTopology) Levels() []string { return []string{"zone", "rack"} }
func (t treeTopology) Domains(node string) []string {
	if r, ok := t[node]; ok {
		return []string{"z", r}
	}
	return []string{"", ""}
}

func TestConstrain(t *testing.T) {
	topo := treeTopology{"a": "r1", "b": "r2", "c": "r2"}
	nodesOf := func(r Request) []string {
		var out []string
		for _, n := range r.Nodes {
			out = append(out, n.Name)
		}
		return out
	}
	tests := []struct {
		name                string
		topo                Topology
		required, preferred string
		placed              []string
		wantNodes           []string
		wantLevels          []string
	}{
		{name: "no topology: the levels stay unknown", required: "rack", wantNodes: []string{"a", "b", "c", "d"}},
		{name: "levels and domains, no placed members", topo: topo, required: "rack",
			wantNodes: []string{"a", "b", "c", "d"}, wantLevels: []string{"zone", "rack"}},
		{name: "a required level keeps the placed members' domain", topo: topo, required: "rack", placed: []string{"c"},
			wantNodes: []string{"b", "c"}, wantLevels: []string{"zone", "rack"}},
		{name: "a preferred level keeps every node", topo: topo, preferred: "rack", placed: []string{"c"},
			wantNodes: []string{"a", "b", "c", "d"}, wantLevels: []string{"zone", "rack"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Request{Nodes: []Node{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}}}
			r.Constrain(tt.topo, tt.required, tt.preferred, tt.placed)
			if r.Required != tt.required || r.Preferred != tt.preferred {
				t.Errorf("constraint = %q/%q", r.Required, r.Preferred)
			}
			if got := nodesOf(r); !reflect.DeepEqual(got, tt.wantNodes) {
				t.Errorf("nodes = %v, want %v", got, tt.wantNodes)
			}
			if !reflect.DeepEqual(r.Levels, tt.wantLevels) {
				t.Errorf("levels = %v, want %v", r.Levels, tt.wantLevels)
			}
			if tt.topo != nil && !reflect.DeepEqual(r.Nodes[0].Domains, tt.topo.Domains(r.Nodes[0].Name)) {
				t.Errorf("node %s domains = %v", r.Nodes[0].Name, r.Nodes[0].Domains)
			}
		})
	}
}

func TestPlacedDomain(t *testing.T) {
	topo := treeTopology{"a": "r1", "b": "r2", "c": "r3"}
	tests := []struct {
		name     string
		topo     Topology
		required string
		placed   []string
		want     string
		wantLi   int
	}{
		{name: "no topology", required: "rack", placed: []string{"a"}, wantLi: -1},
		{name: "no required level", topo: topo, placed: []string{"a"}, wantLi: -1},
		{name: "nothing placed", topo: topo, required: "rack", wantLi: -1},
		{name: "unknown level", topo: topo, required: "spine", placed: []string{"a"}, wantLi: -1},
		{name: "unlabelled nodes only", topo: topo, required: "rack", placed: []string{"x"}, wantLi: -1},
		{name: "the first placed node by name decides", topo: topo, required: "rack", placed: []string{"c", "x", "b"}, want: "r2", wantLi: 1},
		{name: "a wider level", topo: topo, required: "zone", placed: []string{"c"}, want: "z", wantLi: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, li := PlacedDomain(tt.topo, tt.required, tt.placed)
			if got != tt.want || li != tt.wantLi {
				t.Errorf("PlacedDomain = %q, %d, want %q, %d", got, li, tt.want, tt.wantLi)
			}
		})
	}
}

func TestDescribeConstraint(t *testing.T) {
	for _, tt := range []struct{ required, preferred, want string }{
		{"rack", "zone", "required rack"},
		{"", "zone", "preferred zone"},
		{"", "", ""},
	} {
		if got := DescribeConstraint(tt.required, tt.preferred); got != tt.want {
			t.Errorf("DescribeConstraint(%q, %q) = %q, want %q", tt.required, tt.preferred, got, tt.want)
		}
	}
}
