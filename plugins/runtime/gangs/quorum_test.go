package gangs_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/lifecycle"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
	"github.com/phalanx-sched/phalanx/internal/requeue"
	"github.com/phalanx-sched/phalanx/internal/resources"
	"github.com/phalanx-sched/phalanx/plugins/internal/plugintest"
	"github.com/phalanx-sched/phalanx/plugins/runtime/gangs"
)

// quorumLed builds gang g of minMember 3 once the scheduling loop has
// started: g-0 and g-1 are turned away by PreEnqueue (Ready) for lack of
// members, g-2 completes the quorum. It returns once the quorum's wake has
// come, with what it woke.
func quorumLed(t *testing.T) (e *plugintest.Env, gangs *gangs.Gangs, ref ident.Ref, pods []*v1.Pod, first []string) {
	return quorumBuilt(t, true)
}

func quorumBuilt(t *testing.T, loopStarted bool) (e *plugintest.Env, gangs *gangs.Gangs, ref ident.Ref, pods []*v1.Pod, first []string) {
	e, gangs, _ = plugintest.BuildParts(t, plugintest.Objects{})
	if loopStarted {
		gangs.MarkLeading()
	}
	ref = ident.Ref{Namespace: "default", Name: "g"}
	gangs.GroupAdded(plugintest.PodGroup("g", 3))
	for i := 0; i < 3; i++ {
		pods = append(pods, plugintest.Pod(fmt.Sprintf("g-%d", i), "g", "1", 0))
	}
	for _, p := range pods[:2] {
		gangs.PodAdded(p)
	}
	for _, p := range pods[:2] {
		if _, ok := gangs.Ready(p); ok {
			t.Fatalf("PreEnqueue let %s through with 2 of 3 members", p.Name)
		}
	}
	gangs.PodAdded(pods[2])
	e.Eventually("the quorum's wake", func() bool {
		first = append(first, e.Activated()...)
		return len(first) > 0
	})
	return e, gangs, ref, pods, first
}

// TestQuorumWakesLead: the member completing a gang's quorum wakes one of
// the members turned away before, the lead; the others sleep, and the
// scheduling queue's events do not move them. The lead's refusal after a
// failed plan wakes them once, so that each is turned down by the cached
// failure with its own PodScheduled condition (users and the Workload API's
// status read every member's); then the failure keeps them out of the
// queue's event moves until the member standing for the gang plans it.
func TestQuorumWakesLead(t *testing.T) {
	e, gangs, ref, pods, first := quorumLed(t)
	if !slices.Equal(first, []string{"default/g-0"}) {
		t.Fatalf("the quorum woke %v, want only the lead default/g-0", first)
	}
	if gangs.SkipFailedGang(pods[0]) || !gangs.SkipFailedGang(pods[1]) {
		t.Fatalf("queue events skip the lead: %v, the sleeper: %v; want false, true",
			gangs.SkipFailedGang(pods[0]), gangs.SkipFailedGang(pods[1]))
	}

	gangs.Lifecycle.FailAt(ref, pods[0].UID, "no room", gangs.Lifecycle.Version())
	gangs.Refused(pods[0])
	if woken := e.Activated(); !slices.Contains(woken, "default/g-1") {
		t.Fatalf("the lead refused by its gang's failed plan woke %v, want the sleeper default/g-1, to be turned down", woken)
	}
	if _, ok := gangs.Ready(pods[1]); !ok {
		t.Fatal("PreEnqueue turned away a member of a gang whose plan failed: it would never get its condition")
	}
	if !gangs.SkipFailedGang(pods[1]) {
		t.Fatal("queue events move a member of a gang whose plan failed")
	}
}

