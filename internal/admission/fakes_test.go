package admission

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/queue"
	"github.com/phalanx-sched/phalanx/internal/resources"
	phalanxfake "github.com/phalanx-sched/phalanx/pkg/generated/clientset/versioned/fake"
	phalanxlisters "github.com/phalanx-sched/phalanx/pkg/generated/listers/scheduling/v1alpha1"
)

// gangs is a fake of the gang directory: a gang's members are the pods of
// the pod indexer it was given, so a pod deleted from the informer's index
// leaves its gang as it does in the scheduler.
type gangs struct {
	mu    sync.Mutex
	pods  cache.Indexer
	of    map[types.UID]ident.Ref
	specs map[ident.Ref]*gangspec.Spec
}

func (g *gangs) RefOf(pod *v1.Pod) (ident.Ref, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ref, ok := g.of[pod.UID]
	return ref, ok
}

func (g *gangs) GangOf(pod *v1.Pod) (ident.Ref, *gangspec.Spec, bool, error) {
	ref, ok := g.RefOf(pod)
	if !ok {
		return ident.Ref{}, nil, false, nil
	}
	spec, err := g.Spec(ref)
	return ref, spec, err == nil, err
}

func (g *gangs) Spec(ref ident.Ref) (*gangspec.Spec, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s, ok := g.specs[ref]; ok {
		return s, nil
	}
	return nil, fmt.Errorf("no gang %s", ref)
}

func (g *gangs) Members(ref ident.Ref) []*v1.Pod {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []*v1.Pod
	for _, obj := range g.pods.List() {
		if p := obj.(*v1.Pod); g.of[p.UID] == ref {
			out = append(out, p)
		}
	}
	return out
}

func (g *gangs) Pending(ref ident.Ref) []*v1.Pod {
	var out []*v1.Pod
	for _, p := range g.Members(ref) {
		if p.Spec.NodeName == "" {
			out = append(out, p)
		}
	}
	return out
}

// holds is a fake of the gang lifecycle's holds.
type holds struct {
	mu      sync.Mutex
	placed  map[types.UID]bool
	held    map[ident.Ref]resources.List
	stalled []ident.Ref
}

func (h *holds) IsPlaced(_ ident.Ref, uid types.UID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.placed[uid]
}

func (h *holds) HeldByGang() map[ident.Ref]resources.List {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.held)
}

func (h *holds) Stalled() []ident.Ref {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.stalled)
}

// wakes records what the accounting woke, in order: "lead <gang>" for
// WakeLead, "pods <ns/name,...>" for each Activate (sorted keys).
type wakes struct {
	mu           sync.Mutex
	log          []string
	orderChanged int
	orders       int
}

func (w *wakes) wakeLead(reason string, ref ident.Ref) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.log = append(w.log, reason+" lead "+ref.String())
}

func (w *wakes) activate(reason string, pods map[string]*v1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.log = append(w.log, fmt.Sprintf("%s pods %v", reason, slices.Sorted(maps.Keys(pods))))
}

func (w *wakes) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.log
	w.log = nil
	return out
}

