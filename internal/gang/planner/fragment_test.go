package planner

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/gang/fragment"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

func gpuRoom(cpu, gpus int64) resources.List {
	return resources.List{v1.ResourceCPU: cpu, fragment.GPUResource: gpus}
}

// TestFillBreaksTiesByFragmentation: between nodes equally tight for the
// shape, the planner takes the one whose GPUs the placement fragments
// least; without a workload, the smallest name.
func TestFillBreaksTiesByFragmentation(t *testing.T) {
	one := gpuRoom(4000, 1)
	// Both nodes take two 1-GPU members. On "a-roomy" the leftover GPU keeps
	// the CPUs a 40-CPU shape needs; on "b-starved" it never had them.
	nodes := []Node{
		{Name: "a-roomy", Free: gpuRoom(64000, 2), FreePods: 10, Limit: map[string]int{"one": 10}},
		{Name: "b-starved", Free: gpuRoom(8000, 2), FreePods: 10, Limit: map[string]int{"one": 10}},
	}
	workload := []fragment.WorkloadShape{{Request: gpuRoom(40000, 1), Weight: 1}}
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
	tight := append([]Node{{Name: "c-tight", Free: gpuRoom(96000, 3), FreePods: 10, Limit: map[string]int{"one": 10}}}, nodes[0])
	tight[1].Free = gpuRoom(96000, 8)
	plan, _ := Place(Request{Shapes: []Shape{{Key: "one", Request: one, Count: 3}}, Nodes: tight, Workload: []fragment.WorkloadShape{{Request: gpuRoom(1000, 3), Weight: 1}}})
	if plan == nil || plan.Slots["c-tight"]["one"] != 3 {
		t.Errorf("best fit first: slots %v, want all 3 on c-tight", plan)
	}
}
