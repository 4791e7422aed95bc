package gangs_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/status"
	"github.com/phalanx-sched/phalanx/internal/workload/readiness"
	"github.com/phalanx-sched/phalanx/plugins/internal/plugintest"
	"github.com/phalanx-sched/phalanx/plugins/runtime/gangs"
	"k8s.io/utils/ptr"
)

// TestImplicitPodGroupRecreated: the PodGroup of an implicit gang is made
// from the pod informer's events, never by GangOf (which scheduling cycles
// call): once however many of its members arrive while the create is in
// flight or the informer lags; deleted while its pods remain, it is made
// again (once).
func TestImplicitPodGroupRecreated(t *testing.T) {
	e, gangs, _ := plugintest.BuildParts(t, plugintest.Objects{})
	member := func(name string) *v1.Pod {
		pod := plugintest.Pod(name, "", "1", 0)
		pod.Annotations = map[string]string{phalanxv1alpha1.GangSizeAnnotation: "2"}
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "job-uid", Controller: ptr.To(true)}}
		return pod
	}
	pod := member("w-0")
	creates := func() int {
		n := 0
		for _, a := range e.PG.Actions() {
			if a.GetVerb() == "create" && a.GetResource().Resource == "podgroups" {
				n++
			}
		}
		return n
	}
	if _, _, ok, err := gangs.GangOf(pod); !ok || !apierrors.IsNotFound(err) {
		t.Fatalf("GangOf before the members arrived = %v, %v; want the missing PodGroup", ok, err)
	}
	if n := creates(); n != 0 {
		t.Fatalf("GangOf made the PodGroup (%d creates): it must only read", n)
	}
	// ask repeats GangOf until the informer has (or has not) the PodGroup.
	ask := func(what string, exists bool) {
		t.Helper()
		e.Eventually(what, func() bool {
			_, _, ok, err := gangs.GangOf(pod)
			return ok && (err == nil) == exists
		})
	}
	gangs.PodAdded(pod)
	gangs.PodAdded(member("w-1"))
	ask("the implicit PodGroup", true)
	if n := creates(); n != 1 {
		t.Fatalf("%d creates of the implicit PodGroup, want 1", n)
	}
	ref, _, _, _ := gangs.GangOf(pod)
	if err := e.PG.SchedulingV1alpha1().PodGroups("default").Delete(e.Ctx, ref.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually("the implicit PodGroup made again", func() bool { return creates() == 2 })
	ask("the made-again PodGroup", true)
	if n := creates(); n != 2 {
		t.Fatalf("%d creates of the implicit PodGroup, want 2 (once more after its deletion)", n)
	}
}

// TestStatusWriterUsesRuntimeClock: the gang status writer stamps conditions
// with the runtime's injected clock (TestStatusWriterClock checks the stamp).
func TestStatusWriterUsesRuntimeClock(t *testing.T) {
	e, gangs, _ := plugintest.BuildParts(t, plugintest.Objects{})
	if gangs.Status.Clock != e.Clock {
		t.Fatal("the status writer does not use the runtime's clock")
	}
}

// TestGangStatePruned creates and deletes 10,000 gangs through the handlers
// the informers call, each with a member blocked by its queue, a condition, a
// pod event, and (the first hundred, short of members) a startup verdict,
// beside a plain pod turned away and blocked; afterwards every per-gang and
// per-pod map of the runtime is empty.
func TestGangStatePruned(t *testing.T) {
	const n = 10000
	e, gangs, queues := plugintest.BuildParts(t, plugintest.Objects{})
	gangs.Status.Leading = func() bool { return false } // no event per gang: conditions wait, unsaid
	type gangObjs struct{ pg, member, plain any }
	var all []gangObjs
	for i := 0; i < n; i++ {
		min := int32(1)
		if i < 100 {
			min = 2
		}
		pg := plugintest.PodGroup(fmt.Sprintf("g-%d", i), min)
		pg.Labels = map[string]string{phalanxv1alpha1.QueueLabel: "q"}
		member := plugintest.Pod(fmt.Sprintf("g-%d-0", i), pg.Name, "1", 0)
		plain := plugintest.Pod(fmt.Sprintf("plain-%d", i), "", "1", 0)
		all = append(all, gangObjs{pg, member, plain})

		gangs.GroupAdded(pg)
		gangs.PodAdded(member)
		gangs.PodAdded(plain)
		ref := ident.Ref{Namespace: "default", Name: pg.Name}
		spec, err := gangs.Spec(ref)
		if err != nil {
			t.Fatal(err)
		}
		queues.Block(ref, member)
		queues.Block(ident.Ref{}, plain)
		gangs.TurnedAway(plain)
		if i < 500 { // the env's event recorder holds 1000
			gangs.PodEvent(member, status.ReasonQueue, "queue q is full")
		}
		if i < 100 {
			gangs.Status.Set(spec, gangs.MembersShort(spec, readiness.MemberCount{Ready: 1}, 2))
		} else {
			gangs.Status.Set(spec, status.Condition{Status: metav1.ConditionFalse, Reason: status.ReasonQueue, Message: "queue q is full"})
		}
	}
	e.Eventually("startup verdicts", func() bool {
		e.Clock.Step(6 * time.Second)
		return gangs.Sizes()["gangs.startup"] == 100
	})
	sizes := gangs.Sizes()
	for _, k := range []string{"status.desired", "status.unsaid", "queues.blocked"} {
		if sizes[k] != n {
			t.Fatalf("before deletion: %s has %d entries, want %d (sizes %v)", k, sizes[k], n, sizes)
		}
	}
	if sizes["gangs.podEvents"] == 0 || sizes["gangs.turnedAway"] == 0 || sizes["queues.blockedPod"] == 0 {
		t.Fatalf("before deletion: sizes %v, want per-pod entries", sizes)
	}

	for _, o := range all {
		gangs.PodDeleted(o.member)
		gangs.PodDeleted(o.plain)
		gangs.GroupDeleted(o.pg)
	}
	// Background work (wakes) ends on its own: poll.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		left := map[string]int{}
		for k, v := range gangs.Sizes() {
			if v != 0 {
				left[k] = v
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after deleting every gang and pod, entries are left: %v", left)
		}
	}
}

