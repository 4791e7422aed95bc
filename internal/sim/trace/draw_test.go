package trace

import (
	"math"
	"math/rand"
	"reflect"
	"sort"
	"strings"
	"testing"
)

func openb(t *testing.T) Shapes {
	t.Helper()
	sh, err := OpenbShapes()
	if err != nil {
		t.Fatal(err)
	}
	return sh
}

// TestGenerateSeeds: one seed, one trace; another seed, another trace.
func TestGenerateSeeds(t *testing.T) {
	sh := openb(t)
	o := DefaultGenOptions
	o.Jobs = 80
	a, err := Generate(sh, o)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Generate(sh, o)
	if !reflect.DeepEqual(a, b) {
		t.Error("the same seed made two different traces")
	}
	o.Seed = 2
	c, _ := Generate(sh, o)
	if reflect.DeepEqual(a.Jobs, c.Jobs) {
		t.Error("seeds 1 and 2 made the same jobs")
	}
	if !reflect.DeepEqual(a.Nodes, c.Nodes) {
		t.Error("the nodes depend on the seed; they should only depend on the shapes")
	}
}

// TestGenerateDraws: for a fixed seed, the drawn jobs keep the options'
// promises: arrivals sorted and ending the span that makes the load,
// durations inside the clipped percentiles, queues used about evenly,
// nodes in the proportions of the shapes, grouped into leaves.
func TestGenerateDraws(t *testing.T) {
	sh := openb(t)
	o := DefaultGenOptions
	o.Jobs, o.Nodes = 400, 24
	tr, err := Generate(sh, o)
	if err != nil {
		t.Fatal(err)
	}
	if !sort.SliceIsSorted(tr.Jobs, func(i, j int) bool { return tr.Jobs[i].Arrival < tr.Jobs[j].Arrival }) {
		t.Error("arrivals are not in order")
	}
	var work float64
	for _, j := range tr.Jobs {
		work += float64(j.GPUs) * float64(j.Pods) * j.Duration
	}
	if last, span := tr.Jobs[len(tr.Jobs)-1].Arrival, math.Round(work/(float64(tr.GPUs())*o.Load)); last != span {
		t.Errorf("last arrival %v, want the span %v", last, span)
	}
	lo := math.Max(1, math.Round(percentile(sh.DurationPct, sh.Durations, o.DurationFrom)))
	hi := math.Round(percentile(sh.DurationPct, sh.Durations, o.DurationTo))
	perQueue := map[string]int{}
	for _, j := range tr.Jobs {
		if j.Duration < lo || j.Duration > hi {
			t.Errorf("%s runs %vs, outside the clip %v..%v", j.Name, j.Duration, lo, hi)
		}
		perQueue[j.Queue]++
	}
	for _, q := range o.Queues {
		if n := perQueue[q.Name]; n < o.Jobs/len(o.Queues)*3/4 || n > o.Jobs/len(o.Queues)*5/4 {
			t.Errorf("queue %s has %d of %d jobs, want about an even part (%v)", q.Name, n, o.Jobs, perQueue)
		}
	}
	// Nodes: the largest-remainder counts of the shapes, most GPUs first,
	// LeafSize to a leaf.
	counts := largestRemainder(sh.Nodes, o.Nodes)
	got := map[CountedShape]int{}
	for i, n := range tr.Nodes {
		got[CountedShape{CPUMilli: n.CPUMilli, MemoryMiB: n.MemoryMiB, GPUs: n.GPUs}]++
		if want := "leaf-" + itoa(int64(i/o.LeafSize)); n.Domains[0] != want {
			t.Errorf("node %s in %s, want %s", n.Name, n.Domains[0], want)
		}
		if i > 0 && n.GPUs > tr.Nodes[i-1].GPUs {
			t.Errorf("node %s has more GPUs than the one before it", n.Name)
		}
	}
	for i, s := range sh.Nodes {
		if k := got[CountedShape{CPUMilli: s.CPUMilli, MemoryMiB: s.MemoryMiB, GPUs: s.GPUs}]; k != counts[i] {
			t.Errorf("shape %+v: %d nodes, want %d", s, k, counts[i])
		}
	}
}

