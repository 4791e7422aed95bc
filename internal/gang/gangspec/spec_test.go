package gangspec

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
)

// mpod is a pod in namespace ns asking cpuM millicores, with priority prio.
func mpod(name string, cpuM int64, prio int32) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)},
		Spec: v1.PodSpec{
			Priority: &prio,
			Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(cpuM, resource.DecimalSI)},
			}}},
		},
	}
}

// fakeTopology maps nodes to racks, one level.
type fakeTopology map[string]string

func (t fakeTopology) Levels() []string             { return []string{"rack"} }
func (t fakeTopology) Domains(node string) []string { return []string{t[node]} }

func TestQuorum(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec Spec
		want int
	}{
		{"the minimum", Spec{MinMember: 3}, 3},
		{"at least one", Spec{}, 1},
		{"whole sub-groups of an elastic gang", Spec{MinMember: 8, SubGroups: &SubGroups{Size: 4, Min: 1}}, 4},
		{"sub-groups without their own minimum", Spec{MinMember: 8, SubGroups: &SubGroups{Size: 4}}, 8},
	} {
		if got := Quorum(&tc.spec); got != tc.want {
			t.Errorf("%s: Quorum = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestPriorityOf(t *testing.T) {
	own := int32(7)
	pod := mpod("p", 1000, 3)
	if got := (&Spec{Priority: &own}).PriorityOf(pod); got != 7 {
		t.Errorf("the gang's own priority: %d, want 7", got)
	}
	if got := (&Spec{}).PriorityOf(pod); got != 3 {
		t.Errorf("no gang priority: %d, want the pod's 3", got)
	}
	var none *Spec
	if got := none.PriorityOf(pod); got != 3 {
		t.Errorf("outside gangs: %d, want the pod's 3", got)
	}
}

func TestDependsOn(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want []string
	}{
		{"", nil},
		{"a", []string{"a"}},
		{" a , b,,c ", []string{"a", "b", "c"}},
	} {
		s := &Spec{Annotations: map[string]string{phalanxv1alpha1.DependsOnAnnotation: tc.raw}}
		if got := s.DependsOn(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("DependsOn(%q) = %q, want %q", tc.raw, got, tc.want)
		}
	}
}

// The group's annotations win, level by level; the pod's fill in.
func TestTopologyConstraint(t *testing.T) {
	req, pref := phalanxv1alpha1.TopologyRequiredAnnotation, phalanxv1alpha1.TopologyPreferredAnnotation
	for _, tc := range []struct {
		name                string
		group, pod          map[string]string
		required, preferred string
	}{
		{name: "none"},
		{name: "the group's", group: map[string]string{req: "rack", pref: "block"}, pod: map[string]string{req: "zone"}, required: "rack", preferred: "block"},
		{name: "the pod's where the group says nothing", group: map[string]string{pref: "block"}, pod: map[string]string{req: "zone", pref: "rack"}, required: "zone", preferred: "block"},
	} {
		r, p := TopologyConstraint(tc.group, tc.pod)
		if r != tc.required || p != tc.preferred {
			t.Errorf("%s: (%q, %q), want (%q, %q)", tc.name, r, p, tc.required, tc.preferred)
		}
	}
}

func TestInvalidSubGroups(t *testing.T) {
	if got := (&Spec{}).InvalidSubGroups(); got != "" {
		t.Errorf("a flat gang: %q", got)
	}
	if got := (&Spec{SubGroups: &SubGroups{Size: 2}}).InvalidSubGroups(); got != "" {
		t.Errorf("valid sub-groups: %q", got)
	}
	if got := (&Spec{SubGroups: &SubGroups{Err: "size 3 does not divide 8"}}).InvalidSubGroups(); got != "invalid sub-groups: size 3 does not divide 8" {
		t.Errorf("invalid sub-groups: %q", got)
	}
}

func TestSpecFromPodGroup(t *testing.T) {
	timeout := int32(30)
	created := metav1.NewTime(time.Unix(1000, 0))
	pg := &pgv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", UID: "u", Generation: 4, CreationTimestamp: created,
			Labels: map[string]string{"queue": "q"}, Annotations: map[string]string{"a": "b"}},
		Spec:   pgv1alpha1.PodGroupSpec{MinMember: 3, ScheduleTimeoutSeconds: &timeout},
		Status: pgv1alpha1.PodGroupStatus{Succeeded: 1, Running: 2, Phase: pgv1alpha1.PodGroupFinished},
	}
	got := SpecFromPodGroup(pg)
	want := &Spec{Ref: ident.Ref{Namespace: "ns", Name: "g"}, UID: "u", Generation: 4, MinMember: 3, Timeout: 30 * time.Second,
		Created: created.Time, Labels: pg.Labels, Annotations: pg.Annotations, Succeeded: 1, Running: 2, Finished: true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SpecFromPodGroup = %+v, want %+v", got, want)
	}
	zero := int32(0)
	pg.Spec.ScheduleTimeoutSeconds, pg.Status.Phase = &zero, pgv1alpha1.PodGroupRunning
	if got := SpecFromPodGroup(pg); got.Timeout != 0 || got.Finished {
		t.Errorf("no timeout, running: %+v", got)
	}
}