// failedGangs adds gangs a and b, each of two pending members, whose plans
// failed after taking cost each, and a plain pod; woken says which gangs
// had members activated since the last call, and how often the plain pod was.
func failedGangs(t *testing.T, cost time.Duration) (e *plugintest.Env, gangs *gangs.Gangs, refs []ident.Ref, plain *v1.Pod, woken func() (gangsWoken []string, plainPods int)) {
	e, gangs, _ = plugintest.BuildParts(t, plugintest.Objects{})
	for _, name := range []string{"a", "b"} {
		gangs.GroupAdded(plugintest.PodGroup(name, 2))
		ref := ident.Ref{Namespace: "default", Name: name}
		refs = append(refs, ref)
		var first *v1.Pod
		for i := 0; i < 2; i++ {
			pod := plugintest.Pod(fmt.Sprintf("%s-%d", name, i), name, "1", 1)
			gangs.PodAdded(pod)
			if first == nil {
				first = pod
			}
		}
		// The members complete the quorum, which wakes them in the
		// background: let that wake pass before the failure, or it wakes
		// the failed gang's representative in the middle of a test.
		e.Eventually("gang "+name+" woken at its quorum", func() bool {
			return slices.ContainsFunc(e.Activated(), func(key string) bool { return strings.HasPrefix(key, "default/"+name+"-") })
		})
		gangs.Lifecycle.FailAt(ref, first.UID, "no room", gangs.Lifecycle.Version())
		gangs.Lifecycle.FailCost(ref, cost)
	}
	plain = plugintest.Pod("plain", "", "1", 0)
	gangs.PodAdded(plain)
	woken = func() (gangsWoken []string, plainPods int) {
		for _, key := range e.Activated() {
			if key == "default/plain" {
				plainPods++
				continue
			}
			name := strings.TrimPrefix(key, "default/")
			if g := name[:strings.LastIndex(name, "-")]; !slices.Contains(gangsWoken, g) {
				gangsWoken = append(gangsWoken, g)
			}
		}
		slices.Sort(gangsWoken)
		return gangsWoken, plainPods
	}
	return e, gangs, refs, plain, woken
}

// TestFailedGangWakesPaced: a change wakes the pods phalanx turned away at
// once, and the gangs whose plans failed at most once per what their failed
// plans cost together: woken on every change, they would keep a full
// cluster's scheduler re-planning them (ahead in the queue) while the pods
// behind them, which fit, wait. The next change's wake comes when that
// time has passed, not lost.
func TestFailedGangWakesPaced(t *testing.T) {
	e, gangs, refs, plain, woken := failedGangs(t, 2*time.Second)

	both := []string{"a", "b"}
	gangs.TurnedAway(plain)
	gangs.WakeFailed()
	if g, p := woken(); !slices.Equal(g, both) || p != 1 {
		t.Fatalf("first change woke gangs %v and the plain pod %d times; want gangs %v and the plain pod once", g, p, both)
	}
	// The failed plans took 4 s together: for 4 s a change wakes only the
	// turned-away pod.
	gangs.TurnedAway(plain)
	gangs.WakeFailed()
	e.Clock.Step(3 * time.Second)
	gangs.WakeFailed()
	if g, p := woken(); len(g) != 0 || p != 1 {
		t.Fatalf("changes within 4 s of the last wake woke gangs %v and the plain pod %d times; want only the plain pod, once", g, p)
	}
	e.Clock.Step(time.Second)
	var later []string
	e.Eventually("the failed gangs woken once the pace allows", func() bool {
		g, _ := woken()
		later = append(later, g...)
		slices.Sort(later)
		return slices.Equal(slices.Compact(later), both)
	})
	for _, ref := range refs {
		if _, failed := gangs.Lifecycle.Failed(ref); failed {
			t.Fatalf("gang %s: its cached failure outlived the changes; a wake must void it at once", ref)
		}
	}
}

