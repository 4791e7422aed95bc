package capacityqueue

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/phalanx-sched/phalanx/apis/config"
	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/plugins/internal/plugintest"
	"github.com/phalanx-sched/phalanx/plugins/runtime"
)

var capacityQueue = plugintest.Plugin{
	Name: Name, Extensions: []string{"PreFilter", "Reserve"},
	New: func(ctx context.Context, h fwk.Handle, rt *runtime.Runtime) (fwk.Plugin, error) {
		return New(ctx, &config.CapacityQueueArgs{DefaultQueue: "default", EnableReclaim: true, MinRuntimeSeconds: 15}, h, rt)
	},
}

func queueObj(name string, weight int32, mutate func(*phalanxv1alpha1.QueueSpec)) *phalanxv1alpha1.Queue {
	q := &phalanxv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: phalanxv1alpha1.QueueSpec{Weight: weight}}
	if mutate != nil {
		mutate(&q.Spec)
	}
	return q
}

func inQueue(p *v1.Pod, q string) *v1.Pod {
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels[phalanxv1alpha1.QueueLabel] = q
	return p
}

func cpus(n string) v1.ResourceList { return v1.ResourceList{v1.ResourceCPU: resource.MustParse(n)} }

func env(t *testing.T, objs plugintest.Objects) (*plugintest.Env, *CapacityQueue) {
	e := plugintest.New(t, objs, capacityQueue)
	pl := e.Plugins[Name].(*CapacityQueue)
	e.Eventually("queues and nodes in the accounting", func() bool {
		s := pl.queues.Snapshot()
		return len(s.Tree.Names()) >= len(objs.Queues) && (len(objs.Nodes) == 0 || !s.Total.IsZero())
	})
	return e, pl
}

// TestAdmission: a gang's whole remaining minimum — the members the planner
// places — or a plain pod's request is admitted against its queue, or
// refused with the reason.
func TestAdmission(t *testing.T) {
	gangPods := func(group, q string, n int, cpu string) []*v1.Pod {
		out := make([]*v1.Pod, n)
		for i := range out {
			out[i] = inQueue(plugintest.Pod(group+"-"+string(rune('a'+i)), group, cpu, 0), q)
		}
		return out
	}
	small := gangPods("small", "team", 3, "1")
	capped := gangPods("capped", "capped", 3, "1")
	closed := gangPods("closed", "closed", 1, "1")
	e, pl := env(t, plugintest.Objects{
		Nodes: []*v1.Node{plugintest.Node("n0", "16", 0, nil)},
		Queues: []*phalanxv1alpha1.Queue{
			queueObj("team", 1, nil),
			queueObj("capped", 1, func(s *phalanxv1alpha1.QueueSpec) { s.Capability = cpus("2") }),
			queueObj("closed", 1, func(s *phalanxv1alpha1.QueueSpec) { s.State = phalanxv1alpha1.QueueStateClosed }),
			queueObj("default", 1, nil),
		},
		PodGroups: []*pgv1alpha1.PodGroup{plugintest.PodGroup("small", 3), plugintest.PodGroup("capped", 3), plugintest.PodGroup("closed", 1)},
		Pods:      append(append(small, capped...), closed...),
	})
	e.Eventually("pods charged", func() bool { return pl.queues.Snapshot().Pending["team"][v1.ResourceCPU] == 3000 })
	for _, tc := range []struct {
		name     string
		pod      *v1.Pod
		wantCode fwk.Code
		wantMsg  string
		wantNeed int64 // millicores charged when admitted
	}{
		{name: "gang within its queue", pod: small[0], wantCode: fwk.Success, wantNeed: 3000},
		{name: "plain pod", pod: inQueue(plugintest.Pod("p", "", "2", 0), "team"), wantCode: fwk.Success, wantNeed: 2000},
		{name: "pod without a queue goes to the default", pod: plugintest.Pod("d", "", "1", 0), wantCode: fwk.Success, wantNeed: 1000},
		{name: "queue capability", pod: capped[0], wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: "queue capped: cpu 3000m of capability 2000m"},
		{name: "closed queue", pod: closed[0], wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: "queue closed is closed"},
		{name: "missing queue", pod: inQueue(plugintest.Pod("m", "", "1", 0), "nope"), wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: "queue nope does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state, _, st := e.Cycle(tc.pod)
			if st.Code() != tc.wantCode || !strings.Contains(st.Message(), tc.wantMsg) {
				t.Fatalf("PreFilter = %v %q, want %v containing %q", st.Code(), st.Message(), tc.wantCode, tc.wantMsg)
			}
			qc := Admission(state)
			if qc == nil {
				t.Fatal("no queue snapshot in the cycle state")
			}
			if tc.wantCode == fwk.Success && (!qc.Admitted || qc.Need[v1.ResourceCPU] != tc.wantNeed) {
				t.Fatalf("admitted %v need %v, want %dm", qc.Admitted, qc.Need, tc.wantNeed)
			}
		})
	}
}

