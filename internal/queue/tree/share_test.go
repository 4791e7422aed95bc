package tree

import (
	"math"
	"math/rand"
	"reflect"
	"sort"
	"testing"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

func TestDeserved(t *testing.T) {
	with := func(qq Queue, g, c resources.List) Queue { qq.Guarantee, qq.Capability = g, c; return qq }
	cases := []struct {
		name   string
		queues []Queue
		total  resources.List
		demand map[string]resources.List
		want   map[string]resources.List
	}{
		{
			name:   "reference: weights 1 and 2 split 6 pods of 500m",
			queues: []Queue{q("a", "", 1), q("b", "", 2)},
			total:  cpu(3000),
			demand: map[string]resources.List{"a": cpu(3000), "b": cpu(3000)},
			want:   map[string]resources.List{"a": cpu(1000), "b": cpu(2000)},
		},
		{
			name:   "demand cap redistributes the excess by weight",
			queues: []Queue{q("a", "", 1), q("b", "", 1), q("c", "", 2)},
			total:  cpu(4000),
			demand: map[string]resources.List{"a": cpu(400), "b": cpu(9000), "c": cpu(9000)},
			want:   map[string]resources.List{"a": cpu(400), "b": cpu(1200), "c": cpu(2400)},
		},
		{
			name:   "everyone capped by demand leaves the rest undistributed",
			queues: []Queue{q("a", "", 1), q("b", "", 1)},
			total:  cpu(4000),
			demand: map[string]resources.List{"a": cpu(100), "b": cpu(200)},
			want:   map[string]resources.List{"a": cpu(100), "b": cpu(200)},
		},
		{
			name:   "capability cap",
			queues: []Queue{with(q("a", "", 3), nil, cpu(1000)), q("b", "", 1)},
			total:  cpu(8000),
			demand: map[string]resources.List{"a": cpu(8000), "b": cpu(8000)},
			want:   map[string]resources.List{"a": cpu(1000), "b": cpu(7000)},
		},
		{
			name:   "guarantee floor beats weight",
			queues: []Queue{with(q("a", "", 1), cpu(2500), nil), q("b", "", 3)},
			total:  cpu(4000),
			demand: map[string]resources.List{"a": cpu(4000), "b": cpu(4000)},
			want:   map[string]resources.List{"a": cpu(2500), "b": cpu(1500)},
		},
		{
			name:   "guarantee below weighted share changes nothing",
			queues: []Queue{with(q("a", "", 1), cpu(500), nil), q("b", "", 1)},
			total:  cpu(4000),
			demand: map[string]resources.List{"a": cpu(4000), "b": cpu(4000)},
			want:   map[string]resources.List{"a": cpu(2000), "b": cpu(2000)},
		},
		{
			name:   "guarantee is held even without demand",
			queues: []Queue{with(q("a", "", 1), cpu(1000), nil), q("b", "", 1)},
			total:  cpu(4000),
			demand: map[string]resources.List{"b": cpu(4000)},
			want:   map[string]resources.List{"a": cpu(1000), "b": cpu(3000)},
		},
		{
			name:   "total below guarantees is split by weight up to them",
			queues: []Queue{with(q("a", "", 1), cpu(3000), nil), with(q("b", "", 1), cpu(3000), nil), q("c", "", 5)},
			total:  cpu(2000),
			demand: map[string]resources.List{"a": cpu(9000), "b": cpu(9000), "c": cpu(9000)},
			want:   map[string]resources.List{"a": cpu(1000), "b": cpu(1000), "c": cpu(0)},
		},
		{
			name: "parent capability caps children together; children split by weight",
			queues: []Queue{
				with(q("research", "", 1), nil, cpu(3000)), q("r1", "research", 1), q("r2", "research", 2),
				q("ops", "", 1),
			},
			total:  cpu(10000),
			demand: map[string]resources.List{"r1": cpu(10000), "r2": cpu(10000), "ops": cpu(10000)},
			want: map[string]resources.List{
				"research": cpu(3000), "r1": cpu(1000), "r2": cpu(2000), "ops": cpu(7000),
			},
		},
		{
			name: "inner demand is the sum of its leaves; child excess goes to sibling",
			queues: []Queue{
				q("research", "", 1), q("r1", "research", 1), q("r2", "research", 1),
				q("ops", "", 1),
			},
			total:  cpu(12000),
			demand: map[string]resources.List{"r1": cpu(1000), "r2": cpu(3000), "ops": cpu(20000), "research": cpu(99999)},
			want: map[string]resources.List{
				"research": cpu(4000), "r1": cpu(1000), "r2": cpu(3000), "ops": cpu(8000),
			},
		},
		{
			name: "child guarantee raises the parent's floor",
			queues: []Queue{
				q("research", "", 1), with(q("r1", "research", 1), cpu(6000), nil), q("r2", "research", 1),
				q("ops", "", 1),
			},
			total:  cpu(8000),
			demand: map[string]resources.List{"r1": cpu(8000), "r2": cpu(8000), "ops": cpu(8000)},
			want: map[string]resources.List{
				"research": cpu(6000), "r1": cpu(6000), "r2": cpu(0), "ops": cpu(2000),
			},
		},
		{
			name:   "multi-resource: cpu and gpu are independent",
			queues: []Queue{with(q("a", "", 1), nil, resources.List{gpu: 2}), q("b", "", 1)},
			total:  cpuGPU(8000, 8),
			demand: map[string]resources.List{"a": cpuGPU(8000, 8), "b": cpuGPU(1000, 8)},
			want:   map[string]resources.List{"a": cpuGPU(7000, 2), "b": cpuGPU(1000, 6)},
		},
		{
			name:   "rounding keeps the sum at the total",
			queues: []Queue{q("a", "", 1), q("b", "", 1), q("c", "", 1)},
			total:  cpu(1000),
			demand: map[string]resources.List{"a": cpu(1000), "b": cpu(1000), "c": cpu(1000)},
			want:   map[string]resources.List{"a": cpu(334), "b": cpu(333), "c": cpu(333)},
		},
		{
			name:   "resource absent from total is zero",
			queues: []Queue{q("a", "", 1)},
			total:  cpu(1000),
			demand: map[string]resources.List{"a": cpuGPU(500, 4)},
			want:   map[string]resources.List{"a": cpu(500)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := mustBuild(t, tc.queues...)
			got := tr.Deserved(tc.total, tc.demand)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Deserved = %v\nwant       %v", got, tc.want)
			}
		})
	}
}

