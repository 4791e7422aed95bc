package fragment

import (
	"math"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

func room(cpu, gpus int64) resources.List {
	return resources.List{v1.ResourceCPU: cpu, GPUResource: gpus}
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
		{"shapes without weight are left out", room(92000, 7), []WorkloadShape{{Request: room(32000, 8), Weight: 0}, {Request: room(4000, 1), Weight: -1}}, 0},
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
	if free[GPUResource] != 8 {
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
		weight[s.Request[GPUResource]] = s.Weight
	}
	if weight[1] != 2 || weight[8] != 1 {
		t.Errorf("weights = %v, want 1-GPU 2 and 8-GPU 1", weight)
	}
	// An hour later every weight is half, and a new sample adds 1.
	t1 := t0.Add(time.Hour)
	h.Observe(room(32000, 8), t1)
	for _, s := range h.Workload(t1) {
		want := map[int64]float64{1: 1, 8: 1.5}[s.Request[GPUResource]]
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

// TestShapeHistoryTurnedBackOn: a history turned off and on again starts
// empty, and its weights fade at the new half-life.
func TestShapeHistoryTurnedBackOn(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	h := NewShapeHistory(time.Hour)
	h.Observe(room(4000, 1), t0)
	h.SetHalfLife(0)
	h.SetHalfLife(2 * time.Hour)
	if w := h.Workload(t0); len(w) != 0 {
		t.Fatalf("Workload = %v after turning off and on, want none", w)
	}
	h.Observe(room(4000, 1), t0)
	w := h.Workload(t0.Add(2 * time.Hour))
	if len(w) != 1 || math.Abs(w[0].Weight-0.5) > 1e-9 {
		t.Errorf("Workload a new half-life later = %v, want one shape of weight 0.5", w)
	}
}
