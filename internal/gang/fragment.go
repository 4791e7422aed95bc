package gang

import (
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Fragmentation-aware GPU placement (issue 21), after FGD (Weng et al.,
// "Beware of Fragmentation", USENIX ATC '23): a node's GPUs are fragmented
// for a pod shape when the node has free GPUs but the shape does not fit
// there (too few GPUs, or no CPU or memory left beside them). Over the
// workload's shape distribution, a node's expected fragmentation is
//
//	F(node) = Σ_m p_m · (free GPUs of the node, if shape m does not fit it; else 0)
//
// and placing a pod should increase the cluster's expected fragmentation as
// little as possible: FragmentationDelta is F after the placement minus F
// before, on the one node that changes. Filling a half-used node up (its
// leftovers were unusable anyway) costs little; breaking into an empty
// 8-GPU node that the workload's 8-GPU pods need costs the most. Whole GPUs
// only: phalanx schedules nvidia.com/gpu as integers, so FGD's partial-GPU
// term does not arise.
//
// Nothing calls it yet; the planner's tie-break is where it belongs (see
// docs/simulator.md and the issue).

// WorkloadShape is one pod shape of the expected workload and its weight
// (its frequency; weights need not sum to 1).
type WorkloadShape struct {
	Request resources.List
	Weight  float64
}

// gpuResource is the resource whose fragmentation is measured.
const gpuResource = "nvidia.com/gpu"

// ExpectedFragmentation is F(node) for a node with free resources, over
// the workload (weights normalised). Shapes that ask for no GPU are left
// out: they cannot use GPUs, so they neither fragment nor defragment them.
func ExpectedFragmentation(free resources.List, workload []WorkloadShape) float64 {
	gpus := free[gpuResource]
	if gpus <= 0 {
		return 0
	}
	var sum, frag float64
	for _, m := range workload {
		if m.Weight <= 0 || m.Request[gpuResource] <= 0 {
			continue
		}
		sum += m.Weight
		if !free.Fits(m.Request) {
			frag += m.Weight * float64(gpus)
		}
	}
	if sum == 0 {
		return 0
	}
	return frag / sum
}

// FragmentationDelta is how much placing n pods of request on a node with
// free resources raises its expected fragmentation (negative: lowers it).
// Smaller is better; the planner would prefer, among nodes of equal
// capacity for the shape, the one with the smallest delta.
func FragmentationDelta(free, request resources.List, n int64, workload []WorkloadShape) float64 {
	after := free.Clone()
	after.AddScaled(request, -n)
	return ExpectedFragmentation(after, workload) - ExpectedFragmentation(free, workload)
}