func TestDeservedLargeAmountsDoNotOverflow(t *testing.T) {
	const mem = "memory"
	tr := mustBuild(t, q("a", "", math.MaxInt32), q("b", "", 1))
	total := resources.List{mem: 1 << 60}
	got := tr.Deserved(total, map[string]resources.List{"a": total, "b": total})
	a, b := got["a"][mem], got["b"][mem]
	if a+b != 1<<60 || b <= 0 || a < b*(math.MaxInt32-1) {
		t.Errorf("deserved a=%d b=%d", a, b)
	}
}

// TestFillProperties checks the water-filling optimality conditions on random
// inputs: bounds hold, the amount is used up to the ceilings, and no claimant
// below its ceiling has a smaller share per weight than one above its floor.
func TestFillProperties(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	for it := 0; it < 2000; it++ {
		n := 1 + r.Intn(6)
		w, lo, hi := make([]int64, n), make([]int64, n), make([]int64, n)
		var sumLo, sumHi int64
		for i := range w {
			w[i] = 1 + r.Int63n(5)
			lo[i] = r.Int63n(3) * r.Int63n(1000)
			hi[i] = lo[i] + r.Int63n(3)*r.Int63n(3000)
			sumLo += lo[i]
			sumHi += hi[i]
		}
		amount := r.Int63n(sumHi + 2000)
		x := fill(amount, w, lo, hi)
		if amount < sumLo {
			hi, lo = lo, make([]int64, n)
			sumHi = sumLo
		}
		var sum int64
		for i := range x {
			if x[i] < lo[i] || x[i] > hi[i] {
				t.Fatalf("x=%v outside [%v,%v] (amount %d, w %v)", x, lo, hi, amount, w)
			}
			sum += x[i]
		}
		if sum != min(amount, sumHi) {
			t.Fatalf("sum %d, want %d (x=%v amount %d lo %v hi %v w %v)", sum, min(amount, sumHi), x, amount, lo, hi, w)
		}
		for i := range x {
			for j := range x {
				// i could take more, j could give: i's level must not be below j's
				// by more than rounding.
				if x[i] < hi[i] && x[j] > lo[j] && (x[i]+1)*w[j] < (x[j]-1)*w[i] {
					t.Fatalf("not water-filled: x=%v w=%v lo=%v hi=%v amount=%d (i=%d j=%d)", x, w, lo, hi, amount, i, j)
				}
			}
		}
	}
}

