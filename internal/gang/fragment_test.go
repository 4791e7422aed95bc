package gang

import (
	"math"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

func room(cpu, gpus int64) resources.List {
	return resources.List{v1.ResourceCPU: cpu, gpuResource: gpus}
}

func TestExpectedFragmentation(t *testing.T) {
	// Half the workload wants 1 GPU and 4 CPUs, half 8 GPUs and 32 CPUs.
	mix := []WorkloadShape{{Request: room(4000, 1), Weight: 1}, {Request: room(32000, 8), Weight: 1}}
	cases := []struct {
		name     string
		free     resources.List
		workload []WorkloadShape
		want     float64
	}{
		{"empty 8-GPU node: every shape fits", room(96000, 8), mix, 0},
		{"7 GPUs left: the 8-GPU half cannot use them", room(92000, 7), mix, 3.5},
		{"GPUs free, CPUs gone: no shape fits", room(2000, 4), mix, 4},
		{"no free GPU, nothing to fragment", room(96000, 0), mix, 0},
		{"CPU-only shapes are left out", room(2000, 4), []WorkloadShape{{Request: room(1000, 0), Weight: 5}}, 0},
		{"weights need not sum to 1", room(92000, 7), []WorkloadShape{{Request: room(4000, 1), Weight: 3}, {Request: room(32000, 8), Weight: 1}}, 7.0 / 4},
		{"no workload", room(92000, 7), nil, 0},
	}
	for _, c := range cases {
		if got := ExpectedFragmentation(c.free, c.workload); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: ExpectedFragmentation = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestFragmentationDelta(t *testing.T) {
	mix := []WorkloadShape{{Request: room(4000, 1), Weight: 1}, {Request: room(32000, 8), Weight: 1}}
	one := room(4000, 1)
	cases := []struct {
		name string
		free resources.List
		n    int64
		want float64
	}{
		// Breaking into an empty 8-GPU node leaves 7 GPUs the 8-GPU half cannot use.
		{"break an empty 8-GPU node", room(96000, 8), 1, 3.5},
		// On a node with 3 GPUs left (already useless to the 8-GPU half) one
		// more pod only shrinks what is fragmented.
		{"fill a used node", room(40000, 3), 1, -0.5},
		// Taking the last GPU leaves nothing to fragment.
		{"take the last GPU", room(40000, 1), 1, -0.5},
		{"two pods at once", room(96000, 8), 2, 3},
	}
	for _, c := range cases {
		if got := FragmentationDelta(c.free, one, c.n, mix); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: FragmentationDelta = %v, want %v", c.name, got, c.want)
		}
	}
	// The input is not modified.
	free := room(96000, 8)
	FragmentationDelta(free, one, 1, mix)
	if free[gpuResource] != 8 {
		t.Errorf("FragmentationDelta changed its input: %v", free)
	}
	// The score ranks a used node above an empty one for a 1-GPU pod.
	if FragmentationDelta(room(40000, 3), one, 1, mix) >= FragmentationDelta(room(96000, 8), one, 1, mix) {
		t.Error("an empty 8-GPU node should cost more to break into than a used one")
	}
}

func TestShapeHistory(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	h := NewShapeHistory(time.Hour)
	h.Observe(room(4000, 1), t0)
	h.Observe(room(4000, 1), t0)
	h.Observe(room(32000, 8), t0)
	h.Observe(room(1000, 0), t0) // no GPU: not counted
	got := h.Workload(t0)
	if len(got) != 2 {
		t.Fatalf("Workload = %v, want the two GPU shapes", got)
	}
	weight := map[int64]float64{}
	for _, s := range got {
		weight[s.Request[gpuResource]] = s.Weight
	}
	if weight[1] != 2 || weight[8] != 1 {
		t.Errorf("weights = %v, want 1-GPU 2 and 8-GPU 1", weight)
	}
	// An hour later every weight is half, and a new sample adds 1.
	t1 := t0.Add(time.Hour)
	h.Observe(room(32000, 8), t1)
	for _, s := range h.Workload(t1) {
		want := map[int64]float64{1: 1, 8: 1.5}[s.Request[gpuResource]]
		if math.Abs(s.Weight-want) > 1e-9 {
			t.Errorf("after a half-life: %v weighs %v, want %v", s.Request, s.Weight, want)
		}
	}

	// Bounded: the rarest shape makes room for a new one.
	h = NewShapeHistory(time.Hour)
	for i := 0; i < MaxWorkloadShapes; i++ {
		for j := 0; j <= i; j++ {
			h.Observe(room(int64(1000*(i+1)), 1), t0)
		}
	}
	h.Observe(room(999, 1), t0)
	w := h.Workload(t0)
	if len(w) != MaxWorkloadShapes {
		t.Fatalf("%d shapes kept, want %d", len(w), MaxWorkloadShapes)
	}
	for _, s := range w {
		if s.Request[v1.ResourceCPU] == 1000 {
			t.Errorf("the rarest shape (weight 1, cpu 1000m) was kept over a new one: %v", w)
		}
	}

	// Off: no half-life observes nothing; turning it off forgets.
	h.SetHalfLife(0)
	h.Observe(room(4000, 1), t0)
	if w := h.Workload(t0); w != nil {
		t.Errorf("history off: Workload = %v, want none", w)
	}
	var none *ShapeHistory
	none.Observe(room(4000, 1), t0)
	if none.Workload(t0) != nil {
		t.Error("nil history has a workload")
	}
}

// TestFillBreaksTiesByFragmentation: between nodes equally tight for the
// shape, the planner takes the one whose GPUs the placement fragments
// least; without a workload, the smallest name.
func TestFillBreaksTiesByFragmentation(t *testing.T) {
	one := room(4000, 1)
	// Both nodes take two 1-GPU members. On "a-roomy" the leftover GPU keeps
	// the CPUs a 40-CPU shape needs; on "b-starved" it never had them.
	nodes := []Node{
		{Name: "a-roomy", Free: room(64000, 2), FreePods: 10, Limit: map[string]int{"one": 10}},
		{Name: "b-starved", Free: room(8000, 2), FreePods: 10, Limit: map[string]int{"one": 10}},
	}
	workload := []WorkloadShape{{Request: room(40000, 1), Weight: 1}}
	for _, count := range []int{1, 2} {
		req := Request{Shapes: []Shape{{Key: "one", Request: one, Count: count}}, Nodes: nodes}
		plan, diag := Place(req)
		if plan == nil {
			t.Fatalf("count %d: no plan: %+v", count, diag)
		}
		if plan.Slots["a-roomy"]["one"] != count {
			t.Errorf("count %d, no workload: slots %v, want a-roomy (smallest name)", count, plan.Slots)
		}
		req.Workload = workload
		if plan, _ = Place(req); plan.Slots["b-starved"]["one"] != count {
			t.Errorf("count %d, with workload: slots %v, want b-starved (its GPUs fit no 40-CPU shape anyway)", count, plan.Slots)
		}
	}
	// Tightness still comes first: a node that takes exactly the gang wins
	// over a roomier one, whatever the fragmentation.
	tight := append([]Node{{Name: "c-tight", Free: room(96000, 3), FreePods: 10, Limit: map[string]int{"one": 10}}}, nodes[0])
	tight[1].Free = room(96000, 8)
	plan, _ := Place(Request{Shapes: []Shape{{Key: "one", Request: one, Count: 3}}, Nodes: tight, Workload: []WorkloadShape{{Request: room(1000, 3), Weight: 1}}})
	if plan == nil || plan.Slots["c-tight"]["one"] != 3 {
		t.Errorf("best fit first: slots %v, want all 3 on c-tight", plan)
	}
}
