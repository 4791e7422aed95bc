package apifollow

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/internal/served"
	"github.com/phalanx-sched/phalanx/internal/workload"
)

const ns = "default"

// published is one call of Publish.
type published struct {
	up   *workload.Upstream
	comp *workload.Composites
}

type fixture struct {
	t      *testing.T
	f      *Follower
	client *fake.Clientset

	mu        sync.Mutex
	serves    served.WorkloadAPI
	published []published
	adds      map[string]int
}

func newFixture(t *testing.T, objs ...k8sruntime.Object) *fixture {
	x := &fixture{t: t, client: fake.NewClientset(objs...), adds: map[string]int{}}
	x.f = New(Ports{
		Client: x.client,
		Served: x.served,
		Transform: func(obj any) (any, error) {
			if a, err := meta.Accessor(obj); err == nil {
				a.SetManagedFields(nil)
			}
			return obj, nil
		},
		Publish: func(up *workload.Upstream, comp *workload.Composites) {
			x.mu.Lock()
			defer x.mu.Unlock()
			x.published = append(x.published, published{up, comp})
		},
		Events: cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
			x.mu.Lock()
			defer x.mu.Unlock()
			a, _ := meta.Accessor(obj)
			x.adds[a.GetName()]++
		}},
	})
	return x
}

// served is the fake discovery: what x.serves says.
func (x *fixture) served(gv, resource string) (bool, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	switch gv + "/" + resource {
	case "scheduling.k8s.io/v1beta1/podgroups":
		return x.serves.PodGroups, nil
	case "scheduling.k8s.io/v1beta1/workloads":
		return x.serves.Workloads, nil
	case "scheduling.k8s.io/v1alpha3/compositepodgroups":
		return x.serves.Composites, nil
	}
	return false, nil
}

func (x *fixture) serve(w served.WorkloadAPI) {
	x.mu.Lock()
	x.serves = w
	x.mu.Unlock()
}

func (x *fixture) publishes() []published {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]published(nil), x.published...)
}

func (x *fixture) last() published {
	x.t.Helper()
	p := x.publishes()
	if len(p) == 0 {
		x.t.Fatal("nothing published")
	}
	return p[len(p)-1]
}

func (x *fixture) added(name string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.adds[name]
}

func podGroup(name, parent string) *schedulingv1beta1.PodGroup {
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
	if parent != "" {
		pg.Spec.ParentCompositePodGroupName = ptr.To(parent)
	}
	return pg
}

func objects() []k8sruntime.Object {
	return []k8sruntime.Object{
		podGroup("solo", ""), podGroup("child", "top"),
		&schedulingv1beta1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wl"}},
		&schedulingv1alpha3.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "top"}},
	}
}

// TestServedStartsInformers: what the API server serves is read, its
// adapters are published with listers already synced, and the groups'
// events reach the handler; what is not served has no adapter.
func TestServedStartsInformers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		serve served.WorkloadAPI
	}{
		{name: "PodGroups only", serve: served.WorkloadAPI{PodGroups: true}},
		{name: "with Workloads", serve: served.WorkloadAPI{PodGroups: true, Workloads: true}},
		{name: "everything", serve: served.WorkloadAPI{PodGroups: true, Workloads: true, Composites: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			x := newFixture(t, objects()...)
			x.serve(tc.serve)
			x.f.Check(ctx)
			if n := len(x.publishes()); n != 1 {
				t.Fatalf("%d publishes, want 1", n)
			}
			p := x.last()
			if p.up == nil {
				t.Fatal("no upstream adapter published")
			}
			pg, err := p.up.PodGroups.PodGroups(ns).Get("solo")
			if err != nil {
				t.Fatalf("the PodGroups lister: %v", err)
			}
			if pg.ManagedFields != nil {
				t.Errorf("managedFields %v cached, want them trimmed", pg.ManagedFields)
			}
			if (p.up.Workloads != nil) != tc.serve.Workloads {
				t.Errorf("Workloads lister %v, want one only when served", p.up.Workloads)
			} else if p.up.Workloads != nil {
				if _, err := p.up.Workloads.Workloads(ns).Get("wl"); err != nil {
					t.Errorf("the Workloads lister: %v", err)
				}
			}
			if (p.comp != nil) != tc.serve.Composites {
				t.Fatalf("Composites %v, want an adapter only when served", p.comp)
			}
			if p.comp != nil {
				if _, err := p.comp.Lister.CompositePodGroups(ns).Get("top"); err != nil {
					t.Errorf("the CompositePodGroups lister: %v", err)
				}
				children := p.comp.Children(ns, "top")
				if len(children) != 1 || children[0].Name != "child" {
					t.Errorf("children of top: %v, want [child]", children)
				}
			}
			want := map[string]int{"solo": 1, "child": 1}
			if tc.serve.Composites {
				want["top"] = 1
			}
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
				ok := true
				for name, n := range want {
					ok = ok && x.added(name) == n
				}
				if ok {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("adds of solo, child, top: %d, %d, %d; want %v", x.added("solo"), x.added("child"), x.added("top"), want)
				}
			}
			// Nothing changed: nothing is applied again.
			x.f.Check(ctx)
			if n := len(x.publishes()); n != 1 {
				t.Errorf("%d publishes after a Check that found the same, want 1", n)
			}
		})
	}
}

