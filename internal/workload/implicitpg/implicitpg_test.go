package implicitpg

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pgfake "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned/fake"
	pglisters "sigs.k8s.io/scheduler-plugins/pkg/generated/listers/scheduling/v1alpha1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/status"
	"github.com/phalanx-sched/phalanx/internal/workload"
)

const ns = "default"

// fakeDirectory resolves each pod to the implicit gang set for it by name;
// exists holds the gangs whose group object it has.
type fakeDirectory struct {
	implicit map[string]*workload.Implicit
	exists   map[ident.Ref]bool
}

func (d *fakeDirectory) Resolve(pod *v1.Pod) (ident.Ref, *workload.Implicit, bool, error) {
	im, ok := d.implicit[pod.Name]
	if !ok {
		return ident.Ref{}, nil, false, nil
	}
	return ident.Ref{Namespace: pod.Namespace, Name: im.Name}, im, true, nil
}

func (d *fakeDirectory) Spec(ref ident.Ref) (*gangspec.Spec, error) {
	if d.exists[ref] {
		return &gangspec.Spec{Ref: ref}, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "podgroups"}, ref.Name)
}

// event is a pod event the maker recorded.
type event struct{ pod, reason, msg string }

type fixture struct {
	t       *testing.T
	m       *Maker
	dir     *fakeDirectory
	client  *pgfake.Clientset
	pods    cache.Indexer
	groups  cache.Indexer
	leading bool

	mu     sync.Mutex
	events []event
}

func newFixture(t *testing.T, groups ...*pgv1alpha1.PodGroup) *fixture {
	f := &fixture{
		t:       t,
		dir:     &fakeDirectory{implicit: map[string]*workload.Implicit{}, exists: map[ident.Ref]bool{}},
		pods:    cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		groups:  cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		leading: true,
	}
	var objs []k8sruntime.Object
	for _, pg := range groups {
		objs = append(objs, pg)
		if err := f.groups.Add(pg); err != nil {
			t.Fatal(err)
		}
	}
	f.client = pgfake.NewSimpleClientset(objs...)
	f.m = New(Ports{
		Ctx:       context.Background(),
		Leading:   func() bool { return f.leading },
		Directory: f.dir,
		Pods:      corelisters.NewPodLister(f.pods),
		Client:    f.client,
		PodGroups: pglisters.NewPodGroupLister(f.groups),
		PodEvent: func(pod *v1.Pod, reason, msg string) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.events = append(f.events, event{pod.Name, reason, msg})
		},
	})
	return f
}

// member is a pending pod of the implicit gang im, in the pod lister.
func (f *fixture) member(name string, im workload.Implicit, created time.Time) *v1.Pod {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name),
		CreationTimestamp: metav1.NewTime(created)}}
	f.dir.implicit[name] = &im
	if err := f.pods.Add(pod); err != nil {
		f.t.Fatal(err)
	}
	return pod
}

// count is how many of the client's actions have the verb.
func (f *fixture) count(verb string) int {
	n := 0
	for _, a := range f.client.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == "podgroups" {
			n++
		}
	}
	return n
}

// eventually polls cond, which background writes make true.
func (f *fixture) eventually(what string, cond func() bool) {
	f.t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			f.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (f *fixture) podGroup(name string) *pgv1alpha1.PodGroup {
	f.t.Helper()
	pg, err := f.client.SchedulingV1alpha1().PodGroups(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return pg
}

func (f *fixture) recorded() []event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]event(nil), f.events...)
}

func jobOwner(name string) *metav1.OwnerReference {
	return &metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: name, UID: types.UID("uid-job-" + name)}
}

var epoch = time.Unix(1_000_000, 0)

// TestLeaderCreatesOnce: the leader creates an implicit gang's PodGroup,
// owned by its workload, once however many members ask while it is made or
// after.
func TestLeaderCreatesOnce(t *testing.T) {
	f := newFixture(t)
	im := workload.Implicit{Name: "job-train", MinMember: 2, Workload: "Job train", Owner: jobOwner("train")}
	a, b := f.member("w-0", im, epoch), f.member("w-1", im, epoch.Add(time.Second))
	f.m.EnsureFor(a)
	f.m.EnsureFor(b)
	f.eventually("the PodGroup created", func() bool { return f.count("create") == 1 })
	f.m.EnsureFor(a)
	if n := f.count("create"); n != 1 {
		t.Fatalf("%d creates, want 1", n)
	}
	pg := f.podGroup("job-train")
	if pg.Spec.MinMember != 2 {
		t.Errorf("minMember %d, want 2", pg.Spec.MinMember)
	}
	if want := []metav1.OwnerReference{*im.Owner}; !reflect.DeepEqual(pg.OwnerReferences, want) {
		t.Errorf("owners %v, want %v", pg.OwnerReferences, want)
	}
	if pg.Labels[phalanxv1alpha1.ManagedByLabel] != phalanxv1alpha1.ManagedByValue {
		t.Errorf("labels %v, want the managed-by label", pg.Labels)
	}
	if n := f.m.Tracked(); n != 1 {
		t.Errorf("Tracked() = %d, want 1 (held for good once made)", n)
	}
}

