package consolidate

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/preempt"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// t0 is the tests' now.
var t0 = time.Unix(100_000, 0)

// mpod is a pod of priority prio asking cpuM millicores.
func mpod(name string, cpuM int64, prio int32) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{Priority: &prio, Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(cpuM, resource.DecimalSI)}}}}},
	}
}

// racks is a topology of one level, rack, from node to rack.
type racks map[string]string

func (r racks) Levels() []string             { return []string{"rack"} }
func (r racks) Domains(node string) []string { return []string{r[node]} }

// running is a bound gang's victim, as the manager lists it: cpuM
// millicores on each of nodes, its last member bound at started.
func running(name string, prio int32, cpuM int64, started time.Time, nodes ...string) (preempt.Victim, []*v1.Pod) {
	var pods []*v1.Pod
	for i, n := range nodes {
		p := mpod(fmt.Sprintf("%s-%d", name, i), cpuM, prio)
		p.Spec.NodeName, p.CreationTimestamp = n, metav1.NewTime(started)
		pods = append(pods, p)
	}
	census := preempt.Census{
		RefOf:      func(*v1.Pod) (ident.Ref, bool) { return ident.Ref{Namespace: "ns", Name: name}, true },
		PriorityOf: func(p *v1.Pod) int32 { return *p.Spec.Priority },
		Demand:     func(p *v1.Pod) resources.List { return resources.PodRequests(p) },
		Single:     func(ident.Ref) (int, bool) { return 0, false },
	}
	r := census.Running(nodes, func(i int) []*v1.Pod { return pods[i : i+1] }, ident.Ref{})
	return r.Victims[0], pods
}

func TestMovable(t *testing.T) {
	plain := mpod("p", 1000, 0)
	spread := mpod("s", 1000, 0)
	spread.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1}}
	claims := mpod("c", 1000, 0)
	claims.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu"}}
	anti := mpod("a", 1000, 0)
	anti.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{}}
	if !Movable([]*v1.Pod{plain}) {
		t.Error("a plain pod is not movable")
	}
	for _, p := range []*v1.Pod{spread, claims, anti} {
		if Movable([]*v1.Pod{plain, p}) {
			t.Errorf("%s is movable", p.Name)
		}
	}
}

func TestGPUs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		total resources.List
		want  float64
	}{
		{"GPUs of any vendor", resources.List{"nvidia.com/gpu": 4, "amd.com/gpu": 2, v1.ResourceCPU: 64000}, 6},
		{"CPU cores at eight to a GPU", resources.List{v1.ResourceCPU: 16000}, 2},
		{"nothing", resources.List{}, 0},
	} {
		if got := GPUs(tc.total); got != tc.want {
			t.Errorf("%s: GPUs = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestCheckpointedAt(t *testing.T) {
	at := func(d time.Duration) map[string]string {
		return map[string]string{AnnotationCheckpointedAt: t0.Add(d).Format(time.RFC3339)}
	}
	pod := func(ann map[string]string) *v1.Pod {
		p := mpod("p", 1000, 0)
		p.Annotations = ann
		return p
	}
	for _, tc := range []struct {
		name  string
		group map[string]string
		pods  []*v1.Pod
		want  time.Time
	}{
		{name: "none"},
		{name: "the group's", group: at(-time.Hour), want: t0.Add(-time.Hour)},
		{name: "a pod's later one wins", group: at(-time.Hour), pods: []*v1.Pod{pod(nil), pod(at(-time.Minute))}, want: t0.Add(-time.Minute)},
		{name: "unreadable is none", group: map[string]string{AnnotationCheckpointedAt: "yesterday"}},
	} {
		if got := CheckpointedAt(tc.group, tc.pods); !got.Equal(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Candidates keeps the gangs that may move — bound whole, settled, movable,
// of no higher priority, past their minimum runtime since they started or
// were last moved — cheapest first, priced by GPU-seconds since their start
// or checkpoint.
func TestCandidates(t *testing.T) {
	tree := racks{"a1": "r1", "a2": "r1", "b1": "r2"}
	old, oldPods := running("old", 0, 8000, t0.Add(-2*time.Hour), "a1")           // 1 GPU-equivalent for 2h
	cheap, cheapPods := running("cheap", 0, 8000, t0.Add(-time.Hour), "a2", "b1") // 2 for 1h
	young, youngPods := running("young", 0, 8000, t0.Add(-5*time.Minute), "a1")
	high, highPods := running("high", 9, 8000, t0.Add(-time.Hour), "a1")
	plain, plainPods := running("plain", 0, 8000, t0.Add(-time.Hour), "a1")
	plain.Ref = ident.Ref{}
	member, memberPods := running("member", 0, 8000, t0.Add(-time.Hour), "a1")
	member.Of = "ns/old"
	moved, movedPods := running("moved", 0, 8000, t0.Add(-time.Hour), "b1")
	binding, bindingPods := running("binding", 0, 8000, t0.Add(-time.Hour), "b1")
	spread, spreadPods := running("spread", 0, 8000, t0.Add(-time.Hour), "b1")
	spreadPods[0].Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1}}
	pods := map[string][]*v1.Pod{old.Key: oldPods, cheap.Key: cheapPods, young.Key: youngPods, high.Key: highPods,
		plain.Key: plainPods, member.Key: memberPods, moved.Key: movedPods, binding.Key: bindingPods, spread.Key: spreadPods}
	checkpoint := map[string]string{AnnotationCheckpointedAt: t0.Add(-30 * time.Minute).Format(time.RFC3339)}
	settled := func(v preempt.Victim) (map[string]string, bool) {
		switch v.Ref.Name {
		case "binding":
			return nil, false
		case "old":
			return checkpoint, true
		}
		return nil, true
	}
	var log Log
	log.Record("q", t0.Add(-20*time.Minute), []preempt.Victim{moved})
	c := Config{MinRuntime: 30 * time.Minute}
	victims := []preempt.Victim{old, cheap, young, high, plain, member, moved, binding, spread}
	got, youngest := c.Candidates(victims, pods, 0, settled, &log, t0, tree, 0)
	type row struct {
		Key     string
		Cost    float64
		Domains []string
	}
	var rows []row
	for _, cand := range got {
		domains := append([]string(nil), cand.Domains...)
		if len(domains) == 2 && domains[0] > domains[1] {
			domains[0], domains[1] = domains[1], domains[0]
		}
		rows = append(rows, row{cand.Key, cand.Cost, domains})
	}
	want := []row{
		// old's checkpoint 30 minutes ago: 1 × 1800 s.
		{"ns/old", 1800, []string{"r1"}},
		{"ns/cheap", 2 * 3600, []string{"r1", "r2"}},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("candidates %+v, want %+v", rows, want)
	}
	// young may move in 25 minutes, moved (20 minutes ago) in 10.
	if youngest != 10*time.Minute {
		t.Errorf("youngest waits %v, want 10m", youngest)
	}
	if got[0].Pods[0] != oldPods[0] {
		t.Error("a candidate does not carry its pods")
	}
}
