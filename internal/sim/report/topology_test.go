package report

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/phalanx-sched/phalanx/internal/sim"
	"github.com/phalanx-sched/phalanx/internal/sim/chart"
	"github.com/phalanx-sched/phalanx/internal/sim/scenario"
)

// TestLayoutFlows: children flow into rows as wide as the box allows; a
// domain box has a header and padding, the cluster box neither.
func TestLayoutFlows(t *testing.T) {
	st := labelledCells
	domain := &topoBox{label: "rack r0"}
	for range 3 {
		domain.children = append(domain.children, &topoBox{node: &sim.NodeResult{}})
	}
	// Room for two cells a row.
	domain.layout(2*st.w+st.gap+2*st.pad, st)
	if want := 2*st.w + st.gap + 2*st.pad; domain.w != want {
		t.Errorf("width %v, want %v", domain.w, want)
	}
	if want := st.header + 2*st.h + st.gap + 2*st.pad; domain.h != want {
		t.Errorf("height %v, want %v (two rows)", domain.h, want)
	}
	third := domain.children[2]
	if third.x != st.pad || third.y != st.header+st.pad+st.h+st.gap {
		t.Errorf("third cell at %v,%v, want the start of the second row", third.x, third.y)
	}
	if second := domain.children[1]; second.x != st.pad+st.w+st.gap || second.y != st.header+st.pad {
		t.Errorf("second cell at %v,%v", second.x, second.y)
	}
	root := &topoBox{children: []*topoBox{{node: &sim.NodeResult{}}}}
	root.layout(chart.Width, st)
	if root.w != st.w || root.h != st.h || root.children[0].x != 0 || root.children[0].y != 0 {
		t.Errorf("cluster box %vx%v, cell at %v,%v: want no frame", root.w, root.h, root.children[0].x, root.children[0].y)
	}
	// child finds a box by label before it adds one.
	if a, b := root.child("x"), root.child("x"); a != b || len(root.children) != 2 {
		t.Error("child added a box twice")
	}
}

// TestTopologyMap: a box per domain of each level above the host, a cell
// per node, tainted and NUMA nodes marked, all escaped.
func TestTopologyMap(t *testing.T) {
	r := syntheticResult()
	r.Nodes[0].Name = "gpu-<0>"
	r.Jobs[0].Nodes = map[string]int{"gpu-<0>": 2, "gpu-1": 1}
	svg, tainted := topologyMap(r, "s0")
	out := string(svg)
	if !tainted {
		t.Error("the tainted node is not reported")
	}
	domains := map[string]bool{}
	for _, n := range r.Nodes {
		for _, l := range r.Scenario.Network {
			domains[l.Name+" "+n.Labels[l.NodeLabel]] = true
		}
	}
	if n := strings.Count(out, `rx="4"`); n != len(domains) {
		t.Errorf("%d domain boxes, want %d", n, len(domains))
	}
	for d := range domains {
		if !strings.Contains(out, `class="domain">`+d+"</text>") {
			t.Errorf("no box labelled %q", d)
		}
	}
	if n := strings.Count(out, `class="node"`); n != len(r.Nodes) {
		t.Errorf("%d node cells, want %d", n, len(r.Nodes))
	}
	for _, want := range []string{"gpu-&lt;0&gt;", `fill="url(#s0-tainted)"`, "2 NUMA zones", "8 GPUs", "default/train-a: 2 pods on gpu-&lt;0&gt;"} {
		if !strings.Contains(out, want) {
			t.Errorf("map lacks %q", want)
		}
	}
	if strings.Contains(out, "gpu-<0>") {
		t.Error("a node name is not escaped")
	}
}