// TestFairness: a queue may go above its deserved share only while no other
// queue waits below its own.
func TestFairness(t *testing.T) {
	used := make([]*v1.Pod, 3)
	for i := range used {
		used[i] = plugintest.OnNode(inQueue(plugintest.Pod("b-run-"+string(rune('a'+i)), "", "1", 0), "b"), "n0")
	}
	waitingA := inQueue(plugintest.Pod("a-wait", "", "1", 0), "a")
	e, pl := env(t, plugintest.Objects{
		Nodes:  []*v1.Node{plugintest.Node("n0", "4", 0, nil)},
		Queues: []*phalanxv1alpha1.Queue{queueObj("a", 1, nil), queueObj("b", 1, nil), queueObj("default", 1, nil)},
		Pods:   append(used, waitingA),
	})
	e.Eventually("pods charged", func() bool {
		s := pl.queues.Snapshot()
		return s.Allocated["b"][v1.ResourceCPU] == 3000 && s.Pending["a"][v1.ResourceCPU] == 1000
	})
	state, _, st := e.Cycle(inQueue(plugintest.Pod("b-more", "", "1", 0), "b"))
	if st.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), "while queue a waits below its share") {
		qc := Admission(state)
		t.Fatalf("b above its share while a waits: %v %q (deserved %v allocated %v pending %v total %v)", st.Code(), st.Message(),
			qc.Snapshot().Deserved, qc.Snapshot().Allocated, qc.Snapshot().Pending, qc.Snapshot().Total)
	}
	if _, _, st := e.Cycle(waitingA); !st.IsSuccess() {
		t.Fatalf("a below its share: %v", st)
	}
}

// TestAdmissionFollowsGangOrder: queues a-hot and b-cold of equal weight,
// each with one waiting gang that would take it above its share, on an idle
// node. Their shares tie, so the gangs' order decides which starts: b-cold's
// gang, submitted first. Tried first, it waits for a-hot's, not yet refused;
// a-hot's, refused after it, yields to it (comparing the queues alone, a
// tie, a-hot's would start); then b-cold's starts.
func TestAdmissionFollowsGangOrder(t *testing.T) {
	group := func(name, q string, created time.Time) *pgv1alpha1.PodGroup {
		pg := plugintest.PodGroup(name, 1)
		pg.Labels = map[string]string{phalanxv1alpha1.QueueLabel: q}
		pg.CreationTimestamp = metav1.NewTime(created)
		return pg
	}
	t0 := time.Unix(1_000_000, 0)
	cold := plugintest.Pod("cold-0", "cold", "4", 0)
	hot := plugintest.Pod("hot-0", "hot", "4", 0)
	e, pl := env(t, plugintest.Objects{
		Nodes:     []*v1.Node{plugintest.Node("n0", "4", 0, nil)},
		Queues:    []*phalanxv1alpha1.Queue{queueObj("a-hot", 1, nil), queueObj("b-cold", 1, nil), queueObj("default", 1, nil)},
		PodGroups: []*pgv1alpha1.PodGroup{group("cold", "b-cold", t0), group("hot", "a-hot", t0.Add(time.Second))},
		Pods:      []*v1.Pod{cold, hot},
	})
	e.Eventually("pods charged", func() bool {
		s := pl.queues.Snapshot()
		return s.Pending["a-hot"][v1.ResourceCPU] == 4000 && s.Pending["b-cold"][v1.ResourceCPU] == 4000
	})
	for _, step := range []struct {
		pod   *v1.Pod
		admit bool
	}{{cold, false}, {hot, false}, {cold, true}} {
		_, _, st := e.Cycle(step.pod)
		if st.IsSuccess() != step.admit {
			t.Fatalf("%s: PreFilter = %v %q, want admitted %v", step.pod.Name, st.Code(), st.Message(), step.admit)
		}
	}
}