// TestGroupStatusWriteWakesNothing: a write of a gang's group object that
// changes nothing the scheduler reads (phalanx's own Scheduled condition and
// held annotation, the controller's phase) leaves its pending members where they are. Woken
// by it, every member of a gang that did not fit ran a cycle, was refused
// again with a pod status write, and the refusal wrote the group's status
// once more: on the 64-node trace the scheduling loop spent its time there
// while jobs that fit waited. A change of what it reads (the members that
// finished, minMember) still wakes the gang.
func TestGroupStatusWriteWakesNothing(t *testing.T) {
	e, gangs, _, _, woken := failedGangs(t, time.Millisecond)
	woken()
	old := plugintest.PodGroup("a", 2)
	cur := old.DeepCopy()
	cur.ResourceVersion = "2"
	cur.Status.Phase = "Pending"
	cur.Status.ScheduleStartTime = metav1.Now()
	cur.Annotations = map[string]string{phalanxv1alpha1.HeldAnnotation: `{"nodes":1}`}
	gangs.GroupUpdated(old, cur)
	if g, _ := woken(); len(g) != 0 {
		t.Fatalf("a status write that changed nothing the scheduler reads woke gangs %v", g)
	}
	next := cur.DeepCopy()
	next.ResourceVersion = "3"
	next.Status.Succeeded = 1
	gangs.GroupUpdated(cur, next)
	e.Eventually("gang a woken when a member finished", func() bool {
		g, _ := woken()
		return slices.Equal(g, []string{"a"})
	})
}

// TestFailedGangRetriesPaced: without any change, the sweep plans a failed
// gang again 20 s after its failure, or, when the failed gangs' plans take
// longer than that together, after that long: with a score of gangs that do
// not fit on 10,000 nodes, retrying each every 20 s left the scheduler no
// time for anything behind them.
func TestFailedGangRetriesPaced(t *testing.T) {
	e, gangs, _, _, woken := failedGangs(t, 15*time.Second)
	e.Clock.Step(21 * time.Second)
	gangs.Sweep()
	if g, _ := woken(); len(g) != 0 {
		t.Fatalf("sweep 21 s after the failures woke gangs %v; their plans took 30 s together, so none before 30 s", g)
	}
	e.Clock.Step(10 * time.Second)
	gangs.Sweep()
	if g, _ := woken(); !slices.Equal(g, []string{"a", "b"}) {
		t.Fatalf("sweep 31 s after the failures woke gangs %v; want [a b]", g)
	}
}

// TestDependencyRunningWakesDependents: a gang that depends on another
// waits at PreEnqueue until the other's quorum runs; the runtime's pod
// handler moves the dependent's members to the queue when the member that
// completes it starts running (Coscheduling lists no bound pod's update:
// TestPodEventsSpareBinds), not before, and not for another gang's pods.
func TestDependencyRunningWakesDependents(t *testing.T) {
	e, gangs, _ := plugintest.BuildParts(t, plugintest.Objects{})
	gangs.GroupAdded(plugintest.PodGroup("prep", 2))
	train := plugintest.PodGroup("train", 1)
	train.Annotations = map[string]string{phalanxv1alpha1.DependsOnAnnotation: "prep"}
	gangs.GroupAdded(train)
	gangs.GroupAdded(plugintest.PodGroup("other", 1))
	waiter := plugintest.Pod("train-0", "train", "1", 0)
	gangs.PodAdded(waiter)
	waitWoken(e, "train's quorum wakes its member", "default/train-0")
	if _, ok := gangs.Ready(waiter); ok {
		t.Fatal("PreEnqueue let a member through before its dependency ran")
	}
	bound := func(name, group string) *v1.Pod {
		p := plugintest.Pod(name, group, "1", 0)
		p.Spec.NodeName = "n0"
		p.Status.Phase = v1.PodPending
		gangs.PodAdded(p)
		return p
	}
	start := func(p *v1.Pod) {
		running := p.DeepCopy()
		running.Status.Phase = v1.PodRunning
		gangs.PodUpdated(p, running)
	}
	start(bound("other-0", "other"))
	start(bound("prep-0", "prep"))
	if woken := e.Activated(); slices.Contains(woken, "default/train-0") {
		t.Fatalf("1 of prep's 2 members running woke %v", woken)
	}
	start(bound("prep-1", "prep"))
	var woken []string
	e.Eventually("prep's quorum running wakes train's member", func() bool {
		woken = append(woken, e.Activated()...)
		return slices.Contains(woken, "default/train-0")
	})
	if _, ok := gangs.Ready(waiter); !ok {
		t.Fatal("PreEnqueue turned the dependent member away with its dependency running")
	}
}