func TestGenerateOptionErrors(t *testing.T) {
	sh := openb(t)
	for _, tc := range []struct {
		name string
		edit func(o *GenOptions)
		want string
	}{
		{"no jobs", func(o *GenOptions) { o.Jobs = 0 }, "jobs and load must be > 0"},
		{"no load", func(o *GenOptions) { o.Load = 0 }, "jobs and load"},
		{"no nodes", func(o *GenOptions) { o.Nodes = 0 }, "leaf size must be > 0"},
		{"no leaf size", func(o *GenOptions) { o.LeafSize = 0 }, "leaf size must be > 0"},
		{"shares over 1", func(o *GenOptions) { o.TopologyShare, o.IBShare = 0.6, 0.5 }, "the leaf and IB shares in [0, 1] together"},
		{"negative IB leaves", func(o *GenOptions) { o.IBLeaves = -1 }, "leaves per IB cluster"},
		{"cliques without spines", func(o *GenOptions) { o.Cliques, o.SpineCliques = 2, 0 }, "cliques per spine must be > 0"},
		{"sub-group share over 1", func(o *GenOptions) { o.Cliques, o.SubGroupShare = 2, 1.5 }, "the sub-group share in [0, 1]"},
		{"nothing fits", func(o *GenOptions) { o.Nodes, o.MaxJobShare = 1, 0.0001 }, "no job shape fits this cluster of 1 nodes"},
	} {
		o := DefaultGenOptions
		tc.edit(&o)
		if _, err := Generate(sh, o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestPercentileTable(t *testing.T) {
	pct, values := []float64{10, 50, 90}, []float64{5, 60, 1000}
	for _, tc := range []struct{ p, want float64 }{
		{0, 5}, {10, 5}, {30, 5 + (30-10)/(50-10.0)*(60-5)}, {50, 60}, {70, 60 + 0.5*(1000-60)}, {90, 1000}, {99, 1000},
	} {
		if got := percentile(pct, values, tc.p); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("percentile(%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if percentile(nil, nil, 50) != 0 {
		t.Error("an empty table has a percentile")
	}
}

// TestLargestRemainderShares: the counts add up to n and each is its exact
// share rounded down or up.
func TestLargestRemainderShares(t *testing.T) {
	shapes := []CountedShape{{Count: 7}, {Count: 3}, {Count: 11}, {Count: 1}}
	sum := 22.0
	for _, n := range []int{0, 1, 5, 22, 100} {
		got := largestRemainder(shapes, n)
		total := 0
		for i, k := range got {
			exact := float64(shapes[i].Count) * float64(n) / sum
			if float64(k) < math.Floor(exact) || float64(k) > math.Ceil(exact) {
				t.Errorf("n %d: shape %d gets %d, exact %.2f", n, i, k, exact)
			}
			total += k
		}
		if total != n {
			t.Errorf("n %d: counts %v add up to %d", n, got, total)
		}
	}
	if got := largestRemainder([]CountedShape{{}, {}}, 3); got[0]+got[1] != 0 {
		t.Errorf("no counts: %v", got)
	}
}

// TestPickFrequencies: over many draws from a fixed seed, shapes and gang
// sizes come up about as often as their counts and weights say.
func TestPickFrequencies(t *testing.T) {
	const draws = 20000
	rng := rand.New(rand.NewSource(7))
	shapes := []CountedShape{{GPUs: 1, Count: 6}, {GPUs: 2, Count: 3}, {GPUs: 8, Count: 1}}
	seen := map[int64]int{}
	for range draws {
		seen[pick(rng, shapes).GPUs]++
	}
	for _, s := range shapes {
		if want := float64(draws) * float64(s.Count) / 10; math.Abs(float64(seen[s.GPUs])-want) > 0.05*draws {
			t.Errorf("shape with %d GPUs drawn %d times, want about %.0f", s.GPUs, seen[s.GPUs], want)
		}
	}
	sizes := map[int]int{}
	for range draws {
		sizes[pickGang(rng, DefaultGangMix)]++
	}
	var total float64
	for _, g := range DefaultGangMix {
		total += g.Weight
	}
	for _, g := range DefaultGangMix {
		if want := draws * g.Weight / total; math.Abs(float64(sizes[g.Size])-want) > 0.05*draws {
			t.Errorf("gang size %d drawn %d times, want about %.0f", g.Size, sizes[g.Size], want)
		}
	}
}

// TestFitsPlain: a job without sub-groups fits when its members fit one
// empty domain of its level (anywhere, without one).
func TestFitsPlain(t *testing.T) {
	tr := &Trace{Levels: []string{"leaf"}, Nodes: []TraceNode{
		{Name: "a", CPUMilli: 8000, MemoryMiB: 8192, GPUs: 4, Domains: []string{"l0"}},
		{Name: "b", CPUMilli: 8000, MemoryMiB: 8192, GPUs: 4, Domains: []string{"l1"}},
	}}
	for _, tc := range []struct {
		name string
		j    TraceJob
		want bool
	}{
		{"one node", TraceJob{Pods: 1, GPUs: 4, CPUMilli: 1000}, true},
		{"two nodes, no level", TraceJob{Pods: 2, MinMember: 2, GPUs: 4}, true},
		{"two nodes, one leaf", TraceJob{Pods: 2, MinMember: 2, GPUs: 4, Topology: "leaf"}, false},
		{"small pods in one leaf", TraceJob{Pods: 4, MinMember: 4, GPUs: 1, Topology: "leaf"}, true},
		{"memory bound", TraceJob{Pods: 3, MemoryMiB: 8192}, false},
		{"asks nothing", TraceJob{Pods: 50}, true},
	} {
		if got := tr.fits(tc.j); got != tc.want {
			t.Errorf("%s: fits = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestNumericRowsErrors(t *testing.T) {
	if _, err := numericRows([]byte("a,b\n1,x\n"), []string{"a", "b"}); err == nil || !strings.Contains(err.Error(), "line 2: b") {
		t.Errorf("bad number: %v", err)
	}
	rows, err := numericRows([]byte("a,b\n1,2.5\n"), []string{"a", "b"})
	if err != nil || !reflect.DeepEqual(rows, [][]float64{{1, 2.5}}) {
		t.Errorf("rows %v %v", rows, err)
	}
}