// TestCurableRefusal: a queue refused only because a sibling above its share
// fills the parent's capability reaches PostFilter (reclaim may cure it);
// other refusals end the cycle.
func TestCurableRefusal(t *testing.T) {
	vision := make([]*v1.Pod, 4)
	for i := range vision {
		vision[i] = plugintest.OnNode(inQueue(plugintest.Pod("v-"+string(rune('a'+i)), "", "1", 0), "vision"), "n0")
	}
	nlp := inQueue(plugintest.Pod("nlp-0", "", "1", 0), "nlp")
	e, pl := env(t, plugintest.Objects{
		Nodes: []*v1.Node{plugintest.Node("n0", "16", 0, nil)},
		Queues: []*phalanxv1alpha1.Queue{
			queueObj("research", 1, func(s *phalanxv1alpha1.QueueSpec) { s.Capability = cpus("4") }),
			queueObj("vision", 1, func(s *phalanxv1alpha1.QueueSpec) { s.Parent = "research" }),
			queueObj("nlp", 1, func(s *phalanxv1alpha1.QueueSpec) { s.Parent = "research" }),
			queueObj("default", 1, nil),
		},
		Pods: append(vision, nlp),
	})
	e.Eventually("pods charged", func() bool { return pl.queues.Snapshot().Allocated["vision"][v1.ResourceCPU] == 4000 })
	state, _, st := e.Cycle(nlp)
	if st.Code() != fwk.Unschedulable || !strings.Contains(st.Message(), "capability") {
		qc := Admission(state)
		t.Fatalf("nlp refused by research's capability: %v %q, want Unschedulable (curable); deserved %v allocated %v",
			st.Code(), st.Message(), qc.Snapshot().Deserved, qc.Snapshot().Allocated)
	}
	if qc := Admission(state); qc.Admitted || !qc.Snapshot().Curable("nlp", qc.Need) {
		t.Fatalf("queue cycle %+v", qc)
	}
}

// TestReserveCharges: Reserve counts a pod against its queue before it is
// bound; Unreserve gives it back.
func TestReserveCharges(t *testing.T) {
	p := inQueue(plugintest.Pod("p", "", "2", 0), "team")
	e, pl := env(t, plugintest.Objects{
		Nodes:  []*v1.Node{plugintest.Node("n0", "16", 0, nil)},
		Queues: []*phalanxv1alpha1.Queue{queueObj("team", 1, nil), queueObj("default", 1, nil)},
		Pods:   []*v1.Pod{p},
	})
	e.Eventually("pod charged", func() bool { return pl.queues.Snapshot().Pending["team"][v1.ResourceCPU] == 2000 })
	pl.Reserve(e.Ctx, nil, p, "n0")
	if got := pl.queues.Snapshot().Allocated["team"][v1.ResourceCPU]; got != 2000 {
		t.Fatalf("allocated after Reserve = %dm, want 2000m", got)
	}
	pl.Unreserve(e.Ctx, nil, p, "n0")
	if got := pl.queues.Snapshot().Allocated["team"][v1.ResourceCPU]; got != 0 {
		t.Fatalf("allocated after Unreserve = %dm, want 0", got)
	}
}