func TestReadConditions(t *testing.T) {
	got, err := ReadConditions([]byte(`{"status":{"phase":"Running","conditions":[{"type":"Scheduled","status":"False","reason":"Unschedulable"}]}}`))
	if err != nil || len(got) != 1 || got[0].Type != "Scheduled" || got[0].Reason != "Unschedulable" {
		t.Errorf("ReadConditions = %+v, %v", got, err)
	}
	if got, err := ReadConditions([]byte(`{"status":{}}`)); err != nil || got != nil {
		t.Errorf("no conditions: %+v, %v", got, err)
	}
	if _, err := ReadConditions([]byte(`{`)); err == nil {
		t.Error("broken JSON decoded")
	}
}

// ranked returns members prefix-0..n-1 of sub-groups of size: rank i is in
// sub-group i/size.
func ranked(prefix string, n, size int) []*v1.Pod {
	out := make([]*v1.Pod, n)
	for i := range out {
		out[i] = mpod(fmt.Sprintf("%s-%d", prefix, i), 1000, 0)
		out[i].Labels = map[string]string{"sg": fmt.Sprint(i / size)}
	}
	return out
}

func names(groups []planner.ShapeGroup) []string {
	var out []string
	for _, g := range groups {
		for _, m := range g.Members {
			out = append(out, m.Name)
		}
	}
	return out
}

func TestGroupForPlan(t *testing.T) {
	sgOf := func(p *v1.Pod) string { return p.Labels["sg"] }
	pods := ranked("w", 6, 2)
	unranked := mpod("x", 1000, 0)
	for _, tc := range []struct {
		name    string
		spec    *Spec
		pod     *v1.Pod
		pending []*v1.Pod
		needed  int
		placed  map[string]int
		want    []string
		short   string
	}{
		{
			name: "a flat gang: pending members", spec: &Spec{MinMember: 2}, pod: pods[0], pending: pods[:3], needed: 2,
			want: []string{"w-0", "w-1"},
		},
		{
			name: "whole sub-groups, the cycle pod's first", spec: &Spec{SubGroups: &SubGroups{Size: 2, Of: sgOf}},
			pod: pods[4], pending: pods, needed: 4, want: []string{"w-4", "w-5", "w-0", "w-1"},
		},
		{
			name: "a sub-group missing a member is not whole", spec: &Spec{SubGroups: &SubGroups{Size: 2, Of: sgOf, Source: "by rank"}},
			pod: pods[0], pending: []*v1.Pod{pods[0], pods[1], pods[2], unranked}, needed: 4, want: []string{"w-0", "w-1"},
			short: "1 of 2 sub-groups by rank have all their 2 members pending; 1 members have no rank",
		},
		{
			name: "bound members make a sub-group whole", spec: &Spec{SubGroups: &SubGroups{Size: 2, Of: sgOf}},
			pod: pods[2], pending: []*v1.Pod{pods[2]}, needed: 1, placed: map[string]int{"1": 1}, want: []string{"w-2"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			groups, short := GroupForPlan(tc.spec, tc.pod, tc.pending, tc.needed, nil, tc.placed)
			if got := names(groups); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("members %v, want %v", got, tc.want)
			}
			if !strings.HasPrefix(short, tc.short) || (tc.short == "") != (short == "") {
				t.Errorf("short %q, want %q", short, tc.short)
			}
		})
	}
}
