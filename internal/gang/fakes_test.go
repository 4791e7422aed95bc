package gang

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/lifecycle"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Fakes of the manager's ports, shared by the manager's tests.

// t0 is the fake clock's start.
var t0 = time.Unix(10_000, 0)

func cpu(m int64) resources.List { return resources.List{v1.ResourceCPU: m} }

// mpod is a pod in namespace ns asking cpuM millicores, with priority prio.
func mpod(name string, cpuM int64, prio int32) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name),
			CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))},
		Spec: v1.PodSpec{
			Priority: &prio,
			Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(cpuM, resource.DecimalSI)},
			}}},
		},
	}
}

// members returns n pods named prefix-0..n-1.
func members(prefix string, n int, cpuM int64, prio int32) []*v1.Pod {
	out := make([]*v1.Pod, n)
	for i := range out {
		out[i] = mpod(fmt.Sprintf("%s-%d", prefix, i), cpuM, prio)
	}
	return out
}

// boundAtTime marks a running pod bound to node at t.
func boundAtTime(p *v1.Pod, node string, t time.Time) *v1.Pod {
	p.Spec.NodeName = node
	p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(t)}}
	return p
}

func withQueue(q string, pods ...*v1.Pod) []*v1.Pod {
	for _, p := range pods {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels["queue"] = q
	}
	return pods
}

func queueOf(p *v1.Pod) string { return p.Labels["queue"] }

// fakeDir is a Directory over maps.
type fakeDir struct {
	specs   map[ident.Ref]*gangspec.Spec
	refOf   map[types.UID]ident.Ref
	pending map[ident.Ref][]*v1.Pod
}

func newFakeDir() *fakeDir {
	return &fakeDir{specs: map[ident.Ref]*gangspec.Spec{}, refOf: map[types.UID]ident.Ref{}, pending: map[ident.Ref][]*v1.Pod{}}
}

// gang defines a gang of pods with minMember min and the gang's priority.
func (d *fakeDir) gang(name string, min int, prio int32, pods ...*v1.Pod) *gangspec.Spec {
	ref := ident.Ref{Namespace: "ns", Name: name}
	s := &gangspec.Spec{Ref: ref, UID: types.UID("pg-" + name), MinMember: min, Created: t0.Add(-time.Hour), Priority: &prio}
	d.specs[ref] = s
	for _, p := range pods {
		d.refOf[p.UID] = ref
	}
	return s
}

func (d *fakeDir) Spec(ref ident.Ref) (*gangspec.Spec, error) {
	if s, ok := d.specs[ref]; ok {
		return s, nil
	}
	return nil, fmt.Errorf("group %s not found", ref)
}

func (d *fakeDir) RefOf(p *v1.Pod) (ident.Ref, bool) {
	r, ok := d.refOf[p.UID]
	return r, ok
}

func (d *fakeDir) PriorityOf(p *v1.Pod) int32 {
	if r, ok := d.refOf[p.UID]; ok {
		return d.specs[r].PriorityOf(p)
	}
	return corev1helpers.PodPriority(p)
}

func (d *fakeDir) Pending(ref ident.Ref) []*v1.Pod { return d.pending[ref] }

func (d *fakeDir) Members(ref ident.Ref) []*v1.Pod { return d.pending[ref] }

// fakeFx records every effect.
type condition struct {
	ref             ident.Ref
	reason, message string
}

type eviction struct {
	pods            []string
	reason, message string
}

type fakeFx struct {
	mu        sync.Mutex
	conds     []condition
	wakes     []ident.Ref // Wake: a planned gang, whole
	retries   []retry     // WakeOne: through one member
	activated []string
	evictions []eviction
	observed  []string
	evicted   []string // reason/forQueue/victims
}

func (f *fakeFx) SetCondition(spec *gangspec.Spec, reason, message string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.conds = append(f.conds, condition{spec.Ref, reason, message})
}

type retry struct {
	ref ident.Ref
	why string
}

func (f *fakeFx) WakeOne(ref ident.Ref, why string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.retries = append(f.retries, retry{ref, why})
}

func (f *fakeFx) Wake(ref ident.Ref) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wakes = append(f.wakes, ref)
}

func (f *fakeFx) Activate(pod *v1.Pod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.activated = append(f.activated, pod.Name)
}

func (f *fakeFx) Evict(_ context.Context, pods []*v1.Pod, reason, message string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	names := make([]string, len(pods))
	for i, p := range pods {
		names[i] = p.Name
	}
	f.evictions = append(f.evictions, eviction{names, reason, message})
}

