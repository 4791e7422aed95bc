package eviction

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/internal/gang"
)

// fixture is an evictor over a fake client whose pod lister the test keeps
// in step with the client (as the informer would).
type fixture struct {
	ctx     context.Context
	client  *fake.Clientset
	indexer cache.Indexer
	clock   *clocktesting.FakeClock
	events  *events.FakeRecorder
	e       *Evictor
}

func newFixture(t *testing.T, pods []*v1.Pod, served bool, grace time.Duration) *fixture {
	t.Helper()
	f := &fixture{ctx: t.Context(), client: fake.NewClientset(), clock: clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0)),
		events: events.NewFakeRecorder(100), indexer: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})}
	for _, p := range pods {
		if _, err := f.client.CoreV1().Pods(p.Namespace).Create(f.ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := f.indexer.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	servedFn := func(gv, resource string) (bool, error) { return served && resource == "evictionrequests", nil }
	f.e = New(f.client, f.events, corelisters.NewPodLister(f.indexer), servedFn, f.clock, func() time.Duration { return grace })
	return f
}

// sync makes the lister see what the client holds.
func (f *fixture) sync(t *testing.T) {
	t.Helper()
	for _, obj := range f.indexer.List() {
		p := obj.(*v1.Pod)
		if _, err := f.client.CoreV1().Pods(p.Namespace).Get(f.ctx, p.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			if err := f.indexer.Delete(p); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func (f *fixture) present(t *testing.T, name string) bool {
	t.Helper()
	_, err := f.client.CoreV1().Pods("default").Get(f.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

func (f *fixture) requests(t *testing.T) []string {
	t.Helper()
	list, err := f.client.LifecycleV1alpha1().EvictionRequests("default").List(f.ctx, metav1.ListOptions{LabelSelector: GroupLabel})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range list.Items {
		if r.Spec.Requester != Requester || r.Spec.Target.Pod == nil || r.Spec.Target.Pod.UID == "" || r.Annotations[DeadlineAnnotation] == "" {
			t.Fatalf("request %s: requester %q, target %v, deadline %q", r.Name, r.Spec.Requester, r.Spec.Target.Pod, r.Annotations[DeadlineAnnotation])
		}
		names = append(names, r.Name)
	}
	return names
}

func gangPods(responders bool) []*v1.Pod {
	var pods []*v1.Pod
	for i, name := range []string{"m-0", "m-1", "m-2"} {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(time.Unix(int64(1_700_000_000+i), 0))},
			Spec: v1.PodSpec{NodeName: "n0"}, Status: v1.PodStatus{Phase: v1.PodRunning}}
		if responders {
			p.Spec.EvictionResponders = []v1.EvictionResponder{{Name: "trainer.example.com/checkpoint", Priority: ptr.To[int32](10000)}}
		}
		pods = append(pods, p)
	}
	return pods
}

// TestEvict: a gang moved by consolidation, on a server that serves
// EvictionRequests, whose pods name a responder, is asked to leave (one
// request per pod, none deleted, all of one move under one group); once one
// member has left, or once the grace has passed, the rest are deleted; the
// requests go once every pod is gone. Without responders, without the API,
// with a grace of 0, or for any other reason, the pods are deleted at once.
func TestEvict(t *testing.T) {
	const grace = time.Minute
	tests := []struct {
		name       string
		served     bool
		responders bool
		grace      time.Duration
		reason     string
		then       string // after the request: "member left" or "grace over"
		asked      bool
	}{
		{name: "a member leaves, the rest follow", served: true, responders: true, grace: grace, reason: gang.ReasonConsolidated, then: "member left", asked: true},
		{name: "nobody answers within the grace", served: true, responders: true, grace: grace, reason: gang.ReasonConsolidated, then: "grace over", asked: true},
		{name: "no responders", served: true, grace: grace, reason: gang.ReasonConsolidated},
		{name: "API not served", responders: true, grace: grace, reason: gang.ReasonConsolidated},
		{name: "grace 0", served: true, responders: true, reason: gang.ReasonConsolidated},
		{name: "reclaim deletes", served: true, responders: true, grace: grace, reason: "Reclaimed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := gangPods(tt.responders)
			f := newFixture(t, pods, tt.served, tt.grace)
			f.e.Evict(f.ctx, pods, tt.reason, "moved for gang default/wide")
			if !tt.asked {
				if got := f.requests(t); len(got) != 0 {
					t.Fatalf("EvictionRequests %v made, want none", got)
				}
				for _, p := range pods {
					if f.present(t, p.Name) {
						t.Fatalf("%s still there, want it deleted at once", p.Name)
					}
				}
				if n := len(f.events.Events); n != len(pods) {
					t.Fatalf("%d events, want one per deleted pod", n)
				}
				return
			}
			if got := f.requests(t); len(got) != len(pods) {
				t.Fatalf("EvictionRequests %v, want one per pod (%d)", got, len(pods))
			}
			f.e.Sweep(f.ctx)
			for _, p := range pods {
				if !f.present(t, p.Name) {
					t.Fatalf("%s deleted before any member left or the grace ended", p.Name)
				}
			}
			switch tt.then {
			case "member left":
				if err := f.client.CoreV1().Pods("default").Delete(f.ctx, "m-0", metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				f.sync(t)
			case "grace over":
				f.clock.Step(grace - time.Second)
				f.e.Sweep(f.ctx)
				if !f.present(t, "m-0") {
					t.Fatal("m-0 deleted before the grace ended")
				}
				f.clock.Step(time.Second)
			}
			f.e.Sweep(f.ctx)
			for _, p := range pods {
				if f.present(t, p.Name) {
					t.Fatalf("%s still there after %s", p.Name, tt.then)
				}
			}
			f.sync(t)
			f.e.Sweep(f.ctx)
			if got := f.requests(t); len(got) != 0 {
				t.Fatalf("EvictionRequests %v left after every pod went", got)
			}
			// The next sweep finds none left; from then on sweeps do not list.
			f.e.Sweep(f.ctx)
			before := len(f.client.Actions())
			f.e.Sweep(f.ctx)
			if after := len(f.client.Actions()); after != before {
				t.Fatalf("a sweep with nothing outstanding made %d API calls", after-before)
			}
		})
	}
}

// TestSweepFinishesPreviousLeader: requests a previous leader made (found
// by their label at the first sweep) are completed: past their deadline the
// pods still running are deleted.
func TestSweepFinishesPreviousLeader(t *testing.T) {
	pods := gangPods(true)
	f := newFixture(t, pods, true, time.Minute)
	earlier := New(f.client, f.events, corelisters.NewPodLister(f.indexer), f.e.Served, f.clock, f.e.Grace)
	earlier.Evict(f.ctx, pods, gang.ReasonConsolidated, "moved")
	if got := f.requests(t); len(got) != 3 {
		t.Fatalf("the earlier leader made %v, want 3 requests", got)
	}
	f.clock.Step(2 * time.Minute)
	f.e.Sweep(f.ctx) // the new leader's first sweep
	for _, p := range pods {
		if f.present(t, p.Name) {
			t.Fatalf("%s still there past the earlier leader's deadline", p.Name)
		}
	}
}