func TestShareOrdering(t *testing.T) {
	tr := mustBuild(t, q("a", "", 1), q("b", "", 2), q("c", "", 1), q("idle", "", 1), q("nodeserve", "", 1))
	deserved := map[string]resources.List{
		"a": cpuGPU(4000, 4), "b": cpuGPU(4000, 4), "c": cpuGPU(4000, 4), "idle": cpu(4000), "nodeserve": cpu(0),
	}
	allocated := map[string]resources.List{
		"a":         cpuGPU(1000, 3), // dominant gpu 0.75
		"b":         cpuGPU(4000, 0), // dominant cpu 1.0 (weight is already in deserved)
		"c":         cpuGPU(2000, 1), // 0.5
		"nodeserve": cpu(1),          // +Inf
	}
	share := func(n string) float64 { return tr.Share(n, allocated, deserved) }
	if got := share("a"); got != 0.75 {
		t.Errorf("share(a) = %v", got)
	}
	if got := share("b"); got != 1 {
		t.Errorf("share(b) = %v", got)
	}
	if got := share("idle"); got != 0 {
		t.Errorf("share(idle) = %v", got)
	}
	if got := share("nodeserve"); !math.IsInf(got, 1) {
		t.Errorf("share(nodeserve) = %v", got)
	}
	if got := share("unknown"); !math.IsInf(got, 1) {
		t.Errorf("share(unknown) = %v", got)
	}
	names := []string{"nodeserve", "a", "b", "idle", "c"}
	sort.SliceStable(names, func(i, j int) bool { return tr.Compare(names[i], names[j], allocated, deserved) < 0 })
	if want := []string{"idle", "c", "a", "b", "nodeserve"}; !reflect.DeepEqual(names, want) {
		t.Errorf("order = %v, want %v", names, want)
	}
}

func TestCompareHierarchical(t *testing.T) {
	// team-x is barely used, but its department is far above its deserved:
	// the team under the starved department goes first.
	tr := mustBuild(t, q("busy", "", 1), q("team-x", "busy", 1), q("team-y", "busy", 1),
		q("quiet", "", 1), q("team-z", "quiet", 1))
	deserved := map[string]resources.List{
		"busy": cpu(4000), "team-x": cpu(2000), "team-y": cpu(2000),
		"quiet": cpu(4000), "team-z": cpu(4000),
	}
	allocated := map[string]resources.List{"team-x": cpu(200), "team-y": cpu(7800), "team-z": cpu(2000)}
	if tr.Share("team-x", allocated, deserved) >= tr.Share("team-z", allocated, deserved) {
		t.Fatal("setup: team-x should have the lower leaf share")
	}
	if c := tr.Compare("team-z", "team-x", allocated, deserved); c != -1 {
		t.Errorf("Compare(team-z, team-x) = %d, want -1", c)
	}
	if c := tr.Compare("team-x", "team-y", allocated, deserved); c != -1 {
		t.Errorf("siblings: Compare(team-x, team-y) = %d, want -1", c)
	}
	if c := tr.Compare("ghost", "team-y", allocated, deserved); c != 1 {
		t.Errorf("unknown queue should go last, got %d", c)
	}
}

func TestRecentWeights(t *testing.T) {
	for _, tc := range []struct {
		name string
		w, u []int64
		want []float64 // parts of the total
	}{
		{"no usage: weights unchanged", []int64{1, 3}, []int64{0, 0}, []float64{0.25, 0.75}},
		{"usage as weights: unchanged", []int64{1, 3}, []int64{10, 30}, []float64{0.25, 0.75}},
		{"one used all: floored at a tenth", []int64{1, 1}, []int64{16, 0}, []float64{0.05 / 1.05, 1 / 1.05}},
		{"one used a quarter of an equal split", []int64{1, 1}, []int64{1, 3}, []float64{0.75, 0.25}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := recentWeights(tc.w, tc.u)
			var sum float64
			for _, v := range got {
				sum += float64(v)
			}
			for i := range got {
				if p := float64(got[i]) / sum; math.Abs(p-tc.want[i]) > 1e-4 {
					t.Errorf("part %d = %.4f, want %.4f (weights %v)", i, p, tc.want[i], got)
				}
			}
		})
	}
}