func (f *fakeFx) Observe(outcome string, _ time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.observed = append(f.observed, outcome)
}

func (f *fakeFx) Evicted(reason, forQueue string, victims int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.evicted = append(f.evicted, fmt.Sprintf("%s/%s/%d", reason, forQueue, victims))
}

// calls is the number of effects recorded.
func (f *fakeFx) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.conds) + len(f.wakes) + len(f.retries) + len(f.activated) + len(f.evictions) + len(f.observed) + len(f.evicted)
}

// cond returns the last condition set on ref.
func (f *fakeFx) cond(ref ident.Ref) (condition, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.conds) - 1; i >= 0; i-- {
		if f.conds[i].ref == ref {
			return f.conds[i], true
		}
	}
	return condition{}, false
}

func (f *fakeFx) woken(ref ident.Ref) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.wakes {
		if r == ref {
			n++
		}
	}
	return n
}

// retried counts the gang's retries through one member for why.
func (f *fakeFx) retried(ref ident.Ref, why string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.retries {
		if r.ref == ref && r.why == why {
			n++
		}
	}
	return n
}

// fnode is a node of the fake cluster: free CPU, its rack and the pods it
// runs.
type fnode struct {
	name string
	free int64
	rack string
	pods []*v1.Pod
}

// cluster is a fixed cluster the fake prober shows.
type cluster struct {
	nodes  []fnode
	probes int
}

// Probe returns the fixed view; a node fits the pod when its free CPU takes
// the pod's request, else it fails for capacity only.
func (c *cluster) Probe(_ context.Context, pod *v1.Pod) *View {
	c.probes++
	req := resources.PodRequests(pod)
	v := &View{}
	for _, n := range c.nodes {
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: map[string]string{"rack": n.rack}}}
		v.Nodes = append(v.Nodes, planner.NodeState{Node: node, Free: cpu(n.free), FreePods: 110})
		if cpu(n.free).Fits(req) {
			v.Verdicts = append(v.Verdicts, planner.Verdict{Fits: true})
		} else {
			v.Verdicts = append(v.Verdicts, planner.Verdict{ResourceOnly: true, Plugin: "NodeResourcesFit", Reasons: []string{"Insufficient cpu"}})
		}
	}
	nodes := c.nodes
	v.PodsOn = func(i int) []*v1.Pod { return nodes[i].pods }
	return v
}

// topology is a fake Topology with one level, rack.
func (c *cluster) topology() fakeTopology {
	t := fakeTopology{}
	for _, n := range c.nodes {
		t[n.name] = n.rack
	}
	return t
}

type fakeTopology map[string]string

func (t fakeTopology) Levels() []string             { return []string{"rack"} }
func (t fakeTopology) Domains(node string) []string { return []string{t[node]} }

// recorder is the lifecycle's listener: the teardowns it heard.
type recorder struct {
	mu       sync.Mutex
	released []teardown
}

type teardown struct {
	ref             ident.Ref
	reserved        []types.UID
	reason, message string
}

func (r *recorder) Released(ref ident.Ref, reserved []types.UID, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.released = append(r.released, teardown{ref: ref, reserved: reserved, reason: reason, message: message})
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.released)
}

// env is a manager over fake ports and a fake clock.
type env struct {
	m   *Manager
	clk *testingclock.FakeClock
	dir *fakeDir
	fx  *fakeFx
	rec *recorder
}

func newEnv() *env {
	clk := testingclock.NewFakeClock(t0)
	rec := &recorder{}
	dir, fx := newFakeDir(), &fakeFx{}
	m := NewManager(lifecycle.NewLifecycle(clk, rec), dir, fx, nil)
	m.Timeout = 30 * time.Second
	m.ReserveAfter = time.Minute
	return &env{m: m, clk: clk, dir: dir, fx: fx, rec: rec}
}

// attempt is the cycle of the gang's first pending member.
func (e *env) attempt(spec *gangspec.Spec, c *cluster) *Attempt {
	pod := e.dir.pending[spec.Ref][0]
	return &Attempt{Pod: pod, Ref: spec.Ref, Spec: spec, Priority: spec.PriorityOf(pod), Prober: c}
}

// waitReleased waits for the listener (lifecycle timers release in a
// goroutine) to have heard n teardowns.
func (e *env) waitReleased(n int) bool {
	deadline := time.Now().Add(5 * time.Second)
	for e.rec.count() < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	return e.rec.count() == n
}

func heldCPU(lc *lifecycle.Lifecycle, node string, except ident.Ref, prio int32) int64 {
	held, _ := lc.Held(node, except, prio)
	return held[v1.ResourceCPU]
}
