package workload

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pglisters "sigs.k8s.io/scheduler-plugins/pkg/generated/listers/scheduling/v1alpha1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
)

// directoryOn builds a Directory over informers that are never started: the
// tests fill their stores as the informers would.
func directoryOn(t *testing.T, placed sets.Set[types.UID]) *Directory {
	t.Helper()
	pods := cache.NewSharedIndexInformer(&cache.ListWatch{}, &v1.Pod{}, 0, cache.Indexers{})
	groups := cache.NewSharedIndexInformer(&cache.ListWatch{}, &pgv1alpha1.PodGroup{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	d, err := NewDirectory(pods, groups, PodGroups{Lister: pglisters.NewPodGroupLister(groups.GetIndexer())},
		func(ident.Ref) sets.Set[types.UID] { return placed })
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func labelled(name, group, node string, phase v1.PodPhase) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name), Labels: map[string]string{pgv1alpha1.PodGroupLabel: group}},
		Spec:       v1.PodSpec{NodeName: node},
		Status:     v1.PodStatus{Phase: phase},
	}
}

func podGroup(name string, minMember int32, annotations map[string]string) *pgv1alpha1.PodGroup {
	return &pgv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Annotations: annotations},
		Spec: pgv1alpha1.PodGroupSpec{MinMember: minMember}}
}

func add(t *testing.T, store cache.Indexer, objs ...any) {
	t.Helper()
	for _, o := range objs {
		if err := store.Add(o); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDirectoryResolvesMembersAndSpecs(t *testing.T) {
	d := directoryOn(t, sets.New[types.UID]("a-2"))
	add(t, d.PodGroupIndex(), podGroup("a", 3, nil))
	gated := labelled("a-3", "a", "", v1.PodPending)
	gated.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "wait"}}
	add(t, d.PodIndex(), labelled("a-0", "a", "n1", v1.PodRunning), labelled("a-1", "a", "", v1.PodPending),
		labelled("a-2", "a", "", v1.PodPending), gated, labelled("b-0", "b", "", v1.PodPending),
		&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "ns"}})
	a := ident.Ref{Namespace: "ns", Name: "a"}

	if got := len(d.Members(a)); got != 4 {
		t.Fatalf("Members(a) = %d pods, want 4", got)
	}
	// Bound, placed by the plan and gated members wait for no node.
	if p := d.Pending(a); len(p) != 1 || p[0].Name != "a-1" {
		t.Fatalf("Pending(a) = %v, want [a-1]", p)
	}
	ref, spec, ok, err := d.GangOf(labelled("a-9", "a", "", v1.PodPending))
	if !ok || err != nil || ref != a || spec.MinMember != 3 {
		t.Fatalf("GangOf(member of a) = %v %+v %v %v, want a with minMember 3", ref, spec, ok, err)
	}
	// A group object not (yet) there: the pod is in a gang that cannot be read.
	if ref, _, ok, err := d.GangOf(labelled("b-0", "b", "", v1.PodPending)); !ok || err == nil || ref.Name != "b" {
		t.Fatalf("GangOf(member of b) = %v %v %v, want b and a NotFound error", ref, ok, err)
	}
	if _, ok := d.RefOf(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "ns"}}); ok {
		t.Fatal("RefOf(a plain pod) = true, want false")
	}
	// Without the Workload API served, its gangs read as not found.
	if d.WatchesWorkloadAPI() || d.Upstream() != nil || d.Composites() != nil {
		t.Fatal("the Workload API reads as served before ServeWorkloadAPI")
	}
	if _, err := d.Spec(ident.Ref{Source: ident.SourceWorkload, Namespace: "ns", Name: "a"}); err == nil {
		t.Fatal("Spec of a Workload API gang without the API served: no error")
	}
}

func TestDirectoryDependents(t *testing.T) {
	d := directoryOn(t, nil)
	add(t, d.PodGroupIndex(),
		podGroup("pretrain", 2, nil),
		podGroup("finetune", 1, map[string]string{phalanxv1alpha1.DependsOnAnnotation: "pretrain"}),
		podGroup("eval", 1, map[string]string{phalanxv1alpha1.DependsOnAnnotation: "pretrain,finetune"}))
	pretrain := ident.Ref{Namespace: "ns", Name: "pretrain"}
	got := d.Dependents(pretrain)
	ident.SortRefs(got)
	if len(got) != 2 || got[0].Name != "eval" || got[1].Name != "finetune" {
		t.Fatalf("Dependents(pretrain) = %v, want eval and finetune", got)
	}
	if got := d.DependentsOfPodGroup(ident.Ref{Source: ident.SourceWorkload, Namespace: "ns", Name: "pretrain"}); got != nil {
		t.Fatalf("DependentsOfPodGroup of a Workload API gang = %v, want none (only PodGroups carry depends-on)", got)
	}

	add(t, d.PodIndex(), labelled("pretrain-0", "pretrain", "n1", v1.PodRunning), labelled("pretrain-1", "pretrain", "n2", v1.PodPending))
	for _, tc := range []struct {
		name       string
		dep        gangspec.Spec
		done, need int
	}{
		{"running members from the informer", gangspec.Spec{Ref: pretrain, MinMember: 2}, 1, 2},
		{"the status's count when it is higher", gangspec.Spec{Ref: pretrain, MinMember: 2, Running: 2}, 2, 2},
		{"succeeded members from the status", gangspec.Spec{Ref: pretrain, MinMember: 2, Succeeded: 1}, 2, 2},
		{"a finished gang is done", gangspec.Spec{Ref: pretrain, MinMember: 2, Finished: true}, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dep := tc.dep
			if done, need := d.DependencyProgress(&dep); done != tc.done || need != tc.need {
				t.Fatalf("DependencyProgress = %d/%d, want %d/%d", done, need, tc.done, tc.need)
			}
		})
	}
}

func TestDirectorySubGroupsFromMembers(t *testing.T) {
	d := directoryOn(t, nil)
	add(t, d.PodGroupIndex(), podGroup("a", 4, nil))
	a := ident.Ref{Namespace: "ns", Name: "a"}
	member := labelled("a-0", "a", "", v1.PodPending)
	member.Annotations = map[string]string{phalanxv1alpha1.SubGroupSizeAnnotation: "2", phalanxv1alpha1.SubGroupTopologyRequiredAnnotation: "leaf"}
	d.NoteMember(a, labelled("a-1", "a", "", v1.PodPending)) // declares nothing: not kept
	if d.Tracked() != 0 {
		t.Fatalf("a member without sub-group annotations was kept (%d)", d.Tracked())
	}
	d.NoteMember(a, member)
	spec, err := d.Spec(a)
	if err != nil {
		t.Fatal(err)
	}
	if spec.SubGroups == nil || spec.SubGroups.Err != "" || spec.SubGroups.Size != 2 {
		t.Fatalf("sub-groups from the members' annotations = %+v, want sub-groups of 2", spec.SubGroups)
	}
	d.Forget(a)
	if d.Tracked() != 0 {
		t.Fatalf("Forget left %d entries", d.Tracked())
	}
}

func TestDirectorySpecOfEachSource(t *testing.T) {
	d := directoryOn(t, nil)
	if s := d.SpecOf(cache.DeletedFinalStateUnknown{Obj: podGroup("a", 2, nil)}); s == nil || s.Ref.Name != "a" || s.MinMember != 2 {
		t.Fatalf("SpecOf(a deleted PodGroup's tombstone) = %+v, want a", s)
	}
	if s := d.SpecOf(&v1.Pod{}); s != nil {
		t.Fatalf("SpecOf(a pod) = %+v, want nil", s)
	}
}