// TestRefusedGangEvents: once its queue refused a gang, the events that
// free capacity move its lead only: the other members sleep behind it
// (admission is the whole gang's). Without a hint every pod that finished
// moved every member of every refused gang.
func TestRefusedGangEvents(t *testing.T) {
	capped := make([]*v1.Pod, 3)
	for i := range capped {
		capped[i] = inQueue(plugintest.Pod("capped-"+string(rune('a'+i)), "capped", "1", 0), "capped")
	}
	e, pl := env(t, plugintest.Objects{
		Nodes:     []*v1.Node{plugintest.Node("n0", "16", 0, nil)},
		Queues:    []*phalanxv1alpha1.Queue{queueObj("capped", 1, func(s *phalanxv1alpha1.QueueSpec) { s.Capability = cpus("2") }), queueObj("default", 1, nil)},
		PodGroups: []*pgv1alpha1.PodGroup{plugintest.PodGroup("capped", 3)},
		Pods:      capped,
	})
	e.Eventually("pods charged", func() bool { return pl.queues.Snapshot().Pending["capped"][v1.ResourceCPU] == 3000 })
	if _, _, st := e.Cycle(capped[1]); st.Code() != fwk.UnschedulableAndUnresolvable {
		t.Fatalf("PreFilter = %v, want the gang refused by its queue", st)
	}
	e.Activated()
	e.Clock.Step(time.Second)
	e.Eventually("the refused gang's lead woken", func() bool { return len(e.Activated()) > 0 })
	events, err := pl.EventsToRegister(e.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	plain := plugintest.Pod("p", "", "1", 0)
	for _, ev := range events {
		if ev.QueueingHintFn == nil {
			t.Fatalf("%v has no queueing hint: it moves every refused member", ev.Event)
		}
		for _, tc := range []struct {
			pod  *v1.Pod
			want fwk.QueueingHint
		}{{capped[0], fwk.Queue}, {capped[1], fwk.QueueSkip}, {capped[2], fwk.QueueSkip}, {plain, fwk.Queue}} {
			if got, err := ev.QueueingHintFn(klog.Background(), tc.pod, nil, nil); err != nil || got != tc.want {
				t.Fatalf("%v for %s = %v %v, want %v", ev.Event, tc.pod.Name, got, err, tc.want)
			}
		}
	}
}

// TestAdmissionWaitsForTheAccounting: the scheduler's cache may count a
// finished pod gone before the queue accounting does. An admission above
// the queue's share then waits until the accounting gives the pod back,
// and is decided again: the pod's queue, no longer at its share, waits
// below it.
func TestAdmissionWaitsForTheAccounting(t *testing.T) {
	node := plugintest.Node("n0", "4", 0, nil)
	running := plugintest.OnNode(inQueue(plugintest.Pod("a-run", "", "4", 0), "a"), "n0")
	objs := func() plugintest.Objects {
		return plugintest.Objects{
			Nodes:  []*v1.Node{node},
			Queues: []*phalanxv1alpha1.Queue{queueObj("a", 1, nil), queueObj("b", 1, nil), queueObj("default", 1, nil)},
			Pods:   []*v1.Pod{running.DeepCopy(), inQueue(plugintest.Pod("a-wait", "", "4", 0), "a")},
		}
	}
	charged := func(e *plugintest.Env, pl *CapacityQueue) {
		e.Eventually("a's running and waiting pods charged", func() bool {
			s := pl.queues.Snapshot()
			return s.Allocated["a"][v1.ResourceCPU] == 4000 && s.Pending["a"][v1.ResourceCPU] == 4000
		})
	}
	snapshot := func(pods ...*v1.Pod) []fwk.NodeInfo {
		ni := framework.NewNodeInfo(pods...)
		ni.SetNode(node)
		return []fwk.NodeInfo{ni}
	}
	want := inQueue(plugintest.Pod("b-wait", "", "4", 0), "b")
	// The wait is seen as its timer on the fake clock: none may be set before.
	noTimers := func(e *plugintest.Env) {
		if e.Clock.HasWaiters() {
			t.Fatal("timers set on the fake clock before the admission")
		}
	}

	// The snapshot holds a's pod: a is at its share, b may take the room
	// above its own (the plan will find none).
	e, pl := env(t, objs())
	charged(e, pl)
	if _, st := pl.PreFilter(e.Ctx, framework.NewCycleState(), want, snapshot(running)); !st.IsSuccess() {
		t.Fatalf("b refused while a is at its share: %v", st)
	}

	// The snapshot does not hold a's pod, and the accounting never gives it
	// back (it was bound after the snapshot): the wait is bounded.
	e, pl = env(t, objs())
	charged(e, pl)
	noTimers(e)
	done := make(chan *fwk.Status, 1)
	go func() {
		_, st := pl.PreFilter(e.Ctx, framework.NewCycleState(), want, snapshot())
		done <- st
	}()
	e.Eventually("the admission waits", e.Clock.HasWaiters)
	e.Clock.Step(time.Second)
	select {
	case st := <-done:
		if !st.IsSuccess() {
			t.Fatalf("after the bounded wait: %v, want the decision on what the accounting says", st)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the admission waited past its bound")
	}

	// The snapshot does not hold a's pod; it finished, and the accounting
	// learns it while the admission waits.
	e, pl = env(t, objs())
	charged(e, pl)
	noTimers(e)
	go func() {
		_, st := pl.PreFilter(e.Ctx, framework.NewCycleState(), want, snapshot())
		done <- st
	}()
	deadline := time.After(10 * time.Second)
	for !e.Clock.HasWaiters() {
		select {
		case st := <-done:
			t.Fatalf("decided on an accounting behind the snapshot: %v", st)
		case <-deadline:
			t.Fatal("the admission neither waited nor decided")
		case <-time.After(time.Millisecond):
		}
	}
	if err := e.Client.CoreV1().Pods(running.Namespace).Delete(e.Ctx, running.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case st := <-done:
		if st.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), "while queue a waits below its share") {
			t.Fatalf("b admitted above its share while a waits below its own: %v", st)
		}
	case <-deadline:
		t.Fatal("the admission did not end once the accounting gave the pod back")
	}
}
