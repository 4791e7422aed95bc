package gang

import (
	"math"
	"testing"

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
