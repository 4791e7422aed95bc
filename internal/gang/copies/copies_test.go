package copies

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/phalanx-sched/phalanx/internal/gang/planner"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

func pod(ns, name string, cpuM int64) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name)},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(cpuM, resource.DecimalSI)}}}}},
	}
}

func gang(ns, prefix string, n int, cpuM int64) []*v1.Pod {
	var out []*v1.Pod
	for i := 0; i < n; i++ {
		out = append(out, pod(ns, fmt.Sprintf("%s-%d", prefix, i), cpuM))
	}
	return out
}

// perNode caps members per node over all copies, as NUMA zones do.
type perNode int

func (p perNode) Limit(_ *v1.Pod, _ string, max int) int { return min(max, int(p)) }

// count builds the question for copies of members on nodes of cpuM each,
// as the manager does: every node fits, sized by its free room.
func count(members []*v1.Pod, nodes int, cpuM int64, across planner.Limiter) Count {
	groups := planner.GroupByShape(members, nil)
	var states []planner.NodeState
	for i := 0; i < nodes; i++ {
		states = append(states, planner.NodeState{Node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i)}},
			Free: resources.List{v1.ResourceCPU: cpuM}, FreePods: 100})
	}
	verdicts := make([]planner.Verdict, nodes)
	for i := range verdicts {
		verdicts[i].Fits = true
	}
	room := func(i int) (resources.List, int64) { return states[i].Free.Clone(), states[i].FreePods }
	shapes, _ := planner.Shapes(groups)
	req := planner.Request{Shapes: shapes, Nodes: planner.CandidateNodes(groups, states, verdicts, room, false, across)}
	return Count{Req: req, Groups: groups, Nodes: states, Across: across, Namespace: "ns",
		Describe: func(d *planner.Diagnosis, _ planner.Request) string {
			return fmt.Sprintf("placed %d of %d", d.Placed, d.Needed)
		}}
}

// allowance admits up to cpuM in all.
func allowance(cpuM int64) func(resources.List) bool {
	return func(need resources.List) bool { return need[v1.ResourceCPU] <= cpuM }
}

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members []*v1.Pod
		nodes   int
		nodeM   int64
		across  planner.Limiter
		max     int
		admit   func(resources.List) bool
		assumed [][]*v1.Pod
		want    int
		wantWhy string
	}{
		// Two members of 2 CPUs; two nodes of 4 CPUs take four copies.
		{name: "until the room is gone", members: gang("ns", "g", 2, 2000), nodes: 2, nodeM: 4000, want: 2, wantWhy: "placed 0 of 2"},
		{name: "room for copies on every node", members: gang("ns", "g", 2, 1000), nodes: 2, nodeM: 4000, want: 4, wantWhy: "placed 0 of 2"},
		{name: "max reached", members: gang("ns", "g", 2, 1000), nodes: 2, nodeM: 4000, max: 3, want: 3},
		{name: "the queue's allowance", members: gang("ns", "g", 2, 1000), nodes: 2, nodeM: 4000, admit: allowance(5000), want: 2, wantWhy: WhyAllowance},
		{
			name: "a limit across copies", members: gang("ns", "g", 2, 1000), nodes: 2, nodeM: 4000, across: perNode(3),
			// Six members in all, three copies.
			want: 3, wantWhy: "placed 0 of 2",
		},
		{
			name: "an in-flight workload takes its room first", members: gang("ns", "g", 2, 1000), nodes: 2, nodeM: 4000,
			assumed: [][]*v1.Pod{gang("other", "w", 2, 2000)}, want: 2, wantWhy: "placed 0 of 2",
		},
		{
			name: "an in-flight workload of the namespace is charged", members: gang("ns", "g", 2, 1000), nodes: 2, nodeM: 4000,
			assumed: [][]*v1.Pod{gang("ns", "w", 2, 1000)}, admit: allowance(6000), want: 2, wantWhy: WhyAllowance,
		},
		{
			name: "an in-flight workload that does not fit is skipped", members: gang("ns", "g", 2, 1000), nodes: 2, nodeM: 4000,
			assumed: [][]*v1.Pod{gang("ns", "w", 1, 5000), {}}, admit: allowance(4000), want: 2, wantWhy: WhyAllowance,
		},
		// One member: the nodes' room, summed.
		{name: "one member: room summed", members: gang("ns", "p", 1, 1500), nodes: 3, nodeM: 4000, want: 6, wantWhy: WhyNoRoom},
		{name: "one member: max", members: gang("ns", "p", 1, 1500), nodes: 3, nodeM: 4000, max: 4, want: 4},
		{name: "one member: allowance", members: gang("ns", "p", 1, 1500), nodes: 3, nodeM: 4000, admit: allowance(5000), want: 3, wantWhy: WhyAllowance},
		{name: "one member: a limit across copies", members: gang("ns", "p", 1, 1000), nodes: 2, nodeM: 4000, across: perNode(1), want: 2, wantWhy: WhyNoRoom},
		{
			name: "one member: after an in-flight workload", members: gang("ns", "p", 1, 1000), nodes: 2, nodeM: 4000,
			assumed: [][]*v1.Pod{gang("other", "w", 2, 3000)}, want: 2, wantWhy: WhyNoRoom,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := count(tc.members, tc.nodes, tc.nodeM, tc.across)
			c.Max, c.Admit, c.Assumed = tc.max, tc.admit, tc.assumed
			got, why := c.Run()
			if got != tc.want || why != tc.wantWhy {
				t.Errorf("Run() = %d, %q; want %d, %q", got, why, tc.want, tc.wantWhy)
			}
		})
	}
}