// TestEnsureForSkips: a non-leader, a bound or deleting pod, a pod without
// an implicit gang: nothing is written and nothing claimed.
func TestEnsureForSkips(t *testing.T) {
	im := workload.Implicit{Name: "job-train", MinMember: 2, Owner: jobOwner("train")}
	for _, tc := range []struct {
		name    string
		standby bool
		edit    func(*v1.Pod)
		plain   bool
	}{
		{name: "not leading", standby: true},
		{name: "bound", edit: func(p *v1.Pod) { p.Spec.NodeName = "n1" }},
		{name: "deleting", edit: func(p *v1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: epoch} }},
		{name: "no implicit gang", plain: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.leading = !tc.standby
			pod := f.member("w-0", im, epoch)
			if tc.edit != nil {
				tc.edit(pod)
			}
			if tc.plain {
				delete(f.dir.implicit, pod.Name)
			}
			f.m.EnsureFor(pod)
			f.m.EnsureAll()
			if n := f.m.Tracked(); n != 0 {
				t.Errorf("Tracked() = %d, want 0", n)
			}
			if acts := f.client.Actions(); len(acts) != 0 {
				t.Errorf("actions %v, want none", acts)
			}
		})
	}
}

// TestOwnerAdded: a PodGroup another workload of the same gang-name made
// gets this workload as an owner too, whether the create finds it there
// (AlreadyExists) or the directory already has it, and whether or not the
// informer has it yet.
func TestOwnerAdded(t *testing.T) {
	other := jobOwner("other")
	for _, tc := range []struct {
		name              string
		inDirectory, list bool
		wantCreates       int
	}{
		{name: "already exists", list: true, wantCreates: 1},
		{name: "already exists, informer behind", wantCreates: 1},
		{name: "in the directory", inDirectory: true, list: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			existing := &pgv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared",
				OwnerReferences: []metav1.OwnerReference{*other}}, Spec: pgv1alpha1.PodGroupSpec{MinMember: 4}}
			f := newFixture(t, existing)
			if !tc.list {
				if err := f.groups.Delete(existing); err != nil {
					t.Fatal(err)
				}
			}
			im := workload.Implicit{Name: "shared", MinMember: 4, Workload: "Job train", Owner: jobOwner("train")}
			if tc.inDirectory {
				f.dir.exists[ident.Ref{Namespace: ns, Name: "shared"}] = true
			}
			f.m.EnsureFor(f.member("w-0", im, epoch))
			f.eventually("the owner added", func() bool { return f.count("update") == 1 })
			if n := f.count("create"); n != tc.wantCreates {
				t.Errorf("%d creates, want %d", n, tc.wantCreates)
			}
			want := []metav1.OwnerReference{*other, *im.Owner}
			if got := f.podGroup("shared").OwnerReferences; !reflect.DeepEqual(got, want) {
				t.Errorf("owners %v, want %v", got, want)
			}
			if ev := f.recorded(); len(ev) != 0 {
				t.Errorf("events %v, want none", ev)
			}
		})
	}
}

// TestOwnerPod: an LWS worker names its leader pod; the leader's UID owns
// the PodGroup.
func TestOwnerPod(t *testing.T) {
	f := newFixture(t)
	leader := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lws-0", UID: "uid-leader"}}
	if err := f.pods.Add(leader); err != nil {
		t.Fatal(err)
	}
	im := workload.Implicit{Name: "lws-0", MinMember: 2, OwnerPod: "lws-0"}
	f.m.EnsureFor(f.member("lws-0-1", im, epoch))
	f.eventually("the PodGroup created", func() bool { return f.count("create") == 1 })
	want := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "lws-0", UID: "uid-leader"}}
	if got := f.podGroup("lws-0").OwnerReferences; !reflect.DeepEqual(got, want) {
		t.Errorf("owners %v, want %v", got, want)
	}
}

