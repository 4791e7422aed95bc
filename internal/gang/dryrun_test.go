package gang

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/lifecycle"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// lifecycleState renders what a dry run must not change.
func lifecycleState(lc *lifecycle.Lifecycle, refs ...ident.Ref) string {
	var b strings.Builder
	fmt.Fprintf(&b, "held=%v reservations=%v failed=%v anywhere=%v", lc.HeldByGang(), lc.Reservations(), failedRefs(lc), lc.HoldsAnywhere())
	for _, r := range refs {
		fmt.Fprintf(&b, " %s:%s/%d", r, lc.Phase(r), lc.Placed(r))
	}
	return b.String()
}

func TestManagerCopies(t *testing.T) {
	// 8 CPU in all: a (rack r1) 4, b and c (rack r2) 2 and 1, d (rack r3) 1.
	nodes := []fnode{
		{name: "a", free: 4000, rack: "r1"},
		{name: "b", free: 2000, rack: "r2"}, {name: "c", free: 1000, rack: "r2"},
		{name: "d", free: 1000, rack: "r3"},
	}
	other := ident.Ref{Namespace: "ns", Name: "other"}
	holdA := func(e *env) {
		e.m.CommitPlan(other, &planner.Plan{Slots: map[string]map[string]int{"a": {"o": 2}}}, map[string]resources.List{"o": cpu(1000)}, time.Minute)
	}
	reserveA := func(e *env) {
		e.m.Reserve(other, lifecycle.ReservationRequest{Kind: lifecycle.ReservationStarved, Queue: "q", Priority: 5,
			Plan: &planner.Plan{Slots: map[string]map[string]int{"a": {"o": 2}}}, Shapes: map[string]resources.List{"o": cpu(1000)}})
	}
	for _, tc := range []struct {
		name     string
		setup    func(e *env)
		required string
		withSpec bool // the query names a gang (its constraint via the spec)
		priority int32
		max      int
		allow    int64 // the queue's allowance in CPU (0: no limit)
		assumed  [][]*v1.Pod
		want     int
		wantWhy  string
	}{
		{name: "whole copies on free room", want: 4, wantWhy: "no placement for 2 more members (minMember 2, 0 placed): at most 0 fit"},
		{name: "required rack: copies split across racks do not count", required: "rack", want: 3, wantWhy: "with topology required rack"},
		{name: "required rack through the gang's spec", required: "rack", withSpec: true, want: 3, wantWhy: "with topology required rack"},
		{name: "another gang's plan is held", setup: holdA, want: 3},
		{name: "another gang's reservation is held against equal priority", setup: reserveA, priority: 5, want: 3},
		{name: "a higher priority passes another gang's reservation", setup: reserveA, priority: 6, want: 4},
		{name: "Max caps the count", max: 2, want: 2},
		{name: "Max above what fits", max: 10, want: 4, wantWhy: "at most 0 fit"},
		{name: "the queue's allowance stops counting", allow: 5000, want: 2, wantWhy: "the queue's allowance takes no more copies"},
		{name: "an in-flight workload takes its room first", assumed: [][]*v1.Pod{members("inflight", 3, 1000, 0)}, want: 2},
		{name: "required rack: an in-flight workload is placed whole, then the copies", required: "rack",
			assumed: [][]*v1.Pod{members("inflight", 1, 2000, 0)}, want: 2},
		{name: "an in-flight workload that fits nowhere takes nothing", assumed: [][]*v1.Pod{members("huge", 1, 5000, 0)}, want: 4},
		{name: "an in-flight workload of the namespace is charged to the queue", allow: 5000,
			assumed: [][]*v1.Pod{members("inflight", 1, 1000, 0)}, want: 2, wantWhy: "the queue's allowance takes no more copies"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv()
			if tc.setup != nil {
				tc.setup(e)
			}
			c := &cluster{nodes: nodes}
			pods := members("copy", 2, 1000, tc.priority)
			q := Query{Members: pods, Priority: tc.priority, Prober: c, Max: tc.max, Assumed: tc.assumed}
			if tc.required != "" {
				q.Topology = &Constraint{Tree: c.topology(), Required: tc.required}
			}
			if tc.withSpec {
				q.Spec = e.dir.gang("copy", 2, tc.priority, pods...)
			}
			var asked []int64
			if tc.allow > 0 {
				q.Admit = func(need resources.List) bool {
					asked = append(asked, need[v1.ResourceCPU])
					return need[v1.ResourceCPU] <= tc.allow
				}
			}
			before := lifecycleState(e.m.Lifecycle, other, ident.Ref{Namespace: "ns", Name: "copy"})
			calls := e.fx.calls()

			got := e.m.Copies(context.Background(), q)

			if got.Copies != tc.want {
				t.Fatalf("Copies = %d (%s), want %d", got.Copies, got.Why, tc.want)
			}
			if tc.wantWhy == "" && tc.max > 0 && got.Why != "" {
				t.Errorf("Why %q, want empty at Max", got.Why)
			}
			if !strings.Contains(got.Why, tc.wantWhy) {
				t.Errorf("Why %q, want %q", got.Why, tc.wantWhy)
			}
			if tc.allow > 0 && tc.assumed == nil && !reflect.DeepEqual(asked, []int64{2000, 4000, 6000}) {
				t.Errorf("the queue was asked for %v, want each copy's running total", asked)
			}
			// A dry run changes nothing.
			if after := lifecycleState(e.m.Lifecycle, other, ident.Ref{Namespace: "ns", Name: "copy"}); after != before {
				t.Errorf("lifecycle changed:\n before %s\n after  %s", before, after)
			}
			if e.fx.calls() != calls {
				t.Errorf("effects recorded: %+v", e.fx)
			}
			if c.probes != 1 {
				t.Errorf("probed %d times, want once", c.probes)
			}
		})
	}
}