// TestNoSleepersBeforeLoop: before the scheduling loop has run a cycle, a
// gang's quorum wakes every member and none sleeps behind a lead: the queue
// checks each pod it holds turned away against every node kube-scheduler
// lists at its start (the topology bench's start took 12 s, nodes ×
// sleepers hint checks). Once the loop runs, later members of a gang
// without a plan sleep again.
func TestNoSleepersBeforeLoop(t *testing.T) {
	e, gangs, _, pods, first := quorumBuilt(t, false)
	e.Eventually("the quorum wakes every member", func() bool {
		first = append(first, e.Activated()...)
		return slices.Contains(first, "default/g-0") && slices.Contains(first, "default/g-1")
	})
	for _, p := range pods {
		if _, ok := gangs.Ready(p); !ok {
			t.Fatalf("PreEnqueue turned %s away before the loop started", p.Name)
		}
	}
	late := plugintest.Pod("g-3", "g", "1", 0)
	gangs.PodAdded(late)
	if _, ok := gangs.Ready(late); !ok {
		t.Fatal("PreEnqueue turned a late member away before the loop started")
	}
	if gangs.SkipFailedGang(pods[1]) {
		t.Fatal("queue events skip a member woken whole")
	}

	// Each member offered as the queue offers it, at its add: the first two
	// are turned away short of the quorum; the third completes it, and
	// either it or the oldest sleeper (woken in the background) leads.
	gangs.MarkLeading()
	gangs.GroupAdded(plugintest.PodGroup("h", 3))
	var hp []*v1.Pod
	for i := 0; i < 3; i++ {
		p := plugintest.Pod(fmt.Sprintf("h-%d", i), "h", "1", 0)
		hp = append(hp, p)
		gangs.PodAdded(p)
		_, ok := gangs.Ready(p)
		if i < 2 && ok {
			t.Fatalf("PreEnqueue let %s through short of h's quorum", p.Name)
		}
	}
	var through []string
	for _, p := range hp {
		if _, ok := gangs.Ready(p); ok {
			through = append(through, p.Name)
		}
	}
	if len(through) != 1 {
		t.Fatalf("once the loop runs, PreEnqueue let %v of h through before its plan, want only its lead", through)
	}
}

// TestQuorumSleepersWoken: members asleep behind a lead never wait on it
// forever: they wake with the gang's plan, when the scheduler refuses the
// lead for anything but a failed plan, when the lead is deleted, and
// when the lead has stood LeadWait without a plan or a failure (another
// plugin's PreEnqueue may keep it out of the loop).
func TestQuorumSleepersWoken(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(e *plugintest.Env, gangs *gangs.Gangs, ref ident.Ref, lead *v1.Pod)
	}{
		{"the gang planned", func(_ *plugintest.Env, gangs *gangs.Gangs, ref ident.Ref, _ *v1.Pod) { gangs.Wake(ref) }},
		{"the lead refused by another plugin", func(_ *plugintest.Env, gangs *gangs.Gangs, _ ident.Ref, lead *v1.Pod) {
			// Its PreFilter rejected the lead, so Coscheduling's PostFilter
			// may not run: the scheduler's status write tells.
			refused := lead.DeepCopy()
			refused.ResourceVersion = "2"
			refused.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse,
				Reason: v1.PodReasonUnschedulable, Message: `persistentvolumeclaim "data" not found`}}
			gangs.PodUpdated(lead, refused)
		}},
		{"the lead deleted", func(_ *plugintest.Env, gangs *gangs.Gangs, _ ident.Ref, lead *v1.Pod) { gangs.PodDeleted(lead) }},
		{"the lead overdue", func(e *plugintest.Env, gangs *gangs.Gangs, _ ident.Ref, _ *v1.Pod) {
			e.Clock.Step(requeue.LeadWait - time.Second)
			gangs.Sweep()
			if woken := e.Activated(); slices.Contains(woken, "default/g-1") {
				e.T.Fatalf("a sweep before LeadWait woke %v", woken)
			}
			e.Clock.Step(time.Second)
			gangs.Sweep()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, gangs, ref, pods, _ := quorumLed(t)
			tc.do(e, gangs, ref, pods[0])
			var woken []string
			e.Eventually("the sleeper woken", func() bool {
				woken = append(woken, e.Activated()...)
				return slices.Contains(woken, "default/g-1")
			})
			if gangs.SkipFailedGang(pods[1]) {
				t.Fatal("queue events still skip the woken member")
			}
		})
	}
}

