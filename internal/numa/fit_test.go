package numa

import (
	"fmt"
	"reflect"
	"sort"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

const (
	cpu = v1.ResourceCPU
	mem = v1.ResourceMemory
)

// zn is a zone with the given allocatable and available amounts.
func zn(name string, alloc, avail resources.List) Zone {
	return Zone{Name: name, Allocatable: alloc, Available: avail}
}

// gpuZones is a node with one 4-GPU, 16-CPU, 64Gi zone per entry of free,
// free[i] GPUs available in zone i (all CPU and memory available).
func gpuZones(policy Policy, scope Scope, free ...int64) *Node {
	n := &Node{Name: "n", Policy: policy, Scope: scope}
	for i, f := range free {
		n.Zones = append(n.Zones, zn("node-"+string(rune('0'+i)),
			resources.List{gpu: 4, cpu: 16000, mem: 64 * gi},
			resources.List{gpu: f, cpu: 16000, mem: 64 * gi}))
	}
	return n
}

func gpus(name, n string) v1.Container { return limitsOnly(name, "nvidia.com/gpu", n) }

func TestFit(t *testing.T) {
	// The 4-GPU, 16-CPU, 32Gi Guaranteed training pod.
	train := podOf(guaranteed("train", "cpu", "16", "memory", "32Gi", "nvidia.com/gpu", "4"))
	trainAlloc := resources.List{gpu: 4, cpu: 16000, mem: 32 * gi}
	threeZones := &Node{Name: "n", Policy: SingleNUMANode, Scope: Container, Zones: []Zone{
		zn("node-0", resources.List{gpu: 4, cpu: 16000, mem: 64 * gi}, resources.List{gpu: 4, cpu: 8000, mem: 64 * gi}),
		zn("node-1", resources.List{gpu: 4, cpu: 16000, mem: 64 * gi}, resources.List{gpu: 2, cpu: 16000, mem: 64 * gi}),
		zn("node-2", resources.List{gpu: 4, cpu: 16000, mem: 64 * gi}, resources.List{gpu: 4, cpu: 16000, mem: 64 * gi}),
	}}
	twoZones := &Node{Name: "n", Policy: SingleNUMANode, Scope: Container, Zones: threeZones.Zones[:2]}
	withPolicy := func(n *Node, p Policy, s Scope) *Node {
		c := *n
		c.Policy, c.Scope = p, s
		return &c
	}
	twoByTwo := podOf(gpus("a", "2"), gpus("b", "2"))
	twoByFour := podOf(gpus("a", "4"), gpus("b", "4"))

	cases := []struct {
		name    string
		node    *Node
		pod     *v1.Pod
		charged map[string]resources.List
		want    []Allocation
		reason  string // "" means ok
	}{
		{name: "fits only the zone with GPUs and CPUs free", node: threeZones, pod: train,
			want: []Allocation{{Zone: "node-2", Request: trainAlloc, Unit: "train"}}},
		{name: "no zone has both free", node: twoZones, pod: train,
			reason: `no NUMA zone has 4 nvidia.com/gpu, 16 cpu and 32Gi memory free for container "train" (zones: node-0: 4 nvidia.com/gpu, 8 cpu, 64Gi memory; node-1: 2 nvidia.com/gpu, 16 cpu, 64Gi memory)`},
		{name: "charged usage prevents double-booking", node: threeZones, pod: train,
			charged: map[string]resources.List{"node-2": {gpu: 1}, "node-9": {gpu: 4}},
			reason:  `no NUMA zone has 4 nvidia.com/gpu, 16 cpu and 32Gi memory free for container "train" (zones: node-0: 4 nvidia.com/gpu, 8 cpu, 64Gi memory; node-1: 2 nvidia.com/gpu, 16 cpu, 64Gi memory; node-2: 3 nvidia.com/gpu, 16 cpu, 64Gi memory)`},
		{name: "negative charged usage (released) frees capacity", node: threeZones, pod: train,
			charged: map[string]resources.List{"node-0": {cpu: -8000}},
			want:    []Allocation{{Zone: "node-0", Request: trainAlloc, Unit: "train"}}},
		{name: "container scope: two containers in different zones", node: gpuZones(SingleNUMANode, Container, 4, 4), pod: twoByFour,
			want: []Allocation{{Zone: "node-0", Request: resources.List{gpu: 4}, Unit: "a"}, {Zone: "node-1", Request: resources.List{gpu: 4}, Unit: "b"}}},
		{name: "container scope: both containers in the lowest zone", node: gpuZones(SingleNUMANode, Container, 4, 4), pod: twoByTwo,
			want: []Allocation{{Zone: "node-0", Request: resources.List{gpu: 2}, Unit: "a"}, {Zone: "node-0", Request: resources.List{gpu: 2}, Unit: "b"}}},
		{name: "container scope: second container finds no zone", node: gpuZones(SingleNUMANode, Container, 4, 3), pod: twoByFour,
			reason: `no NUMA zone has 4 nvidia.com/gpu free for container "b" (zones: node-0: 0 nvidia.com/gpu; node-1: 3 nvidia.com/gpu)`},
		{name: "pod scope: the sum must fit one zone", node: gpuZones(SingleNUMANode, Pod, 4, 4), pod: twoByFour,
			reason: `the pod needs 8 nvidia.com/gpu, more than any NUMA zone has allocatable (zones: node-0: 4 nvidia.com/gpu; node-1: 4 nvidia.com/gpu)`},
		{name: "pod scope: the sum fits one zone", node: gpuZones(SingleNUMANode, Pod, 3, 4), pod: twoByTwo,
			want: []Allocation{{Zone: "node-1", Request: resources.List{gpu: 4}}}},
		{name: "pod scope: no zone has the sum free", node: gpuZones(SingleNUMANode, Pod, 3, 3), pod: twoByTwo,
			reason: `no NUMA zone has 4 nvidia.com/gpu free for the pod (zones: node-0: 3 nvidia.com/gpu; node-1: 3 nvidia.com/gpu)`},
		{name: "none always fits", node: withPolicy(twoZones, None, Container), pod: twoByFour},
		{name: "best-effort always fits", node: withPolicy(twoZones, BestEffort, Pod), pod: twoByFour},
		{name: "empty policy is none", node: withPolicy(twoZones, "", ""), pod: twoByFour},
		{name: "pod without aligned resources fits", node: gpuZones(SingleNUMANode, Container, 0, 0),
			pod: podOf(requestsOnly("c", "cpu", "64", "memory", "1Ti"))},
		{name: "resources no zone reports are not NUMA-bound", node: gpuZones(SingleNUMANode, Container, 0, 1),
			pod:  podOf(limitsOnly("c", "nvidia.com/gpu", "1", "example.com/fpga", "8")),
			want: []Allocation{{Zone: "node-1", Request: resources.List{gpu: 1}, Unit: "c"}}},
		{name: "fractional guaranteed cpu: only memory is bound", node: twoZones,
			pod:  podOf(guaranteed("c", "cpu", "15500m", "memory", "64Gi")),
			want: []Allocation{{Zone: "node-0", Request: resources.List{mem: 64 * gi}, Unit: "c"}}},
		{name: "restricted: fits one zone's allocatable, so must fit one zone's free", node: gpuZones(Restricted, Container, 2, 2),
			pod:    podOf(gpus("c", "3")),
			reason: `no NUMA zone has 3 nvidia.com/gpu free for container "c" (zones: node-0: 2 nvidia.com/gpu; node-1: 2 nvidia.com/gpu)`},
		{name: "restricted: spans the fewest zones, lowest first", node: gpuZones(Restricted, Container, 4, 2, 4), pod: podOf(gpus("c", "6")),
			want: []Allocation{{Zone: "node-0", Request: resources.List{gpu: 4}, Unit: "c"}, {Zone: "node-1", Request: resources.List{gpu: 2}, Unit: "c"}}},
		{name: "restricted: no two zones have it free", node: gpuZones(Restricted, Container, 3, 2, 2), pod: podOf(gpus("c", "6")),
			reason: `no 2 NUMA zones together have 6 nvidia.com/gpu free for container "c" (zones: node-0: 3 nvidia.com/gpu; node-1: 2 nvidia.com/gpu; node-2: 2 nvidia.com/gpu)`},
		{name: "restricted: more than the node", node: gpuZones(Restricted, Pod, 4, 4), pod: podOf(gpus("c", "9")),
			reason: `the pod needs 9 nvidia.com/gpu, more than all NUMA zones together have allocatable (zones: node-0: 4 nvidia.com/gpu; node-1: 4 nvidia.com/gpu)`},
		{name: "single-numa-node never spans zones", node: gpuZones(SingleNUMANode, Container, 4, 4, 4), pod: podOf(gpus("c", "6")),
			reason: `container "c" needs 6 nvidia.com/gpu, more than any NUMA zone has allocatable (zones: node-0: 4 nvidia.com/gpu; node-1: 4 nvidia.com/gpu; node-2: 4 nvidia.com/gpu)`},
		{name: "init container is checked, released, and not charged", node: gpuZones(SingleNUMANode, Container, 4, 0),
			pod: withInit(podOf(gpus("app", "4")), gpus("init", "4")),
			want: []Allocation{{Zone: "node-0", Request: resources.List{gpu: 4}, Unit: "init", Transient: true},
				{Zone: "node-0", Request: resources.List{gpu: 4}, Unit: "app"}}},
		{name: "sidecar stays: init and app go elsewhere", node: gpuZones(SingleNUMANode, Container, 4, 4),
			pod: withInit(podOf(gpus("app", "4")), sidecar(gpus("side", "2")), gpus("init", "4")),
			want: []Allocation{{Zone: "node-0", Request: resources.List{gpu: 2}, Unit: "side"},
				{Zone: "node-1", Request: resources.List{gpu: 4}, Unit: "init", Transient: true},
				{Zone: "node-1", Request: resources.List{gpu: 4}, Unit: "app"}}},
		{name: "init container too big", node: gpuZones(SingleNUMANode, Container, 4, 3),
			pod:    withInit(podOf(gpus("app", "1")), sidecar(gpus("side", "1")), gpus("init", "4")),
			reason: `no NUMA zone has 4 nvidia.com/gpu free for init container "init" (zones: node-0: 3 nvidia.com/gpu; node-1: 3 nvidia.com/gpu)`},
		{name: "pod scope: init peak checked, running phase held", node: gpuZones(SingleNUMANode, Pod, 2, 4),
			pod:  withInit(podOf(gpus("app", "1")), gpus("init", "3")),
			want: []Allocation{{Zone: "node-1", Request: resources.List{gpu: 1}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, reason := tc.node.Fit(tc.pod, tc.charged)
			if tc.reason != "" {
				if ok || reason != tc.reason || got != nil {
					t.Fatalf("got ok=%v %+v reason\n  %q\nwant\n  %q", ok, got, reason, tc.reason)
				}
				return
			}
			if !ok || reason != "" {
				t.Fatalf("got ok=%v reason %q, want a fit", ok, reason)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("assignment:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// The kubelet takes the lowest-numbered zone that fits, not the fullest:
// accounting built on its choice rejects a pod that best-fit accounting would
// wrongly admit.
func TestFitFollowsKubeletChoice(t *testing.T) {
	node := gpuZones(SingleNUMANode, Container, 4, 2)
	small, big := podOf(gpus("c", "2")), podOf(gpus("c", "4"))

	got, ok, _ := node.Fit(small, nil)
	if !ok || len(got) != 1 || got[0].Zone != "node-0" {
		t.Fatalf("kubelet order: got %+v ok=%v, want node-0", got, ok)
	}
	if _, ok, _ := node.Fit(big, Usage(got)); ok {
		t.Fatal("4-GPU pod admitted after the 2-GPU pod took node-0: the kubelet would reject it")
	}

	bf := *node
	bf.Choice = BestFit
	got, ok, _ = bf.Fit(small, nil)
	if !ok || len(got) != 1 || got[0].Zone != "node-1" {
		t.Fatalf("best fit: got %+v ok=%v, want node-1 (the fullest zone that fits)", got, ok)
	}
	// Best fit over zone sets (restricted, 2 zones): the pair left fullest.
	r := gpuZones(Restricted, Container, 4, 4, 3, 3)
	r.Choice = BestFit
	got, ok, _ = r.Fit(podOf(gpus("c", "6")), nil)
	if !ok || len(got) != 2 || got[0].Zone != "node-2" || got[1].Zone != "node-3" {
		t.Fatalf("best fit pair: got %+v ok=%v, want node-2 + node-3", got, ok)
	}
	r.Choice = KubeletOrder
	got, _, _ = r.Fit(podOf(gpus("c", "6")), nil)
	if len(got) != 2 || got[0].Zone != "node-0" || got[1].Zone != "node-1" {
		t.Fatalf("kubelet order pair: got %+v, want node-0 + node-1", got)
	}
}

func TestFitZoneOrderIsNUMAOrder(t *testing.T) {
	// Zones given out of order; node-2 must be preferred over node-10.
	n := &Node{Policy: SingleNUMANode, Zones: []Zone{
		zn("node-10", resources.List{gpu: 4}, resources.List{gpu: 4}),
		zn("node-2", resources.List{gpu: 4}, resources.List{gpu: 4}),
	}}
	got, ok, _ := n.Fit(podOf(gpus("c", "1")), nil)
	if !ok || got[0].Zone != "node-2" {
		t.Fatalf("got %+v, want node-2", got)
	}
}

func TestUsage(t *testing.T) {
	got := Usage([]Allocation{
		{Zone: "node-0", Request: resources.List{gpu: 2}, Unit: "side"},
		{Zone: "node-1", Request: resources.List{gpu: 4}, Unit: "init", Transient: true},
		{Zone: "node-0", Request: resources.List{gpu: 1, cpu: 2000}, Unit: "app"},
	})
	want := map[string]resources.List{"node-0": {gpu: 3, cpu: 2000}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestCopies(t *testing.T) {
	node := gpuZones(SingleNUMANode, Container, 4, 4)
	cases := []struct {
		name    string
		node    *Node
		pod     *v1.Pod
		charged map[string]resources.List
		max     int
		want    int
	}{
		{"4-GPU pods: one per zone", node, podOf(gpus("c", "4")), nil, 10, 2},
		{"8-GPU pod: none", node, podOf(gpus("c", "8")), nil, 10, 0},
		{"2-GPU pods: two per zone", node, podOf(gpus("c", "2")), nil, 10, 4},
		{"capped at max", node, podOf(gpus("c", "2")), nil, 3, 3},
		{"max 0", node, podOf(gpus("c", "2")), nil, 0, 0},
		{"charged usage counts", node, podOf(gpus("c", "4")), map[string]resources.List{"node-0": {gpu: 1}}, 10, 1},
		{"charged usage counts for small pods", node, podOf(gpus("c", "2")), map[string]resources.List{"node-0": {gpu: 1}}, 10, 3},
		{"containers of a copy share a zone", node, podOf(gpus("a", "3"), gpus("b", "1")), nil, 10, 2},
		{"containers of a copy split across zones", node, podOf(gpus("a", "3"), gpus("b", "2")), nil, 10, 1},
		{"pod scope sums", gpuZones(SingleNUMANode, Pod, 4, 4), podOf(gpus("a", "3"), gpus("b", "2")), nil, 10, 0},
		{"restricted spanning pods", gpuZones(Restricted, Container, 4, 4, 4, 4), podOf(gpus("c", "6")), nil, 10, 2},
		{"none: no NUMA limit", gpuZones(None, Container, 4, 4), podOf(gpus("c", "8")), nil, 7, 7},
		{"no aligned resources: no NUMA limit", node, podOf(requestsOnly("c", "cpu", "1")), nil, 7, 7},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.node.Copies(tc.pod, tc.charged, tc.max); got != tc.want {
				t.Fatalf("Copies = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestScore(t *testing.T) {
	pod := podOf(gpus("c", "4"))
	half := &Node{Policy: SingleNUMANode, Zones: []Zone{zn("node-0", resources.List{gpu: 8}, resources.List{gpu: 4})}}
	empty := &Node{Policy: SingleNUMANode, Zones: []Zone{zn("node-0", resources.List{gpu: 8}, resources.List{gpu: 8})}}
	full := &Node{Policy: SingleNUMANode, Zones: []Zone{zn("node-0", resources.List{gpu: 8}, resources.List{gpu: 2})}}

	if a, b := half.Score(pod, nil, MostAllocated), empty.Score(pod, nil, MostAllocated); a != 100 || b != 50 {
		t.Errorf("MostAllocated: half-used node %d, empty node %d; want 100, 50", a, b)
	}
	if a, b := half.Score(pod, nil, LeastAllocated), empty.Score(pod, nil, LeastAllocated); a != 0 || b != 50 {
		t.Errorf("LeastAllocated: half-used node %d, empty node %d; want 0, 50", a, b)
	}
	for _, s := range Strategies {
		if got := full.Score(pod, nil, s); got != 0 {
			t.Errorf("%s: pod that does not fit scores %d, want 0", s, got)
		}
	}
	// Charged usage counts like NRT usage.
	if got := empty.Score(pod, map[string]resources.List{"node-0": {gpu: 4}}, MostAllocated); got != 100 {
		t.Errorf("MostAllocated with charged usage: %d, want 100", got)
	}

	// LeastNUMANodes: one zone 100, two zones 50.
	one := gpuZones(Restricted, Container, 4, 4)
	if got := one.Score(podOf(gpus("c", "4")), nil, LeastNUMANodes); got != 100 {
		t.Errorf("LeastNUMANodes, one zone: %d, want 100", got)
	}
	if got := one.Score(podOf(gpus("c", "6")), nil, LeastNUMANodes); got != 50 {
		t.Errorf("LeastNUMANodes, two zones: %d, want 50", got)
	}
	if got := one.Score(podOf(gpus("a", "4"), gpus("b", "4")), nil, LeastNUMANodes); got != 50 {
		t.Errorf("LeastNUMANodes, containers in two zones: %d, want 50", got)
	}
	if got := gpuZones(Restricted, Pod, 4, 4).Score(podOf(gpus("a", "2"), gpus("b", "2")), nil, LeastNUMANodes); got != 100 {
		t.Errorf("LeastNUMANodes, pod scope in one zone: %d, want 100", got)
	}

	// BalancedAllocation: even use of GPU and CPU beats uneven use.
	even := &Node{Policy: SingleNUMANode, Zones: []Zone{zn("node-0", resources.List{gpu: 4, cpu: 16000}, resources.List{gpu: 4, cpu: 16000})}}
	tp := podOf(guaranteed("c", "cpu", "8", "memory", "1Gi", "nvidia.com/gpu", "2")) // memory not reported: ignored
	up := podOf(guaranteed("c", "cpu", "1", "memory", "1Gi", "nvidia.com/gpu", "4"))
	if a, b := even.Score(tp, nil, BalancedAllocation), even.Score(up, nil, BalancedAllocation); a != 100 || a <= b {
		t.Errorf("BalancedAllocation: even %d, uneven %d; want 100 > uneven", a, b)
	}

	// Policy none, pods without aligned resources and unknown strategies: 0.
	if got := gpuZones(None, Container, 4).Score(pod, nil, LeastNUMANodes); got != 0 {
		t.Errorf("none policy: %d, want 0", got)
	}
	if got := empty.Score(podOf(requestsOnly("c", "cpu", "1")), nil, LeastNUMANodes); got != 0 {
		t.Errorf("no aligned resources: %d, want 0", got)
	}
	if got := empty.Score(pod, nil, "Whatever"); got != 0 {
		t.Errorf("unknown strategy: %d, want 0", got)
	}
	// Best-effort nodes score the placement the kubelet prefers.
	be := gpuZones(BestEffort, Container, 4, 4)
	if got := be.Score(pod, nil, LeastNUMANodes); got != 100 {
		t.Errorf("best-effort, aligned placement: %d, want 100", got)
	}
	if got := gpuZones(BestEffort, Container, 2, 2).Score(pod, nil, LeastNUMANodes); got != 0 {
		t.Errorf("best-effort, no aligned placement: %d, want 0", got)
	}
}

func TestManyZones(t *testing.T) {
	// Beyond maxEnumZones a spanning restricted request is checked against
	// all zones together; zones that take nothing get no allocation.
	n := &Node{Policy: Restricted}
	for i := 0; i < 20; i++ {
		n.Zones = append(n.Zones, zn(fmt.Sprintf("node-%d", i), resources.List{gpu: 4}, resources.List{gpu: 4}))
	}
	got, ok, reason := n.Fit(podOf(gpus("c", "6")), map[string]resources.List{"node-0": {gpu: 1}})
	want := []Allocation{{Zone: "node-0", Request: resources.List{gpu: 3}, Unit: "c"}, {Zone: "node-1", Request: resources.List{gpu: 3}, Unit: "c"}}
	if !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v ok=%v %q, want %+v", got, ok, reason, want)
	}
	if got := n.Copies(podOf(gpus("c", "4")), nil, 100); got != 20 {
		t.Fatalf("Copies = %d, want 20", got)
	}
}

func TestZoneLess(t *testing.T) {
	names := []string{"numa-b", "node-10", "a", "node-1", "node-0"}
	sort.Slice(names, func(i, j int) bool { return zoneLess(names[i], names[j]) })
	want := []string{"node-0", "node-1", "node-10", "a", "numa-b"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("got %v, want %v", names, want)
	}
}
