package starvation

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/gang/expected"
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

func estimated(name string, cpuM int64, prio int32, runtime string) *v1.Pod {
	p := running(name, cpuM, prio, 0)
	p.Annotations = map[string]string{phalanxv1alpha1.ExpectedRuntimeAnnotation: runtime}
	return p
}

func (w Waiting) withRuntimes() Waiting {
	w.RuntimeOf = func(p *v1.Pod) expected.Runtime { return expected.Of(p, nil) }
	return w
}

// Pods of equal or lower priority give their room back, each when it is
// expected to end; higher ones keep it.
func TestLeavingAndRoomAt(t *testing.T) {
	now := t0.Add(10 * time.Minute)
	gone := running("gone", 300, 1, 0)
	gone.DeletionTimestamp = &metav1.Time{Time: t0}
	pods := []*v1.Pod{
		running("limit", 2000, 1, 1200), // ends t0+20m (hard)
		estimated("est", 500, 5, "30m"), // ends t0+30m (soft)
		estimated("late", 100, 1, "5m"), // overran: ends now
		running("unknown", 1000, 1, 0),  // no end
		running("high", 4000, 9, 0),     // not waited for
		gone,                            // ends now
	}
	leavers := waitingAt(5).withRuntimes().Leaving(pods, now)
	if len(leavers) != 5 {
		t.Fatalf("%d leavers, want 5 (the higher-priority pod is not waited for)", len(leavers))
	}
	if !leavers[2].Overran || leavers[0].Overran || !leavers[2].End.Equal(now) {
		t.Errorf("overran flags: %+v", leavers)
	}
	free := resources.List{v1.ResourceCPU: 1000}
	for _, tc := range []struct {
		at       time.Time
		cpu, pod int64
	}{
		{at: now, cpu: 1000 + 100 + 300, pod: 5 + 2},
		{at: t0.Add(20 * time.Minute), cpu: 1000 + 100 + 300 + 2000, pod: 5 + 3},
		{at: t0.Add(30 * time.Minute), cpu: 1000 + 100 + 300 + 2000 + 500, pod: 5 + 4},
		{at: time.Time{}, cpu: 1000 + 100 + 300 + 2000 + 500 + 1000, pod: 5 + 5},
	} {
		room, slots := RoomAt(free, 5, leavers, tc.at)
		if room[v1.ResourceCPU] != tc.cpu || slots != tc.pod {
			t.Errorf("RoomAt(%v) = %d CPU, %d pods; want %d, %d", tc.at, room[v1.ResourceCPU], slots, tc.cpu, tc.pod)
		}
	}
	if free[v1.ResourceCPU] != 1000 {
		t.Error("the node's own room changed")
	}
	starts := Starts([][]Leaver{leavers, leavers})
	want := []time.Time{now, t0.Add(20 * time.Minute), t0.Add(30 * time.Minute)}
	if len(starts) != len(want) {
		t.Fatalf("Starts = %v, want %v", starts, want)
	}
	for i := range want {
		if !starts[i].Equal(want[i]) {
			t.Errorf("Starts = %v, want %v", starts, want)
		}
	}
}

// Earliest finds the first start that plans with few plans, and falls
// back to the room once everything has left, at an unknown time.
func TestEarliest(t *testing.T) {
	starts := make([]time.Time, 100)
	for i := range starts {
		starts[i] = t0.Add(time.Duration(i) * time.Minute)
	}
	for _, tc := range []struct {
		name     string
		fitsFrom int // first start that plans; len: only once all left; -1: never
		wantAt   time.Time
		wantPlan bool
		maxPlans int
	}{
		{name: "the 38th start", fitsFrom: 37, wantAt: starts[37], wantPlan: true, maxPlans: 9},
		{name: "the first start", fitsFrom: 0, wantAt: starts[0], wantPlan: true, maxPlans: 9},
		{name: "only once pods with no end leave", fitsFrom: len(starts), wantPlan: true, maxPlans: 9},
		{name: "never: one plan, nothing reserved", fitsFrom: -1, maxPlans: 1},
	} {
		plans := 0
		made := map[time.Time]*planner.Plan{} // each plan knows its start
		got, at := Earliest(starts, func(at time.Time) *planner.Plan {
			plans++
			if tc.fitsFrom >= 0 && (at.IsZero() || tc.fitsFrom < len(starts) && !at.Before(starts[tc.fitsFrom])) {
				made[at] = &planner.Plan{}
				return made[at]
			}
			return nil
		})
		if (got != nil) != tc.wantPlan || !at.Equal(tc.wantAt) || plans > tc.maxPlans {
			t.Errorf("%s: plan %v at %v after %d plans; want plan %v at %v within %d plans", tc.name, got != nil, at, plans, tc.wantPlan, tc.wantAt, tc.maxPlans)
		}
		if got != nil && got != made[at] {
			t.Errorf("%s: the plan returned is not the one made for %v", tc.name, at)
		}
	}
}

func TestExpectedStart(t *testing.T) {
	if got := ExpectedStart(time.Time{}, 0); !strings.Contains(got, "unknown") || !strings.Contains(got, phalanxv1alpha1.ExpectedRuntimeAnnotation) {
		t.Errorf("unknown start: %q", got)
	}
	at := t0.Add(time.Hour)
	if got := ExpectedStart(at, 0); got != "expected to start by "+at.UTC().Format(time.RFC3339) {
		t.Errorf("known start: %q", got)
	}
	if got := ExpectedStart(at, 2); !strings.Contains(got, "slipped: 2 pods") {
		t.Errorf("slipped start: %q", got)
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