// TestResumeWakesLead: while a gang waits out the pause after a timed-out
// plan, the scheduling queue's events do not move its members (each was
// refused again, a status write each); when the pause ends, one member
// leads and the others sleep until its plan wakes them, so they enter the
// queue as a planned gang's, at its front.
func TestResumeWakesLead(t *testing.T) {
	e, gangs, _ := plugintest.BuildParts(t, plugintest.Objects{})
	gangs.MarkLeading()
	ref, pods := gangOfThree(gangs)
	gangs.Lifecycle.CommitPlan(ref, &planner.Plan{Slots: map[string]map[string]int{"n1": {"w": 3}}},
		map[string]resources.List{"w": {v1.ResourceCPU: 1000}}, 10*time.Second)
	e.Clock.Step(10 * time.Second)
	e.Eventually("the plan's timeout pauses the gang", func() bool {
		_, paused := gangs.Lifecycle.Paused(ref)
		return paused
	})
	for _, p := range pods {
		if !gangs.SkipFailedGang(p) {
			t.Fatalf("queue events move %s of a paused gang", p.Name)
		}
	}
	e.Activated() // what the timeout woke, if anything

	e.Clock.Step(lifecycle.TimeoutPause(10*time.Second, 1))
	var woken []string
	e.Eventually("the pause's end wakes a lead", func() bool {
		woken = append(woken, e.Activated()...)
		return len(woken) > 0
	})
	if !slices.Equal(woken, []string{"default/g-0"}) {
		t.Fatalf("the pause's end woke %v, want only the lead default/g-0", woken)
	}
	if gangs.SkipFailedGang(pods[0]) || !gangs.SkipFailedGang(pods[1]) || !gangs.SkipFailedGang(pods[2]) {
		t.Fatal("after the pause queue events must move the lead only")
	}
	e.Clock.Step(requeue.LeadWait)
	gangs.Sweep()
	if woken := e.Activated(); !slices.Equal(woken, []string{"default/g-1"}) {
		t.Fatalf("the lead overdue woke %v, want the lead passed on to default/g-1 only", woken)
	}

	planWakes(e, gangs, ref, "default/g-1", "default/g-2")
}

// TestQueueRefusedGangWakesLead: a gang its queue refused is retried
// through one member as the queue's share moves; the others sleep, moved
// neither by capacity events nor by the lead's refusal nor by LeadWait
// (admission is the whole gang's: each would be refused in turn), until
// the lead's plan wakes them. Woken whole, every member of every refused
// gang was retried each time a pod finished anywhere, and on the 512-node
// trace the active queue held thousands of them.
func TestQueueRefusedGangWakesLead(t *testing.T) {
	e, gangs, queues := plugintest.BuildParts(t, plugintest.Objects{})
	gangs.MarkLeading()
	ref, pods := gangOfThree(gangs)
	waitWoken(e, "the quorum wakes the gang", "default/g-0", "default/g-1", "default/g-2")

	queues.Block(ref, pods[1]) // its queue refused the gang
	e.Clock.Step(time.Second)
	var woken []string
	e.Eventually("the queue's share moving wakes the gang", func() bool {
		woken = append(woken, e.Activated()...)
		return len(woken) > 0
	})
	if !slices.Equal(woken, []string{"default/g-0"}) {
		t.Fatalf("a refused gang's retry woke %v, want only its lead default/g-0", woken)
	}
	for i, p := range pods {
		h, err := gangs.CapacityHint(klog.Background(), p, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]fwk.QueueingHint{true: fwk.Queue, false: fwk.QueueSkip}[i == 0]; h != want {
			t.Fatalf("capacity events give %s the hint %v, want %v", p.Name, h, want)
		}
	}

	gangs.Refused(pods[0]) // by its queue, again
	e.Clock.Step(requeue.LeadWait)
	gangs.Sweep()
	if woken := e.Activated(); len(woken) > 0 {
		t.Fatalf("the lead refused by its queue, and overdue, woke %v", woken)
	}

	planWakes(e, gangs, ref, "default/g-1", "default/g-2")
}

// TestMembersAfterQuorumSleep: once a gang's quorum woke its lead, members
// that reach PreEnqueue while the gang has no plan are turned away (asleep
// behind the lead) until the plan wakes them; the lead itself passes.
// Let through, the members of a gang listed faster than the scheduling
// queue's adds entered the active queue before the plan and kept their
// places after it, behind thousands of pods, until the plan timed out.
func TestMembersAfterQuorumSleep(t *testing.T) {
	e, gangs, ref, pods, first := quorumLed(t)
	if !slices.Equal(first, []string{"default/g-0"}) {
		t.Fatalf("the quorum woke %v, want the lead default/g-0", first)
	}
	late := plugintest.Pod("g-3", "g", "1", 0)
	gangs.PodAdded(late)
	if _, ok := gangs.Ready(late); ok {
		t.Fatal("PreEnqueue let a member through while its gang's lead plans")
	}
	if _, ok := gangs.Ready(pods[2]); ok {
		t.Fatal("PreEnqueue let the member completing the quorum through beside the lead")
	}
	if _, ok := gangs.Ready(pods[0]); !ok {
		t.Fatal("PreEnqueue turned the lead away")
	}
	gangs.Wake(ref) // the lead's plan
	var woken []string
	e.Eventually("the plan wakes the late member", func() bool {
		woken = append(woken, e.Activated()...)
		return slices.Contains(woken, "default/g-3")
	})
	for _, p := range []*v1.Pod{late, pods[2]} {
		if _, ok := gangs.Ready(p); !ok {
			t.Fatalf("PreEnqueue turned %s away after the plan", p.Name)
		}
	}
}

