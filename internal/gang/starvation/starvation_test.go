package starvation

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/phalanx-sched/phalanx/internal/gang/lifecycle"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

var t0 = time.Unix(100_000, 0)

// running is a pod of priority prio asking cpuM, bound at t0, that ends
// deadline seconds after (0: no limit).
func running(name string, cpuM int64, prio int32, deadline int64) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(t0)},
		Spec: v1.PodSpec{Priority: &prio, Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(cpuM, resource.DecimalSI)}}}}},
	}
	if deadline > 0 {
		p.Spec.ActiveDeadlineSeconds = &deadline
	}
	return p
}

func node(name string, freeM int64, pods int64) planner.NodeState {
	return planner.NodeState{Node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, Free: resources.List{v1.ResourceCPU: freeM}, FreePods: pods}
}

func waitingAt(prio int32) Waiting {
	return Waiting{Priority: prio, PriorityOf: func(p *v1.Pod) int32 { return *p.Spec.Priority }}
}

// Pods of equal or lower priority give their room back; higher ones keep it.
func TestFutureRoom(t *testing.T) {
	ns := node("a", 1000, 5)
	pods := []*v1.Pod{running("low", 2000, 1, 0), running("equal", 500, 5, 0), running("high", 4000, 9, 0)}
	free, slots, busy := waitingAt(5).FutureRoom(ns, pods)
	if free[v1.ResourceCPU] != 3500 || slots != 7 || busy != 2 {
		t.Errorf("FutureRoom = %v CPU, %d pods, %d busy; want 3500, 7, 2", free[v1.ResourceCPU], slots, busy)
	}
	if ns.Free[v1.ResourceCPU] != 1000 {
		t.Error("the node's own room changed")
	}
}

func TestReadyBy(t *testing.T) {
	nodes := []planner.NodeState{node("a", 0, 5), node("b", 0, 5)}
	plan := &planner.Plan{Slots: map[string]map[string]int{"a": {"s": 1}}}
	gone := running("gone", 1000, 1, 0)
	gone.DeletionTimestamp = &metav1.Time{Time: t0}
	for _, tc := range []struct {
		name       string
		onA, onB   []*v1.Pod
		want       time.Time
		wantUnsure bool
	}{
		{name: "nothing to wait for", want: t0.Add(time.Minute)},
		{name: "the last deadline on the plan's nodes", onA: []*v1.Pod{running("x", 1000, 1, 600), running("y", 1000, 1, 1200)}, want: t0.Add(1200 * time.Second)},
		{name: "a pod with no limit: unknown", onA: []*v1.Pod{running("x", 1000, 1, 600), running("z", 1000, 1, 0)}, wantUnsure: true},
		{name: "higher priority and leaving pods are not waited for", onA: []*v1.Pod{running("h", 1000, 9, 0), gone}, want: t0.Add(time.Minute)},
		{name: "nodes outside the plan do not count", onB: []*v1.Pod{running("z", 1000, 1, 0)}, want: t0.Add(time.Minute)},
	} {
		podsOn := func(i int) []*v1.Pod { return [][]*v1.Pod{tc.onA, tc.onB}[i] }
		got := waitingAt(5).ReadyBy(nodes, podsOn, plan, t0.Add(time.Minute))
		if tc.wantUnsure {
			if !got.IsZero() {
				t.Errorf("%s: ready by %v, want unknown", tc.name, got)
			}
			continue
		}
		if !got.Equal(tc.want) {
			t.Errorf("%s: ready by %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestNote(t *testing.T) {
	r := lifecycle.Reservation{Since: t0, Shapes: map[string]resources.List{"s": {v1.ResourceCPU: 1000}},
		Slots: map[string]map[string]int{"a": {"s": 3}, "b": {"s": 2}, "gone": {"s": 1}}}
	// a fits 2 of its 3 (1 still in use), b only 1 pod slot of 2; gone is
	// not in the view: in use.
	nodes := []planner.NodeState{node("a", 2000, 10), node("b", 5000, 1)}
	want := "reserving 3 nodes for 6 members since " + t0.UTC().Format(time.RFC3339) +
		"; room for 3 of them is still in use by running pods; tail"
	if got := Note(r, nodes, "tail"); got != want {
		t.Errorf("Note =\n%s\nwant\n%s", got, want)
	}
}
