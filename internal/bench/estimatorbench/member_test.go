package estimatorbench

import (
	"testing"
)

// TestEstimatorBounds checks the member the estimator bench builds: half
// its GPUs taken, and the answers' bounds counted by hand for 5000 nodes.
func TestEstimatorBounds(t *testing.T) {
	used, pods := 0, 0
	for i := range 5000 {
		used += fillGPUs(i)
		if p := fillPod(i); p != nil {
			pods++
			if p.Spec.NodeName != estimatorNode(i).Name {
				t.Fatalf("fill pod %s on %q", p.Name, p.Spec.NodeName)
			}
		}
	}
	if used != 19994 || pods != 4444 {
		t.Errorf("fill: %d GPUs in %d pods, want 19994 in 4444", used, pods)
	}
	// Workers per node by GPUs taken (0..8): 4 3 3 3 3 2 2 1 0, 21 per 9
	// nodes; 555 cycles and nodes taking 0, 5, 1, 6, 2 GPUs: 11669 workers.
	sets, perIB, replicas := Bounds(5000, 1024)
	if sets != 11669/1023 || perIB != 9 || replicas != 40000-19994 {
		t.Errorf("bounds = %d sets, %d within one IB cluster each, %d replicas; want %d, 9 (the partial tenth IB cluster holds none), %d",
			sets, perIB, replicas, 11669/1023, 40000-19994)
	}
}