// TestUnservedWithdraws: a look that finds the API no longer served
// withdraws the adapters; one that finds it again publishes new ones.
func TestUnservedWithdraws(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	x := newFixture(t, objects()...)
	x.f.Check(ctx)
	if n := len(x.publishes()); n != 0 {
		t.Fatalf("%d publishes while nothing is served, want 0", n)
	}
	all := served.WorkloadAPI{PodGroups: true, Workloads: true, Composites: true}
	x.serve(all)
	x.f.Check(ctx)
	first := x.last()
	x.serve(served.WorkloadAPI{})
	x.f.Check(ctx)
	if p := x.last(); p.up != nil || p.comp != nil || len(x.publishes()) != 2 {
		t.Fatalf("publishes %v, want the adapters withdrawn", x.publishes())
	}
	x.serve(all)
	x.f.Check(ctx)
	again := x.last()
	if again.up == nil || again.comp == nil || again.up == first.up {
		t.Fatalf("published %+v again, want new adapters", again)
	}
	if _, err := again.up.PodGroups.PodGroups(ns).Get("child"); err != nil {
		t.Errorf("the new PodGroups lister: %v", err)
	}
	// Fewer served resources restart the informers without the rest.
	x.serve(served.WorkloadAPI{PodGroups: true})
	x.f.Check(ctx)
	p := x.publishes()
	if n := len(p); n != 5 || p[3].up != nil || p[4].up == nil || p[4].up.Workloads != nil || p[4].comp != nil {
		t.Errorf("publishes %v, want a withdrawal then PodGroups alone", p)
	}
}

// TestFailedStartRetries: informers that do not sync withdraw the adapters
// they published, and the next look tries again.
func TestFailedStartRetries(t *testing.T) {
	x := newFixture(t, objects()...)
	var mu sync.Mutex
	fail := true
	x.client.PrependReactor("list", "podgroups", func(clienttesting.Action) (bool, k8sruntime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			return true, nil, errors.New("forbidden")
		}
		return false, nil, nil
	})
	x.serve(served.WorkloadAPI{PodGroups: true})
	// A context that has ended stops the wait for the first list at once.
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	x.f.Check(ended)
	p := x.publishes()
	if len(p) != 2 || p[0].up == nil || p[1].up != nil {
		t.Fatalf("publishes %v, want the adapters published then withdrawn", p)
	}
	mu.Lock()
	fail = false
	mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	x.f.Check(ctx)
	if p := x.last(); p.up == nil || len(x.publishes()) != 3 {
		t.Fatalf("publishes %v, want the adapters published again", x.publishes())
	}
	if _, err := x.last().up.PodGroups.PodGroups(ns).Get("solo"); err != nil {
		t.Errorf("the PodGroups lister: %v", err)
	}
}

func TestIndexByParent(t *testing.T) {
	for _, tc := range []struct {
		name string
		obj  any
		want []string
	}{
		{name: "child", obj: podGroup("c", "top"), want: []string{"default/top"}},
		{name: "no parent", obj: podGroup("c", "")},
		{name: "not a PodGroup", obj: &schedulingv1beta1.Workload{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := indexByParent(tc.obj)
			if err != nil || len(got) != len(tc.want) || (len(got) == 1 && got[0] != tc.want[0]) {
				t.Errorf("indexByParent = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
