package preempt

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// bound is a pod of gang (none: "") on node, bound at t, asking cpuM.
func bound(name, gang, node string, prio int32, cpuM int64, t time.Time) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"gang": gang, "queue": "q-" + gang}},
		Spec:       v1.PodSpec{NodeName: node, Priority: &prio},
		Status: v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(t)}}, Phase: v1.PodRunning},
	}
}

func census(single map[string]int) Census {
	return Census{
		RefOf: func(p *v1.Pod) (ident.Ref, bool) {
			g := p.Labels["gang"]
			return ident.Ref{Namespace: "ns", Name: g}, g != ""
		},
		PriorityOf: func(p *v1.Pod) int32 { return *p.Spec.Priority },
		QueueOf:    func(p *v1.Pod) string { return p.Labels["queue"] },
		Demand:     func(p *v1.Pod) resources.List { return resources.List{v1.ResourceCPU: 1000} },
		Single: func(ref ident.Ref) (int, bool) {
			m, ok := single[ref.Name]
			return m, ok
		},
	}
}

func TestRunning(t *testing.T) {
	t0 := time.Unix(1000, 0)
	leaving := bound("leaving", "", "a", 0, 1000, t0)
	leaving.DeletionTimestamp = &metav1.Time{Time: t0}
	onNode := [][]*v1.Pod{
		{bound("g-0", "g", "a", 1, 1000, t0), bound("p", "", "a", 3, 1000, t0), bound("own-0", "own", "a", 0, 1000, t0), leaving},
		{bound("g-1", "g", "b", 4, 1000, t0.Add(time.Minute)), bound("g-2", "g", "b", 1, 1000, t0.Add(2*time.Minute))},
	}
	r := census(map[string]int{"g": 1}).Running([]string{"a", "b"}, func(i int) []*v1.Pod { return onNode[i] }, ident.Ref{Namespace: "ns", Name: "own"})
	byKey := map[string]Victim{}
	for _, v := range r.Victims {
		byKey[v.Key] = v
	}
	if len(r.Victims) != 4 {
		t.Fatalf("victims %v, want the gang, the plain pod and two members above the gang's minimum", Names(r.Victims))
	}
	g := byKey["ns/g"]
	if g.Members != 3 || g.Priority != 4 || !g.Started.Equal(t0.Add(2*time.Minute)) || g.Queue != "q-g" ||
		g.OnNode["a"].Pods != 1 || g.OnNode["b"].Pods != 2 || g.Total[v1.ResourceCPU] != 3000 {
		t.Errorf("gang victim %+v", g)
	}
	if p := byKey["ns/pod:p"]; !p.Ref.IsZero() || p.Members != 1 || p.Priority != 3 {
		t.Errorf("plain pod victim %+v", p)
	}
	// The newest two members above the minimum of 1 may go alone.
	for _, key := range []string{"ns/g/member:g-2", "ns/g/member:g-1"} {
		v, ok := byKey[key]
		if !ok || v.Of != "ns/g" || v.Members != 1 || len(r.Pods[key]) != 1 || v.OnNode["b"].Pods != 1 {
			t.Errorf("member victim %s: %+v (%v)", key, v, ok)
		}
	}
	if len(r.Pods["ns/g"]) != 3 {
		t.Errorf("the gang's pods %d, want 3", len(r.Pods["ns/g"]))
	}
}

// A gang evicted whole only, or at its minimum, has no members to take alone.
func TestRunningNoSurplus(t *testing.T) {
	t0 := time.Unix(1000, 0)
	pods := []*v1.Pod{bound("g-0", "g", "a", 0, 1000, t0), bound("g-1", "g", "a", 0, 1000, t0)}
	for name, single := range map[string]map[string]int{"whole only": nil, "at its minimum": {"g": 2}} {
		r := census(single).Running([]string{"a"}, func(int) []*v1.Pod { return pods }, ident.Ref{})
		if len(r.Victims) != 1 {
			t.Errorf("%s: victims %s", name, Names(r.Victims))
		}
	}
}

func TestBoundAt(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := bound("p", "", "a", 0, 0, t0)
	if !BoundAt(p).Equal(t0) {
		t.Errorf("scheduled condition: %v", BoundAt(p))
	}
	p.Status.Conditions = nil
	start := metav1.NewTime(t0.Add(time.Second))
	p.Status.StartTime = &start
	if !BoundAt(p).Equal(start.Time) {
		t.Errorf("start time: %v", BoundAt(p))
	}
	p.Status.StartTime, p.CreationTimestamp = nil, metav1.NewTime(t0.Add(-time.Hour))
	if !BoundAt(p).Equal(t0.Add(-time.Hour)) {
		t.Errorf("creation: %v", BoundAt(p))
	}
}

func TestNames(t *testing.T) {
	got := Names([]Victim{{Key: "ns/a", Queue: "q"}, {Key: "ns/pod:p"}})
	if want := "ns/a (queue q), ns/pod:p"; got != want {
		t.Errorf("Names = %q, want %q", got, want)
	}
}