// A dry run decides as Plan does: the count it gives is what Plan then
// commits, copy after copy.
func TestManagerCopiesAgreesWithPlan(t *testing.T) {
	e := newEnv()
	c := &cluster{nodes: []fnode{{name: "a", free: 4000}, {name: "b", free: 2000}, {name: "c", free: 1000}}}
	ans := e.m.Copies(context.Background(), Query{Members: members("x", 3, 1000, 0), Prober: c})
	if ans.Copies != 2 {
		t.Fatalf("Copies = %d (%s), want 2", ans.Copies, ans.Why)
	}
	for i := 0; i <= ans.Copies; i++ {
		pods := members(fmt.Sprintf("g%d", i), 3, 1000, 0)
		spec := e.dir.gang(fmt.Sprintf("g%d", i), 3, 0, pods...)
		e.dir.pending[spec.Ref] = pods
		_, err := e.m.Plan(context.Background(), e.attempt(spec, c))
		if i < ans.Copies && err != nil {
			t.Fatalf("copy %d: %v", i, err)
		}
		if i == ans.Copies && err == nil {
			t.Fatalf("Plan placed copy %d beyond the dry run's %d", i, ans.Copies)
		}
	}
}

// One-member copies are counted node by node: each node's room, less an
// in-flight workload, capped by Max and by what the queue takes.
func TestManagerCopiesSingleMember(t *testing.T) {
	nodes := []fnode{{name: "a", free: 4000}, {name: "b", free: 2500}, {name: "c", free: 1000}, {name: "d", free: 500}}
	for _, tc := range []struct {
		name    string
		max     int
		allow   int64
		assumed [][]*v1.Pod
		want    int
	}{
		{name: "every node's room", want: 7},
		{name: "Max caps the count", max: 3, want: 3},
		{name: "the queue's allowance", allow: 5000, want: 5},
		{name: "less an in-flight workload", assumed: [][]*v1.Pod{members("inflight", 2, 1000, 0)}, want: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv()
			q := Query{Members: members("one", 1, 1000, 0), Prober: &cluster{nodes: nodes}, Max: tc.max, Assumed: tc.assumed}
			if tc.allow > 0 {
				q.Admit = func(need resources.List) bool { return need[v1.ResourceCPU] <= tc.allow }
			}
			if got := e.m.Copies(context.Background(), q); got.Copies != tc.want {
				t.Fatalf("Copies = %d (%s), want %d", got.Copies, got.Why, tc.want)
			}
		})
	}
}

// A copy of a gang of sub-groups counts only when each of its sub-groups
// fits whole in one domain of the sub-groups' level, as Plan places it: not
// as one flat gang, and not as one group of all its members.
func TestManagerCopiesSubGroups(t *testing.T) {
	rack := func(name string, cpu int64, r string) fnode { return fnode{name: name, free: cpu, rack: r} }
	for _, tc := range []struct {
		name  string
		nodes []fnode
		flat  int // copies of 4 members with no sub-groups
		want  int // copies of 2 sub-groups of 2, each in one rack
	}{
		// No rack holds 4 members, every rack one sub-group.
		{name: "one sub-group per rack", nodes: []fnode{rack("a", 2000, "r1"), rack("b", 2000, "r2"), rack("c", 2000, "r3"), rack("d", 2000, "r4")}, flat: 2, want: 2},
		// 8 CPU hold 2 flat copies; racks of 3, 3 and 2 hold 3 sub-groups.
		{name: "room left in each rack is less than a sub-group", nodes: []fnode{rack("a", 2000, "r1"), rack("b", 1000, "r1"), rack("c", 3000, "r2"), rack("d", 2000, "r3")}, flat: 2, want: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &cluster{nodes: tc.nodes}
			pods := members("copy", 4, 1000, 0)
			for i, p := range pods {
				p.Labels = map[string]string{"rank": fmt.Sprint(i)}
			}
			e := newEnv()
			if flat := e.m.Copies(context.Background(), Query{Members: pods, Prober: c}); flat.Copies != tc.flat {
				t.Fatalf("flat: Copies = %d (%s), want %d", flat.Copies, flat.Why, tc.flat)
			}
			spec := &gangspec.Spec{Ref: ident.Ref{Namespace: "ns", Name: "copy"}, MinMember: 4, SubGroups: &gangspec.SubGroups{Size: 2, Required: "rack", Source: "by rank",
				Of: func(p *v1.Pod) string {
					var r int
					_, _ = fmt.Sscan(p.Labels["rank"], &r)
					return fmt.Sprint(r / 2)
				}}}
			q := Query{Members: pods, Prober: c, Spec: spec, Topology: &Constraint{Tree: c.topology(), SubRequired: "rack"}}
			got := e.m.Copies(context.Background(), q)
			if got.Copies != tc.want {
				t.Fatalf("sub-groups of 2 per rack: Copies = %d (%s), want %d", got.Copies, got.Why, tc.want)
			}
			if !strings.Contains(got.Why, "sub-group") {
				t.Errorf("Why %q, want it to say how many sub-groups fit", got.Why)
			}
		})
	}
}

func failedRefs(lc *lifecycle.Lifecycle) []ident.Ref {
	refs, _ := lc.FailedGangs()
	return refs
}