// TestFailedCreateRetries: a create that fails says so on the pod and
// releases its claim, so the next event tries again.
func TestFailedCreateRetries(t *testing.T) {
	f := newFixture(t)
	failures := 1
	var mu sync.Mutex
	f.client.PrependReactor("create", "podgroups", func(clienttesting.Action) (bool, k8sruntime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if failures > 0 {
			failures--
			return true, nil, errors.New("quota exceeded")
		}
		return false, nil, nil
	})
	im := workload.Implicit{Name: "job-train", MinMember: 2, Workload: "Job train", Owner: jobOwner("train")}
	pod := f.member("w-0", im, epoch)
	f.m.EnsureFor(pod)
	f.eventually("the claim released", func() bool { return f.count("create") == 1 && f.m.Tracked() == 0 })
	want := []event{{"w-0", status.ReasonPodGroupMissing, "creating PodGroup job-train for Job train: quota exceeded"}}
	if got := f.recorded(); !reflect.DeepEqual(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	f.m.EnsureFor(pod)
	f.eventually("the retried create", func() bool { return f.count("create") == 2 && f.m.Tracked() == 1 })
	f.podGroup("job-train")
}

// TestForget: a deleted gang's keys (its own and each owner's) are dropped,
// so that its PodGroup is made again; gangs of other sources are not
// implicit and are left alone.
func TestForget(t *testing.T) {
	f := newFixture(t)
	im := workload.Implicit{Name: "job-train", MinMember: 2, Owner: jobOwner("train")}
	pod := f.member("w-0", im, epoch)
	f.m.EnsureFor(pod)
	f.eventually("the PodGroup created", func() bool { return f.count("create") == 1 })
	// A member naming no owner, once the gang exists, holds the bare key.
	ref := ident.Ref{Namespace: ns, Name: "job-train"}
	f.dir.exists[ref] = true
	f.m.EnsureFor(f.member("w-1", workload.Implicit{Name: "job-train", MinMember: 2}, epoch))
	if n := f.m.Tracked(); n != 2 {
		t.Fatalf("Tracked() = %d, want 2", n)
	}
	delete(f.dir.exists, ref)
	f.m.Forget(ident.Ref{Source: ident.SourceWorkload, Namespace: ns, Name: "job-train"})
	if n := f.m.Tracked(); n != 2 {
		t.Fatalf("after forgetting a Workload API gang: Tracked() = %d, want 2", n)
	}
	f.m.Forget(ref)
	if n := f.m.Tracked(); n != 0 {
		t.Fatalf("after Forget: Tracked() = %d, want 0", n)
	}
	if err := f.client.SchedulingV1alpha1().PodGroups(ns).Delete(context.Background(), "job-train", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.m.EnsureFor(pod)
	f.eventually("the PodGroup made again", func() bool { return f.count("create") == 2 })
	f.podGroup("job-train")
}

// TestEnsureAllOldestFirst: on taking the lead, every pending gang's
// PodGroup is made, each from its oldest member (whose queue label it
// takes), whatever order the lister returns.
func TestEnsureAllOldestFirst(t *testing.T) {
	f := newFixture(t)
	train := workload.Implicit{Name: "job-train", MinMember: 3, Owner: jobOwner("train")}
	eval := workload.Implicit{Name: "job-eval", MinMember: 1, Owner: jobOwner("eval")}
	for i, q := range []string{"late", "early", "later"} {
		pod := f.member("w-"+q, train, epoch.Add(time.Duration([]int{2, 1, 3}[i])*time.Second))
		pod.Labels = map[string]string{phalanxv1alpha1.QueueLabel: q}
		if err := f.pods.Update(pod); err != nil {
			t.Fatal(err)
		}
	}
	f.member("e-0", eval, epoch)
	bound := f.member("b-0", workload.Implicit{Name: "job-done", MinMember: 1, Owner: jobOwner("done")}, epoch)
	bound.Spec.NodeName = "n1"
	if err := f.pods.Update(bound); err != nil {
		t.Fatal(err)
	}
	f.m.EnsureAll()
	f.eventually("both PodGroups created", func() bool { return f.count("create") == 2 })
	if q := f.podGroup("job-train").Labels[phalanxv1alpha1.QueueLabel]; q != "early" {
		t.Errorf("job-train's queue %q, want the oldest member's (early)", q)
	}
	f.podGroup("job-eval")
	if _, err := f.client.SchedulingV1alpha1().PodGroups(ns).Get(context.Background(), "job-done", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a bound pod's PodGroup: err %v, want NotFound", err)
	}
}