// Counting changes the question's nodes, never the limit maps it was given:
// a request's maps may be shared with the caller.
func TestRunLeavesSharedLimits(t *testing.T) {
	c := count(gang("ns", "g", 2, 1000), 2, 4000, perNode(2))
	before := make([]map[string]int, len(c.Req.Nodes))
	for i, n := range c.Req.Nodes {
		before[i] = map[string]int{}
		for k, v := range n.Limit {
			before[i][k] = v
		}
	}
	shared := make([]map[string]int, len(c.Req.Nodes))
	for i := range c.Req.Nodes {
		shared[i] = c.Req.Nodes[i].Limit
	}
	if got, _ := c.Run(); got != 2 {
		t.Fatalf("Run() = %d, want 2", got)
	}
	for i := range shared {
		for k, v := range before[i] {
			if shared[i][k] != v {
				t.Errorf("node %d: shared limit of %s changed from %d to %d", i, k, v, shared[i][k])
			}
		}
	}
}

// An in-flight workload is placed whole or not at all; what it takes leaves
// the request's nodes.
func TestPlaceAssumed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		workload []*v1.Pod
		wantOK   bool
		wantFree int64 // CPU left on both nodes
	}{
		{name: "fits whole", workload: gang("ns", "w", 3, 2000), wantOK: true, wantFree: 2000},
		{name: "too large", workload: gang("ns", "w", 5, 2000), wantFree: 8000},
		{name: "empty", wantFree: 8000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := count(gang("ns", "g", 2, 1000), 2, 4000, nil)
			lim := newLimits(c.Req, c.Groups, nil)
			need, ok := placeAssumed(c.Req, c.Nodes, lim.byName, tc.workload, nil)
			if ok != tc.wantOK {
				t.Fatalf("placed %v, want %v", ok, tc.wantOK)
			}
			if ok && need[v1.ResourceCPU] != 6000 {
				t.Errorf("demand %v, want 6000 CPU", need)
			}
			free := int64(0)
			for _, n := range c.Req.Nodes {
				free += n.Free[v1.ResourceCPU]
			}
			if free != tc.wantFree {
				t.Errorf("free %d, want %d", free, tc.wantFree)
			}
			if c.Nodes[0].Free[v1.ResourceCPU] != 4000 {
				t.Error("the view's nodes changed")
			}
		})
	}
}

// Under a limit across copies, each placed copy lowers what is left for
// the next; one copy's own limit still caps it.
func TestLimitsTake(t *testing.T) {
	c := count(gang("ns", "g", 2, 1000), 1, 8000, perNode(3))
	lim := newLimits(c.Req, c.Groups, c.Across)
	key := c.Groups[0].Key
	if got := c.Req.Nodes[0].Limit[key]; got != 2 {
		t.Fatalf("one copy's limit %d, want 2 (the copy's members)", got)
	}
	lim.take(c.Req, &planner.Plan{Slots: map[string]map[string]int{"n0": {key: 2}}}, map[string]resources.List{key: {v1.ResourceCPU: 1000}})
	n := c.Req.Nodes[0]
	if n.Limit[key] != 1 || n.Free[v1.ResourceCPU] != 6000 || n.FreePods != 98 {
		t.Errorf("after a copy: limit %d, free %v, pods %d; want 1, 6000, 98", n.Limit[key], n.Free[v1.ResourceCPU], n.FreePods)
	}
}