// TestTopologyMapLarge: past 200 nodes the cells are tiny and unlabelled;
// nodes without a level's label share an "(unlabelled)" box.
func TestTopologyMapLarge(t *testing.T) {
	r := syntheticResult()
	r.Nodes = nil
	for i := range 201 {
		r.Nodes = append(r.Nodes, sim.NodeResult{Name: fmt.Sprintf("n%d", i), GPUs: 8, Labels: map[string]string{}})
	}
	svg, tainted := topologyMap(r, "s0")
	out := string(svg)
	if tainted || strings.Contains(out, `class="node"`) {
		t.Error("tiny cells are labelled, or a node is tainted")
	}
	if n := strings.Count(out, `rx="2"`); n != len(r.Nodes) {
		t.Errorf("%d cells, want %d", n, len(r.Nodes))
	}
	if n := strings.Count(out, `class="domain">`); n != len(r.Scenario.Network) || !strings.Contains(out, unlabelled) {
		t.Errorf("%d domain boxes, want one %s per level", n, unlabelled)
	}
}

var stripeRE = regexp.MustCompile(`<rect x="[0-9.]+" y="[0-9.]+" width="([0-9.]+)" height="[0-9.]+" fill="(#[0-9a-f]+)"(/?)>`)

// stripes are the widths of a node cell's usage bar (the grey rest first)
// and of its job stripes, in the jobs' order.
func stripes(t *testing.T, r *sim.Result, n *sim.NodeResult) (rest float64, jobs []float64) {
	t.Helper()
	s := &chart.SVG{W: 200, H: 100}
	drawNode(r, s, n, 0, 0, labelledCells, "none")
	for _, m := range stripeRE.FindAllStringSubmatch(string(s.HTML()), -1) {
		w, _ := strconv.ParseFloat(m[1], 64)
		if m[2] == "#ececec" {
			rest = w
		} else if m[3] == "" && m[2] != "#fff" {
			jobs = append(jobs, w)
		}
	}
	return rest, jobs
}

// TestDrawNodeStripes: a stripe is pods × max(1, GPUs) wide relative to the
// node's GPUs (its pods, on a CPU node), scaled to fit when jobs took turns.
func TestDrawNodeStripes(t *testing.T) {
	job := func(name string, gpus int64, pods int) *sim.JobResult {
		return &sim.JobResult{Job: scenario.Job{Name: name, GPUs: gpus, Replicas: pods}, Nodes: map[string]int{"n": pods}}
	}
	for _, tc := range []struct {
		name  string
		node  sim.NodeResult
		jobs  []*sim.JobResult
		parts []float64 // of the bar
	}{
		{"half the GPUs", sim.NodeResult{Name: "n", GPUs: 8}, []*sim.JobResult{job("a", 2, 2)}, []float64{0.5}},
		{"a CPU pod counts as one", sim.NodeResult{Name: "n", GPUs: 8}, []*sim.JobResult{job("a", 4, 1), job("b", 0, 2)}, []float64{0.5, 0.25}},
		{"CPU node by pods", sim.NodeResult{Name: "n", CPU: 4000}, []*sim.JobResult{job("a", 0, 2), job("b", 0, 1)}, []float64{2.0 / 3, 1.0 / 3}},
		{"turns scaled to fit", sim.NodeResult{Name: "n", GPUs: 8}, []*sim.JobResult{job("a", 4, 2), job("b", 8, 1)}, []float64{0.5, 0.5}},
		{"nothing ran", sim.NodeResult{Name: "n", GPUs: 8}, nil, nil},
	} {
		r := &sim.Result{Scenario: &scenario.Scenario{Name: "x"}, Jobs: tc.jobs}
		rest, got := stripes(t, r, &tc.node)
		if rest == 0 || len(got) != len(tc.parts) {
			t.Fatalf("%s: bar %v, stripes %v", tc.name, rest, got)
		}
		for i, p := range tc.parts {
			if math.Abs(got[i]-p*rest) > 0.1 {
				t.Errorf("%s: stripe %d is %.1f of %.1f, want %.0f%%", tc.name, i, got[i], rest, p*100)
			}
		}
	}
}