// gangOfThree adds gang g of minMember 3 and its members g-0, g-1, g-2.
func gangOfThree(gangs *gangs.Gangs) (ident.Ref, []*v1.Pod) {
	return threeMembers(gangs, "g", 3)
}

// threeMembers adds gang name of minMember and its members name-0 to name-2.
func threeMembers(gangs *gangs.Gangs, name string, minMember int32) (ident.Ref, []*v1.Pod) {
	gangs.GroupAdded(plugintest.PodGroup(name, minMember))
	var pods []*v1.Pod
	for i := 0; i < 3; i++ {
		p := plugintest.Pod(fmt.Sprintf("%s-%d", name, i), name, "1", 0)
		pods = append(pods, p)
		gangs.PodAdded(p)
	}
	return ident.Ref{Namespace: "default", Name: name}, pods
}

// planWakes makes the lead's plan and waits until it woke the members.
func planWakes(e *plugintest.Env, gangs *gangs.Gangs, ref ident.Ref, members ...string) {
	e.T.Helper()
	gangs.Wake(ref)
	waitWoken(e, "the plan wakes the sleepers", members...)
}

// waitWoken waits until the members were all woken.
func waitWoken(e *plugintest.Env, what string, members ...string) {
	e.T.Helper()
	var woken []string
	e.Eventually(what, func() bool {
		woken = append(woken, e.Activated()...)
		for _, m := range members {
			if !slices.Contains(woken, m) {
				return false
			}
		}
		return true
	})
}

// TestRetryWithoutPlanWakesLead: a gang retried without a plan and without a
// member standing for a failed one (room freed on nodes it reserved, a
// reclaim victim old enough, its reservation taken) goes through one member;
// the others sleep until its plan wakes them.
func TestRetryWithoutPlanWakesLead(t *testing.T) {
	e, gangs, _ := plugintest.BuildParts(t, plugintest.Objects{})
	gangs.MarkLeading()
	ref, _ := gangOfThree(gangs)
	waitWoken(e, "the quorum wakes the gang", "default/g-0", "default/g-1", "default/g-2")
	gangs.WakeOne(ref)
	if woken := e.Activated(); !slices.Equal(woken, []string{"default/g-0"}) {
		t.Fatalf("a retry without a plan woke %v, want only the lead default/g-0", woken)
	}
	planWakes(e, gangs, ref, "default/g-1", "default/g-2")
}

// TestBoundMemberCompletesQuorum: a bound member listed after its pending
// siblings (a restarted scheduler's informer lists pods in any order)
// completes the quorum and wakes a lead. Coscheduling's queueing hint does
// not see bound pods arrive, so the runtime must.
func TestBoundMemberCompletesQuorum(t *testing.T) {
	e, gangs, _ := plugintest.BuildParts(t, plugintest.Objects{})
	gangs.GroupAdded(plugintest.PodGroup("g", 3))
	var pods []*v1.Pod
	for i := 0; i < 3; i++ {
		pods = append(pods, plugintest.Pod(fmt.Sprintf("g-%d", i), "g", "1", 0))
	}
	for _, p := range pods[:2] {
		gangs.PodAdded(p)
		if _, ok := gangs.Ready(p); ok {
			t.Fatalf("PreEnqueue let %s through with 2 of 3 members", p.Name)
		}
	}
	bound := pods[2].DeepCopy()
	bound.Spec.NodeName = "n0"
	gangs.PodAdded(bound)
	var woken []string
	e.Eventually("the bound member's arrival wakes a lead", func() bool {
		woken = append(woken, e.Activated()...)
		return len(woken) > 0
	})
	if !slices.Contains(woken, "default/g-0") {
		t.Fatalf("woke %v, want the lead default/g-0", woken)
	}
}