type fixture struct {
	t          *testing.T
	clock      *clocktesting.FakeClock
	pods       cache.Indexer
	namespaces cache.Indexer
	queues     cache.Indexer
	nodes      map[string]*v1.Node
	client     *phalanxfake.Clientset
	gangs      *gangs
	holds      *holds
	wakes      *wakes
	q          *Queues

	mu sync.Mutex
	// extra is demand a pod asks for beyond its containers' requests
	// (devices of its claims).
	extra map[types.UID]resources.List
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newFixture(t *testing.T, opts Options) *fixture {
	f := &fixture{
		t: t, clock: clocktesting.NewFakeClock(t0),
		pods:       cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		namespaces: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		queues:     cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		nodes:      map[string]*v1.Node{},
		client:     phalanxfake.NewSimpleClientset(),
		holds:      &holds{placed: map[types.UID]bool{}, held: map[ident.Ref]resources.List{}},
		wakes:      &wakes{},
		extra:      map[types.UID]resources.List{},
	}
	f.gangs = &gangs{pods: f.pods, of: map[types.UID]ident.Ref{}, specs: map[ident.Ref]*gangspec.Spec{}}
	if opts.DefaultQueue == "" {
		opts.DefaultQueue = "default"
	}
	f.q = New(Ports{
		Gangs: f.gangs, Holds: f.holds,
		Demand: func(pod *v1.Pod) resources.List {
			l := resources.PodRequests(pod)
			f.mu.Lock()
			l.Add(f.extra[pod.UID])
			f.mu.Unlock()
			return l
		},
		Order: func(pod *v1.Pod, q *Queues) ident.Order {
			f.wakes.mu.Lock()
			f.wakes.orders++
			f.wakes.mu.Unlock()
			return ident.Order{Queue: q.QueueOf(pod), Priority: *pod.Spec.Priority, Created: pod.CreationTimestamp.Time,
				Namespace: pod.Namespace, Name: pod.Name}
		},
		OrderChanged: func() { f.wakes.mu.Lock(); f.wakes.orderChanged++; f.wakes.mu.Unlock() },
		WakeLead:     f.wakes.wakeLead,
		Activate:     f.wakes.activate,
		Namespaces:   corelisters.NewNamespaceLister(f.namespaces),
		Pods:         corelisters.NewPodLister(f.pods),
		Queues:       phalanxlisters.NewQueueLister(f.queues),
		Client:       f.client,
		Node: func(name string) (*v1.Node, error) {
			if n, ok := f.nodes[name]; ok {
				return n, nil
			}
			return nil, fmt.Errorf("no node %s", name)
		},
		Clock: f.clock,
	}, opts)
	return f
}

// pod builds a pod asking for cpu millicores, created at t0 plus created
// seconds; labels may name its queue.
func pod(ns, name string, cpu int64, created int, labels map[string]string) *v1.Pod {
	prio := int32(0)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name), Labels: labels,
			CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(created) * time.Second))},
		Spec: v1.PodSpec{Priority: &prio, Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(cpu, resource.DecimalSI)}}}}},
		Status: v1.PodStatus{Phase: v1.PodPending},
	}
}

func inQueue(name string) map[string]string { return map[string]string{queue.Label: name} }

func bound(p *v1.Pod, node string) *v1.Pod {
	p = p.DeepCopy()
	p.Spec.NodeName, p.Status.Phase = node, v1.PodRunning
	return p
}

// addPod puts the pod in the informer's index and hands it to the pod handler.
func (f *fixture) addPod(p *v1.Pod) {
	f.t.Helper()
	if err := f.pods.Add(p); err != nil {
		f.t.Fatal(err)
	}
	f.q.PodHandler().AddFunc(p)
}

func (f *fixture) updatePod(p *v1.Pod) {
	f.t.Helper()
	old, _, _ := f.pods.Get(p)
	if err := f.pods.Update(p); err != nil {
		f.t.Fatal(err)
	}
	f.q.PodHandler().UpdateFunc(old, p)
}

// deletePod removes the pod from the index first, as the informer does.
func (f *fixture) deletePod(p *v1.Pod) {
	f.t.Helper()
	if err := f.pods.Delete(p); err != nil {
		f.t.Fatal(err)
	}
	f.q.PodHandler().DeleteFunc(p)
}

// addGang registers a gang of the given group labels over members.
func (f *fixture) addGang(ns, name string, labels map[string]string, members ...*v1.Pod) ident.Ref {
	ref := ident.Ref{Namespace: ns, Name: name}
	f.gangs.mu.Lock()
	f.gangs.specs[ref] = &gangspec.Spec{Ref: ref, MinMember: len(members), Labels: labels}
	for _, m := range members {
		f.gangs.of[m.UID] = ref
	}
	f.gangs.mu.Unlock()
	for _, m := range members {
		f.addPod(m)
	}
	return ref
}

func (f *fixture) addNamespace(name string, labels map[string]string) *v1.Namespace {
	f.t.Helper()
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := f.namespaces.Add(ns); err != nil {
		f.t.Fatal(err)
	}
	return ns
}

func (f *fixture) addNode(name string, cpu int64) {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(cpu, resource.DecimalSI)}}}
	f.nodes[name] = n
	f.q.NodeHandler().AddFunc(n)
}

func (f *fixture) addQueue(name string) *phalanxv1alpha1.Queue {
	f.t.Helper()
	o := &phalanxv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: phalanxv1alpha1.QueueSpec{Weight: 1}}
	if err := f.queues.Add(o); err != nil {
		f.t.Fatal(err)
	}
	f.q.QueueHandler().AddFunc(o)
	return o
}

// cpu reads a queue's cpu from a snapshot map.
func cpu(m map[string]resources.List, q string) int64 { return m[q][v1.ResourceCPU] }

// eventually polls cond until it holds or a deadline passes: the wakes run
// on a goroutine of their own.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 5*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
