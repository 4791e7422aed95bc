package estimatorbench

import (
	"fmt"
	"testing"

	"github.com/phalanx-sched/phalanx/internal/bench"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// TestNodeRoom: node by node, the fill pod's GPUs and the room left for
// workers (8 CPU, 32Gi, 1 GPU) and single replicas (1 CPU, 4Gi, 1 GPU),
// worked out by hand from 32 CPUs, 256Gi and 8 GPUs less 2 CPUs and 16Gi
// per fill GPU.
func TestNodeRoom(t *testing.T) {
	for _, tc := range []struct{ node, gpus, workers, replicas int }{
		{0, 0, 4, 8}, // CPUs bind workers: 32/8
		{1, 5, 2, 3}, // 22 CPUs left: 2 workers; 3 GPUs left
		{2, 1, 3, 7},
		{3, 6, 2, 2}, // GPUs bind both
		{4, 2, 3, 6},
		{5, 7, 1, 1},
		{6, 3, 3, 5},
		{7, 8, 0, 0}, // every GPU taken
		{8, 4, 3, 4},
		{9, 0, 4, 8}, // the cycle of nine starts over
	} {
		if g, w, r := fillGPUs(tc.node), workerRoom(tc.node), replicaRoom(tc.node); g != tc.gpus || w != tc.workers || r != tc.replicas {
			t.Errorf("node %d: fill %d GPUs, room for %d workers, %d replicas; want %d, %d, %d", tc.node, g, w, r, tc.gpus, tc.workers, tc.replicas)
		}
	}
}

// TestBoundsSmall: the bounds on members small enough to count by hand
// (per cycle of nine nodes: 21 workers, 36 replicas).
func TestBoundsSmall(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		nodes, gang               int
		sets, setsPerIB, replicas int
	}{
		{"no nodes", 0, 4, 0, 0, 0},
		{"one cycle, 3 workers a set", 9, 4, 7, 7, 36},
		// A gang of one still asks for one worker's room.
		{"gang of one", 9, 1, 21, 21, 36},
		{"gang of two", 9, 2, 21, 21, 36},
		{"exactly one set", 9, 22, 1, 1, 36},
		{"a set too large", 9, 23, 0, 0, 36},
		// 512 nodes of ib-0 hold 1194 workers, node 512 (ib-1) 3: 1197/4
		// sets over the member, 1194/4 + 3/4 within one IB cluster each;
		// ib-0 has half its 4096 GPUs free, node 512 four.
		{"a partial second IB cluster", IBSize + 1, 5, 299, 298, 2052},
	} {
		sets, perIB, replicas := Bounds(tc.nodes, tc.gang)
		if sets != tc.sets || perIB != tc.setsPerIB || replicas != tc.replicas {
			t.Errorf("%s: Bounds(%d, %d) = %d, %d, %d; want %d, %d, %d", tc.name, tc.nodes, tc.gang, sets, perIB, replicas, tc.sets, tc.setsPerIB, tc.replicas)
		}
	}
}

// TestEstimatorNode: every node alike, labelled with its IB cluster of
// 512 and leaf of 32.
func TestEstimatorNode(t *testing.T) {
	for _, tc := range []struct {
		i        int
		ib, leaf string
	}{
		{0, "ib-0", "leaf-0"},
		{31, "ib-0", "leaf-0"},
		{32, "ib-0", "leaf-1"},
		{511, "ib-0", "leaf-15"},
		{512, "ib-1", "leaf-16"},
		{4999, "ib-9", "leaf-156"},
	} {
		n := estimatorNode(tc.i)
		want := testcluster.NodeSpec{Name: fmt.Sprintf("node-%d", tc.i), CPU: "32", Memory: "256Gi", GPUs: 8, Pods: 110, NRTPolicy: "none"}
		if n.Name != want.Name || n.CPU != want.CPU || n.Memory != want.Memory || n.GPUs != want.GPUs || n.Pods != want.Pods || n.NRTPolicy != want.NRTPolicy {
			t.Errorf("node %d = %+v, want %+v", tc.i, n, want)
		}
		if len(n.Labels) != 2 || n.Labels[bench.IBLabel] != tc.ib || n.Labels[bench.LeafLabel] != tc.leaf {
			t.Errorf("node %d labels = %v, want %s, %s", tc.i, n.Labels, tc.ib, tc.leaf)
		}
	}
}

// TestFillPod: 2 CPUs and 16Gi per GPU the pod takes, bound to its node,
// none where the node keeps all its GPUs.
func TestFillPod(t *testing.T) {
	for _, tc := range []struct {
		i           int
		cpu, memory string
		gpus        int64
	}{
		{0, "", "", 0},
		{1, "10", "80Gi", 5},
		{2, "2", "16Gi", 1},
		{7, "16", "128Gi", 8},
	} {
		pod := fillPod(tc.i)
		if tc.gpus == 0 {
			if pod != nil {
				t.Errorf("node %d: fill pod %s, want none", tc.i, pod.Name)
			}
			continue
		}
		if pod == nil {
			t.Fatalf("node %d: no fill pod, want %d GPUs", tc.i, tc.gpus)
		}
		name, node := fmt.Sprintf("fill-%d", tc.i), fmt.Sprintf("node-%d", tc.i)
		if pod.Name != name || pod.Namespace != "fill" || pod.Spec.NodeName != node {
			t.Errorf("node %d: pod %s/%s on %q, want fill/%s on %s", tc.i, pod.Namespace, pod.Name, pod.Spec.NodeName, name, node)
		}
		req := pod.Spec.Containers[0].Resources.Requests
		gpus := req[testcluster.GPU]
		if req.Cpu().String() != tc.cpu || req.Memory().String() != tc.memory || gpus.Value() != tc.gpus {
			t.Errorf("node %d: requests %v, want %s CPU, %s, %d GPUs", tc.i, req, tc.cpu, tc.memory, tc.gpus)
		}
		if lim := pod.Spec.Containers[0].Resources.Limits[testcluster.GPU]; lim.Value() != tc.gpus {
			t.Errorf("node %d: GPU limit %v, want %d (extended resources need limits)", tc.i, lim.String(), tc.gpus)
		}
	}
}
