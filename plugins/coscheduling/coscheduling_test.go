package coscheduling

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/phalanx-sched/phalanx/apis/config"
	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/gang"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/lifecycle"
	"github.com/phalanx-sched/phalanx/internal/status"
	"github.com/phalanx-sched/phalanx/plugins/internal/plugintest"
	"github.com/phalanx-sched/phalanx/plugins/probe"
	"github.com/phalanx-sched/phalanx/plugins/runtime"
)

var coschedulingFilterFirst = plugintest.Plugin{
	Name: Name, Extensions: []string{"Filter"},
	New: func(ctx context.Context, h fwk.Handle, rt *runtime.Runtime) (fwk.Plugin, error) {
		return New(ctx, &config.CoschedulingArgs{DefaultScheduleTimeoutSeconds: 60, ReservationAfterSeconds: 30, ScheduledEvents: "PerGang"}, h, rt, NewBindSlots(GangBindConcurrency))
	},
}

var coschedulingRest = plugintest.Plugin{
	Name: Name, Extensions: []string{"QueueSort", "PreFilter", "PostFilter", "Reserve", "Permit"},
	New: coschedulingFilterFirst.New,
}

// env is a profile of Coscheduling over the real resource filter.
func env(t *testing.T, objs plugintest.Objects) (*plugintest.Env, *Coscheduling) {
	e := plugintest.New(t, objs, coschedulingFilterFirst, plugintest.NodeResourcesFit, coschedulingRest)
	return e, e.Plugins[Name].(*Coscheduling)
}

func members(group string, n int, cpu string, gpus int64) []*v1.Pod {
	out := make([]*v1.Pod, n)
	for i := range out {
		out[i] = plugintest.Pod(group+"-"+string(rune('a'+i)), group, cpu, gpus)
	}
	return out
}

func TestPreEnqueue(t *testing.T) {
	dep := plugintest.PodGroup("dep", 2)
	waiting := plugintest.PodGroup("needs-dep", 1)
	waiting.Annotations = map[string]string{phalanxv1alpha1.DependsOnAnnotation: "dep"}
	missingDep := plugintest.PodGroup("needs-missing", 1)
	missingDep.Annotations = map[string]string{phalanxv1alpha1.DependsOnAnnotation: "nope"}
	badSize := plugintest.Pod("bad", "", "1", 0)
	badSize.Annotations = map[string]string{phalanxv1alpha1.GangSizeAnnotation: "many"}
	badSize.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: "j-uid", Controller: ptrTrue()}}
	workloadMember := plugintest.Pod("wl-0", "", "1", 0)
	workloadMember.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("upstream")}
	three := members("three", 2, "1", 0) // of minMember 3
	complete := members("two", 2, "1", 0)
	objs := plugintest.Objects{
		PodGroups: []*pgv1alpha1.PodGroup{plugintest.PodGroup("three", 3), plugintest.PodGroup("two", 2), dep, waiting, missingDep},
		Pods:      append(append(three, complete...), badSize, plugintest.Pod("w-0", "needs-dep", "1", 0), plugintest.Pod("m-0", "needs-missing", "1", 0)),
	}
	e, pl := env(t, objs)
	e.Eventually("PodGroups in the lister", func() bool {
		_, err := pl.gangs.Spec(ident.Ref{Namespace: "default", Name: "needs-missing"})
		return err == nil
	})
	for _, tc := range []struct {
		name     string
		pod      *v1.Pod
		wantCode fwk.Code
		wantMsg  string
	}{
		{name: "plain pod", pod: plugintest.Pod("plain", "", "1", 0), wantCode: fwk.Success},
		{name: "PodGroup missing", pod: plugintest.Pod("lost-0", "lost", "1", 0), wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: "PodGroup default/lost does not exist"},
		{name: "members missing", pod: three[0], wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: "2 of 3 members exist"},
		{name: "all members", pod: complete[0], wantCode: fwk.Success},
		{name: "dependency running below quorum", pod: objs.Pods[5], wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: "waiting for gang dep: 0 of 2"},
		{name: "dependency missing", pod: objs.Pods[6], wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: "dependency PodGroup default/nope does not exist"},
		{name: "invalid gang-size", pod: badSize, wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: `scheduling.phalanx.dev/gang-size`},
		{name: "Workload API not watched", pod: workloadMember, wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: "looks for it again every"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := pl.PreEnqueue(e.Ctx, tc.pod)
			if st.Code() != tc.wantCode || !strings.Contains(st.Message(), tc.wantMsg) {
				t.Fatalf("PreEnqueue = %v %q, want %v containing %q", st.Code(), st.Message(), tc.wantCode, tc.wantMsg)
			}
		})
	}
	if c, ok := pl.gangs.Status.Get(ident.Ref{Namespace: "default", Name: "three"}); !ok || c.Reason != gang.ReasonMembersPending {
		t.Fatalf("three's condition %+v, want MembersPending", c)
	}
}

func ptrTrue() *bool { b := true; return &b }

// The first member's cycle plans the whole gang in its first Filter call and
// admits only its planned node; the next member is steered there by
// PreFilter alone.
func TestPlanSteersMembers(t *testing.T) {
	gpus := members("g", 4, "1", 1)
	e, pl := env(t, plugintest.Objects{
		Nodes: []*v1.Node{plugintest.Node("n0", "8", 2, nil), plugintest.Node("n1", "8", 2, nil), plugintest.Node("n2", "8", 4, nil)},
		Pods:  gpus,
	})
	ref := ident.Ref{Namespace: "default", Name: "g"}
	e.Eventually("members indexed", func() bool { return len(pl.gangs.Members(ref)) == 4 })
	// The PodGroup comes after its members, so their arrival wakes nobody
	// and the group's own arrival wakes them once, before the plan.
	if _, err := e.PG.SchedulingV1alpha1().PodGroups("default").Create(e.Ctx, plugintest.PodGroup("g", 4), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	all := sets.New("default/g-a", "default/g-b", "default/g-c", "default/g-d")
	woken := sets.New[string]()
	e.Eventually("the PodGroup's arrival wakes its members", func() bool {
		woken = woken.Union(sets.New(e.Activated()...))
		return woken.Equal(all)
	})

	state, res, st := e.Cycle(gpus[0])
	if !st.IsSuccess() || res != nil {
		t.Fatalf("first member PreFilter = %v %v, want success and no node restriction", res, st)
	}
	fit, _ := e.Filter(state, gpus[0])
	if len(fit) != 1 || fit[0] != "n2" {
		t.Fatalf("first member fits %v, want only n2 (the tightest node that takes all four)", fit)
	}
	if pl.m.Phase(ref) != lifecycle.PhasePlanned {
		t.Fatalf("phase %s, want Planned", pl.m.Phase(ref))
	}
	pl.Reserve(e.Ctx, state, gpus[0], "n2")
	_, res, st = e.Cycle(gpus[1])
	if !st.IsSuccess() || res == nil || res.NodeNames.Len() != 1 || !res.NodeNames.Has("n2") {
		t.Fatalf("second member PreFilter = %v %v, want exactly the planned node n2", res, st)
	}
	if woken := e.Activated(); len(woken) != 4 || !sets.New(woken...).Equal(all) {
		t.Fatalf("the plan woke %v, want the gang's pending members once each", woken)
	}
}

// TestArrivalCompletingQuorumWakesSiblings: members that PreEnqueue turned
// away for lack of members are woken by the member that completes the
// quorum: the scheduling queue does not replay a pod's arrival to its
// siblings. A member with a scheduling gate does not count (it cannot be
// placed, so the gang would hold capacity it cannot use): the siblings are
// woken when its gate is removed.
func TestArrivalCompletingQuorumWakesSiblings(t *testing.T) {
	early := members("g", 2, "1", 0)
	e, pl := env(t, plugintest.Objects{
		Nodes: []*v1.Node{plugintest.Node("n0", "8", 0, nil)},
		Pods:  early,
	})
	ref := ident.Ref{Namespace: "default", Name: "g"}
	e.Eventually("members indexed", func() bool { return len(pl.gangs.Members(ref)) == 2 })
	// The PodGroup arrives after its members: its arrival wakes them, once.
	if _, err := e.PG.SchedulingV1alpha1().PodGroups("default").Create(e.Ctx, plugintest.PodGroup("g", 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	woken := sets.New[string]()
	e.Eventually("the PodGroup's arrival wakes its members", func() bool {
		woken = woken.Union(sets.New(e.Activated()...))
		return woken.HasAll("default/g-a", "default/g-b")
	})
	// (PreEnqueue is not called here: its condition write would wake them too.)

	last := plugintest.Pod("g-c", "g", "1", 0)
	last.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "example.com/hold"}}
	last, err := e.Client.CoreV1().Pods("default").Create(e.Ctx, last, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.Eventually("the third member indexed", func() bool { return len(pl.gangs.Members(ref)) == 3 })
	spec, err := pl.gangs.Spec(ref)
	if err != nil {
		t.Fatal(err)
	}
	count := pl.gangs.CountMembers(spec)
	if count.Ready != 2 || count.Gated != 1 || !slices.Equal(count.Gates, []string{"example.com/hold"}) {
		t.Fatalf("members counted %+v, want 2 ready and 1 gated by example.com/hold", count)
	}
	// (PreEnqueue is not called before the gate goes: its condition write
	// would wake the members too.)
	if msg := pl.gangs.MembersShort(spec, count, 3).Message; !strings.Contains(msg, "1 more wait on scheduling gates (example.com/hold)") {
		t.Fatalf("condition %q does not name the gate", msg)
	}
	if woken := sets.New(e.Activated()...); woken.Has("default/g-a") || woken.Has("default/g-b") {
		t.Fatalf("a gated member woke its siblings: %v", sets.List(woken))
	}

	last.Spec.SchedulingGates = nil
	if _, err := e.Client.CoreV1().Pods("default").Update(e.Ctx, last, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	woken = sets.New[string]()
	e.Eventually("the first members woken by the third's ungating", func() bool {
		woken = woken.Union(sets.New(e.Activated()...))
		return woken.HasAll("default/g-a", "default/g-b")
	})
	if st := pl.PreEnqueue(e.Ctx, early[0]); !st.IsSuccess() {
		t.Fatalf("PreEnqueue after the quorum arrived = %v, want success", st)
	}
}

// TestQuorumWakesLeadThenPlan: the member that completes a gang's quorum
// wakes one member turned away before it, the lead, not every member: had
// the gang not fit, each would be refused in turn with a pod status write
// in the scheduling loop. The lead's cycle plans the gang, and the plan
// wakes the rest. A member turned away again (the gang short once more)
// leads no longer: the next quorum wakes a lead anew.
func TestQuorumWakesLeadThenPlan(t *testing.T) {
	early := members("g", 2, "1", 0)
	e, pl := env(t, plugintest.Objects{
		Nodes: []*v1.Node{plugintest.Node("n0", "8", 0, nil)},
		Pods:  early,
	})
	// No condition writes: their PodGroup events wake every member too.
	pl.gangs.Status.Leading = func() bool { return false }
	// Members sleep behind a lead once the scheduling loop runs: a cycle.
	e.Cycle(plugintest.Pod("plain", "", "1", 0))
	ref := ident.Ref{Namespace: "default", Name: "g"}
	e.Eventually("members indexed", func() bool { return len(pl.gangs.Members(ref)) == 2 })
	if _, err := e.PG.SchedulingV1alpha1().PodGroups("default").Create(e.Ctx, plugintest.PodGroup("g", 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	seen := sets.New[string]()
	e.Eventually("the PodGroup's arrival wakes its members", func() bool {
		seen = seen.Union(sets.New(e.Activated()...))
		return seen.HasAll("default/g-a", "default/g-b")
	})
	turnAway := func() {
		t.Helper()
		for _, p := range early {
			if st := pl.PreEnqueue(e.Ctx, p); st.IsSuccess() {
				t.Fatalf("PreEnqueue(%s) without the quorum succeeded", p.Name)
			}
		}
	}
	create := func(name string) *v1.Pod {
		p, err := e.Client.CoreV1().Pods("default").Create(e.Ctx, plugintest.Pod(name, "g", "1", 0), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	leadOnly := func(what string) {
		t.Helper()
		var woken []string
		e.Eventually(what, func() bool {
			woken = append(woken, e.Activated()...)
			return slices.Contains(woken, "default/g-a")
		})
		if slices.Contains(woken, "default/g-b") {
			t.Fatalf("%s: woke %v, want only the lead default/g-a", what, woken)
		}
	}

	turnAway()
	third := create("g-c")
	leadOnly("the quorum wakes its lead")

	// The gang is short again: the lead is turned away with the others,
	// and the next quorum wakes a lead again.
	if err := e.Client.CoreV1().Pods("default").Delete(e.Ctx, third.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually("the third member gone", func() bool { return len(pl.gangs.Members(ref)) == 2 })
	turnAway()
	create("g-d")
	leadOnly("the quorum met again wakes a lead")

	if st := pl.PreEnqueue(e.Ctx, early[0]); !st.IsSuccess() {
		t.Fatalf("the lead's PreEnqueue with the quorum = %v, want success", st)
	}
	state, _, st := e.Cycle(early[0])
	if !st.IsSuccess() {
		t.Fatalf("the lead's PreFilter = %v", st)
	}
	if fit, _ := e.Filter(state, early[0]); len(fit) != 1 {
		t.Fatalf("the lead fits %v, want its planned node", fit)
	}
	var woken []string
	e.Eventually("the plan wakes the rest", func() bool {
		woken = append(woken, e.Activated()...)
		return slices.Contains(woken, "default/g-b") && slices.Contains(woken, "default/g-d")
	})
}

// A gang that does not fit is turned away whole, with the reason on its
// PodGroup; its other members are turned away from the cached failure
// until capacity changes.
func TestPlanFailureCached(t *testing.T) {
	big := members("big", 3, "6", 0)
	e, pl := env(t, plugintest.Objects{
		Nodes:     []*v1.Node{plugintest.Node("n0", "8", 0, nil), plugintest.Node("n1", "8", 0, nil)},
		PodGroups: []*pgv1alpha1.PodGroup{plugintest.PodGroup("big", 3)},
		Pods:      big,
	})
	ref := ident.Ref{Namespace: "default", Name: "big"}
	e.Eventually("members indexed", func() bool { return len(pl.gangs.Members(ref)) == 3 })
	state, _, _ := e.Cycle(big[0])
	fit, failed := e.Filter(state, big[0])
	if len(fit) != 0 {
		t.Fatalf("a member of a gang that does not fit passed on %v", fit)
	}
	for node, st := range failed {
		if st.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), "at most 2 fit") {
			t.Fatalf("%s: %v %q, want the plan's reason", node, st.Code(), st.Message())
		}
	}
	if c, _ := pl.gangs.Status.Get(ref); c.Reason != gang.ReasonUnschedulable || !strings.Contains(c.Message, "no placement for 3 more members") {
		t.Fatalf("condition %+v", c)
	}
	// The informers' first node events may still void the failure: once
	// nothing changes any more, the next member is turned away from the
	// cache, without a plan.
	var st *fwk.Status
	e.Eventually("the second member turned away by the cached failure", func() bool {
		var cached *fwk.Status
		if _, _, cached = e.Cycle(big[1]); cached.IsSuccess() {
			// Voided by a node event: this cycle plans (and fails) again.
			state, _, _ := e.Cycle(big[0])
			e.Filter(state, big[0])
			return false
		}
		st = cached
		return true
	})
	if st.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), "at most 2 fit") {
		t.Fatalf("second member PreFilter = %v, want the cached failure", st)
	}
	pl.m.Changed()
	state, _, st = e.Cycle(big[1])
	if !st.IsSuccess() {
		t.Fatalf("after a capacity change PreFilter = %v, want a new plan", st)
	}
	if readState(state).planning == nil {
		t.Fatal("after a capacity change the cycle must plan again")
	}
}

// Members wait in Permit until the quorum, then all go; a member released
// before it tears the gang down once, with one reason.
func TestPermitAndTeardown(t *testing.T) {
	gm := members("g", 2, "1", 0)
	e, pl := env(t, plugintest.Objects{
		Nodes:     []*v1.Node{plugintest.Node("n0", "8", 0, nil)},
		PodGroups: []*pgv1alpha1.PodGroup{plugintest.PodGroup("g", 2)},
		Pods:      gm,
	})
	ref := ident.Ref{Namespace: "default", Name: "g"}
	e.Eventually("members indexed", func() bool { return len(pl.gangs.Members(ref)) == 2 })
	state, _, _ := e.Cycle(gm[0])
	e.Filter(state, gm[0])
	pl.Reserve(e.Ctx, state, gm[0], "n0")
	st, wait := pl.Permit(e.Ctx, state, gm[0], "n0")
	if st.Code() != fwk.Wait || wait <= 0 {
		t.Fatalf("first member Permit = %v %v, want Wait", st, wait)
	}
	// The member is released before its sibling arrives: the gang is torn
	// down, once.
	pl.Unreserve(e.Ctx, state, gm[0], "n0")
	if pl.m.Phase(ref) != lifecycle.PhaseIdle || pl.m.HoldsAnywhere() {
		t.Fatalf("after teardown phase %s holds %v", pl.m.Phase(ref), pl.m.HoldsAnywhere())
	}
	c, _ := pl.gangs.Status.Get(ref)
	if c.Reason != lifecycle.ReasonPlanBroken {
		t.Fatalf("condition %+v, want PlanBroken", c)
	}
	pl.Unreserve(e.Ctx, state, gm[0], "n0")
	if c2, _ := pl.gangs.Status.Get(ref); c2 != c {
		t.Fatalf("a second unreserve changed the condition to %+v", c2)
	}

	// Planned again, both members reserve: the second Permit lets both go.
	state, _, _ = e.Cycle(gm[0])
	e.Filter(state, gm[0])
	pl.Reserve(e.Ctx, state, gm[0], "n0")
	if st, _ := pl.Permit(e.Ctx, state, gm[0], "n0"); st.Code() != fwk.Wait {
		t.Fatalf("first member Permit = %v, want Wait", st)
	}
	state2, _, _ := e.Cycle(gm[1])
	pl.Reserve(e.Ctx, state2, gm[1], "n0")
	if st, _ := pl.Permit(e.Ctx, state2, gm[1], "n0"); !st.IsSuccess() {
		t.Fatalf("second member Permit = %v, want success at the quorum", st)
	}
	if c, _ := pl.gangs.Status.Get(ref); c.Reason != status.ReasonScheduled || c.Status != metav1.ConditionTrue {
		t.Fatalf("condition %+v, want Scheduled", c)
	}
}

// A plan's holds keep other pods off the capacity it holds.
func TestHoldsKeepOtherPodsOff(t *testing.T) {
	gm := members("g", 2, "4", 0)
	e, pl := env(t, plugintest.Objects{
		Nodes:     []*v1.Node{plugintest.Node("n0", "8", 0, nil)},
		PodGroups: []*pgv1alpha1.PodGroup{plugintest.PodGroup("g", 2)},
		Pods:      gm,
	})
	ref := ident.Ref{Namespace: "default", Name: "g"}
	e.Eventually("members indexed", func() bool { return len(pl.gangs.Members(ref)) == 2 })
	state, _, _ := e.Cycle(gm[0])
	e.Filter(state, gm[0])
	plain := plugintest.Pod("plain", "", "2", 0)
	pstate, _, st := e.Cycle(plain)
	if !st.IsSuccess() {
		t.Fatalf("plain pod PreFilter = %v", st)
	}
	if fit, failed := e.Filter(pstate, plain); len(fit) != 0 || !strings.Contains(failed["n0"].Message(), "held for a planned or reserved gang") {
		t.Fatalf("plain pod fits %v (%v), want none: the plan holds n0", fit, failed)
	}
	pl.m.Release(ref, lifecycle.ReasonPlanBroken, "test")
	if fit, _ := e.Filter(pstate, plain); len(fit) != 1 {
		t.Fatalf("after the plan is released the plain pod fits %v", fit)
	}
}

func TestQueueingHints(t *testing.T) {
	e, pl := env(t, plugintest.Objects{PodGroups: []*pgv1alpha1.PodGroup{
		plugintest.PodGroup("a", 2),
		func() *pgv1alpha1.PodGroup {
			pg := plugintest.PodGroup("after", 1)
			pg.Annotations = map[string]string{phalanxv1alpha1.DependsOnAnnotation: "a"}
			return pg
		}(),
	}})
	e.Eventually("PodGroups in the lister", func() bool {
		_, err := pl.gangs.Spec(ident.Ref{Namespace: "default", Name: "after"})
		return err == nil
	})
	member := plugintest.Pod("a-0", "a", "1", 0)
	sibling := plugintest.Pod("a-1", "a", "1", 0)
	waiter := plugintest.Pod("after-0", "after", "1", 0)
	// Gang a failed to plan in a-0's cycle: a-0 stands for it.
	refA := ident.Ref{Namespace: "default", Name: "a"}
	pl.m.ObserveMember(refA, member.UID, "")
	pl.m.ObserveMember(refA, sibling.UID, "")
	pl.m.Fail(refA, member.UID, "no room")
	logger := klog.Background()
	events, err := pl.EventsToRegister(e.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	capacity := events[0].QueueingHintFn
	for _, tc := range []struct {
		name        string
		hint        fwk.QueueingHintFn
		pod         *v1.Pod
		oldObj, obj any
		want        fwk.QueueingHint
	}{
		// The runtime wakes a failed gang, paced (runtime.SkipFailedGang).
		{"capacity freed: the failed gang's representative", capacity, member, nil, nil, fwk.QueueSkip},
		{"capacity freed: another member of the failed gang", capacity, sibling, nil, nil, fwk.QueueSkip},
		{"capacity freed: a member of a gang that has not failed", capacity, waiter, nil, nil, fwk.Queue},
		{"capacity freed: a plain pod", capacity, plugintest.Pod("p", "", "1", 0), nil, nil, fwk.Queue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.hint(logger, tc.pod, tc.oldObj, tc.obj)
			if err != nil || got != tc.want {
				t.Fatalf("hint = %v %v, want %v", got, err, tc.want)
			}
		})
	}
}

// TestPodEventsSpareBinds: a member waiting at PreEnqueue is checked
// against every event Coscheduling registered, and gang members wait there
// in thousands. A bind (an assigned pod added), a bound pod's status
// update (kubelets write them all the time), a pod created or an
// unscheduled pod's update must match none of Coscheduling's events, or
// each makes the queue check every waiting member: a sibling created and a
// dependency's member starting to run are the runtime's
// (TestQuorumWakesLead, TestDependencyRunningWakesDependents). A pod
// deleted still matches (room freed).
func TestPodEventsSpareBinds(t *testing.T) {
	_, pl := env(t, plugintest.Objects{})
	events, err := pl.EventsToRegister(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	matches := func(incoming fwk.ClusterEvent) bool {
		for _, ev := range events {
			if framework.MatchClusterEvents(ev.Event, incoming) {
				return true
			}
		}
		return false
	}
	for _, tc := range []struct {
		name  string
		event fwk.ClusterEvent
		want  bool
	}{
		{"a pod bound", framework.EventAssignedPodAdd, false},
		{"an unscheduled pod updated", framework.EventUnscheduledPodUpdate, false},
		{"a pod created", framework.EventUnscheduledPodAdd, false},
		{"a bound pod's status updated", framework.EventAssignedPodUpdate, false},
		{"a bound pod deleted", framework.EventAssignedPodDelete, true},
	} {
		if got := matches(tc.event); got != tc.want {
			t.Errorf("%s (%s): matched = %v, want %v", tc.name, tc.event.Label(), got, tc.want)
		}
	}
}

func TestLessKeepsGangsTogether(t *testing.T) {
	older := plugintest.PodGroup("older", 1)
	newer := plugintest.PodGroup("newer", 1)
	newer.CreationTimestamp = metav1.NewTime(older.CreationTimestamp.Add(1e9))
	e, pl := env(t, plugintest.Objects{PodGroups: []*pgv1alpha1.PodGroup{older, newer}})
	e.Eventually("PodGroups in the lister", func() bool {
		_, err := pl.gangs.Spec(ident.Ref{Namespace: "default", Name: "newer"})
		return err == nil
	})
	qp := func(p *v1.Pod) fwk.QueuedEntityInfo {
		pi, _ := framework.NewPodInfo(p)
		return &framework.QueuedPodInfo{PodInfo: pi}
	}
	high := plugintest.Pod("high", "newer", "1", 0)
	prio := int32(10)
	high.Spec.Priority = &prio
	for _, tc := range []struct {
		name string
		a, b *v1.Pod
		want bool
	}{
		{"older gang first", plugintest.Pod("o", "older", "1", 0), plugintest.Pod("n", "newer", "1", 0), true},
		{"newer gang second", plugintest.Pod("n", "newer", "1", 0), plugintest.Pod("o", "older", "1", 0), false},
		{"priority before age", high, plugintest.Pod("o", "older", "1", 0), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := pl.Less(qp(tc.a), qp(tc.b)); got != tc.want {
				t.Fatalf("Less = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestLessOrdersPodGroupEntities: since 1.37 the queue may hold a whole pod
// group as one entity (a scheduler run with the GenericWorkload gate); Less
// orders it as its first unscheduled member (through a composite group's
// children), so a group and a pod compare as their pods do. A group with no
// pod falls back to priority, then queue time.
func TestLessOrdersPodGroupEntities(t *testing.T) {
	older := plugintest.PodGroup("older", 1)
	newer := plugintest.PodGroup("newer", 1)
	newer.CreationTimestamp = metav1.NewTime(older.CreationTimestamp.Add(1e9))
	e, pl := env(t, plugintest.Objects{PodGroups: []*pgv1alpha1.PodGroup{older, newer}})
	e.Eventually("PodGroups in the lister", func() bool {
		_, err := pl.gangs.Spec(ident.Ref{Namespace: "default", Name: "newer"})
		return err == nil
	})
	pod := func(p *v1.Pod) fwk.QueuedEntityInfo {
		pi, _ := framework.NewPodInfo(p)
		return &framework.QueuedPodInfo{PodInfo: pi}
	}
	leaf := func(name string, pods ...*v1.Pod) *framework.PodGroupInfo {
		return &framework.PodGroupInfo{Namespace: "default", Name: name, Type: fwk.PodGroupKeyType, UnscheduledPods: pods,
			PodGroup: &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}}
	}
	group := func(p *v1.Pod) fwk.QueuedEntityInfo {
		return &framework.QueuedPodGroupInfo{PodGroupInfo: leaf("g", p)}
	}
	composite := func(p *v1.Pod) fwk.QueuedEntityInfo {
		return &framework.QueuedPodGroupInfo{PodGroupInfo: &framework.PodGroupInfo{
			Namespace: "default", Name: "c", Type: fwk.CompositePodGroupKeyType,
			Children: []*framework.PodGroupInfo{leaf("empty"), leaf("g", p)}}}
	}
	o, n := plugintest.Pod("o", "older", "1", 0), plugintest.Pod("n", "newer", "1", 0)
	for name, wrap := range map[string]func(*v1.Pod) fwk.QueuedEntityInfo{"pod group": group, "composite pod group": composite} {
		t.Run(name, func(t *testing.T) {
			if !pl.Less(wrap(o), pod(n)) || pl.Less(wrap(n), pod(o)) || !pl.Less(pod(o), wrap(n)) || !pl.Less(wrap(o), wrap(n)) {
				t.Fatal("the older gang's entity does not go before the newer gang's")
			}
		})
	}
	t.Run("empty group", func(t *testing.T) {
		empty := func(priority int32, queued time.Time) fwk.QueuedEntityInfo {
			pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "e"},
				Spec: schedulingv1beta1.PodGroupSpec{Priority: &priority}}
			return &framework.QueuedPodGroupInfo{
				PodGroupInfo:   &framework.PodGroupInfo{Namespace: "default", Name: "e", Type: fwk.PodGroupKeyType, PodGroup: pg},
				QueueingParams: framework.QueueingParams{Timestamp: queued},
			}
		}
		now := time.Now()
		if !pl.Less(empty(10, now), empty(0, now.Add(-time.Second))) || !pl.Less(empty(0, now), empty(0, now.Add(time.Second))) {
			t.Fatal("empty groups are not ordered by priority, then queue time")
		}
	})
}

// TestPreBindBoundsGangBinds: gang members take a bind slot from PreBind to
// PostBind (or Unreserve); plain pods skip PreBind and take none.
func TestPreBindBoundsGangBinds(t *testing.T) {
	gangPods := members("g", 2, "1", 0)
	plain := plugintest.Pod("plain", "", "1", 0)
	objs := plugintest.Objects{
		PodGroups: []*pgv1alpha1.PodGroup{plugintest.PodGroup("g", 2)},
		Pods:      append(gangPods, plain),
		Nodes:     []*v1.Node{plugintest.Node("n0", "8", 0, nil)},
	}
	e, pl := env(t, objs)
	e.Eventually("PodGroup in the lister", func() bool {
		_, err := pl.gangs.Spec(ident.Ref{Namespace: "default", Name: "g"})
		return err == nil
	})
	ctx := e.Ctx

	state, _, _ := e.Cycle(plain)
	if _, st := pl.PreBindPreFlight(ctx, state, plain, "n0"); st.Code() != fwk.Skip {
		t.Fatalf("plain pod: PreBindPreFlight %v, want Skip", st)
	}
	// Without the NominatedNodeNameForExpectation gate the framework calls
	// PreBind whatever PreBindPreFlight said.
	if st := pl.PreBind(ctx, state, plain, "n0"); !st.IsSuccess() || pl.binds.InFlight() != 0 {
		t.Fatalf("plain pod: PreBind %v with %d binds in flight, want success and no slot taken", st, pl.binds.InFlight())
	}

	for i, pod := range gangPods {
		state, _, _ := e.Cycle(pod)
		if _, st := pl.PreBindPreFlight(ctx, state, pod, "n0"); !st.IsSuccess() {
			t.Fatalf("member: PreBindPreFlight %v, want Success", st)
		}
		if st := pl.PreBind(ctx, state, pod, "n0"); !st.IsSuccess() {
			t.Fatalf("member: PreBind %v", st)
		}
		if got := pl.binds.InFlight(); got != i+1 {
			t.Fatalf("binds in flight %d, want %d", got, i+1)
		}
	}
	pl.PostBind(ctx, nil, gangPods[0], "n0")
	pl.Unreserve(ctx, nil, gangPods[1], "n0")
	if got := pl.binds.InFlight(); got != 0 {
		t.Fatalf("binds in flight %d after PostBind and Unreserve, want 0", got)
	}
}

// TestLessUsesWorkloadPriority: an upstream Workload API PodGroup's
// spec.priority is the gang's priority. Its pods carry none (priority 0), so
// the older gang would go first by age; the newer gang's PodGroup priority
// puts it first, and PreFilter charges its holds at that priority.
func TestLessUsesWorkloadPriority(t *testing.T) {
	upstream := func(name string, created time.Time, priority *int32) *schedulingv1beta1.PodGroup {
		return &schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("pg-" + name), CreationTimestamp: metav1.NewTime(created)},
			Spec: schedulingv1beta1.PodGroupSpec{
				SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 1}},
				Priority:         priority,
			},
		}
	}
	t0 := time.Unix(1_000_000, 0)
	older := upstream("older", t0, nil)
	newer := upstream("newer", t0.Add(time.Second), ptr.To[int32](1000))
	e, pl := env(t, plugintest.Objects{UpstreamPodGroups: []*schedulingv1beta1.PodGroup{older, newer}})
	e.Eventually("upstream PodGroups in the lister", func() bool {
		_, err := pl.gangs.Spec(ident.Ref{Source: ident.SourceWorkload, Namespace: "default", Name: "newer"})
		return err == nil
	})
	member := func(name, group string) *v1.Pod {
		p := plugintest.Pod(name, "", "1", 0)
		p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
		return p
	}
	qp := func(p *v1.Pod) fwk.QueuedEntityInfo {
		pi, _ := framework.NewPodInfo(p)
		return &framework.QueuedPodInfo{PodInfo: pi}
	}
	o, n := member("o", "older"), member("n", "newer")
	if !pl.Less(qp(n), qp(o)) || pl.Less(qp(o), qp(n)) {
		t.Fatalf("the gang with PodGroup priority 1000 does not go before the older gang of priority 0")
	}
	if got := pl.gangs.PriorityOf(n); got != 1000 {
		t.Fatalf("PriorityOf(member of newer) = %d, want the PodGroup's 1000", got)
	}
	if got := pl.gangs.PriorityOf(o); got != 0 {
		t.Fatalf("PriorityOf(member of older) = %d, want the pod's 0", got)
	}
}

// TestOrderedStartupReported: a gang short of members whose StatefulSet
// creates pods one at a time (OrderedReady) is reported as OrderedStartup
// once it has waited, with the fix; PreEnqueue then says the same.
func TestOrderedStartupReported(t *testing.T) {
	pod := plugintest.Pod("db-0", "db", "1", 0)
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "sts-uid", Controller: ptrTrue()}}
	e, pl := env(t, plugintest.Objects{PodGroups: []*pgv1alpha1.PodGroup{plugintest.PodGroup("db", 3)}, Pods: []*v1.Pod{pod}})
	if _, err := e.Client.AppsV1().StatefulSets("default").Create(e.Ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db"},
		Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ref := ident.Ref{Namespace: "default", Name: "db"}
	e.Eventually("PodGroup and member in the listers", func() bool {
		spec, err := pl.gangs.Spec(ref)
		return err == nil && pl.gangs.CountMembers(spec).Ready == 1
	})
	if st := pl.PreEnqueue(e.Ctx, pod); !strings.Contains(st.Message(), "1 of 3 members exist") {
		t.Fatalf("PreEnqueue = %q, want members pending", st.Message())
	}
	e.Eventually("OrderedStartup condition", func() bool {
		e.Clock.Step(time.Second)
		c, ok := pl.gangs.Status.Get(ref)
		return ok && c.Reason == status.ReasonOrderedStartup
	})
	st := pl.PreEnqueue(e.Ctx, pod)
	for _, want := range []string{"StatefulSet default/db", "podManagementPolicy: OrderedReady", "podManagementPolicy: Parallel"} {
		if !strings.Contains(st.Message(), want) {
			t.Errorf("PreEnqueue = %q, does not say %q", st.Message(), want)
		}
	}
	if c, _ := pl.gangs.Status.Get(ref); c.Reason != status.ReasonOrderedStartup {
		t.Fatalf("PreEnqueue put the condition back to %s", c.Reason)
	}
}

// TestDryRunMatchesPlans: the manager's dry run ("how many whole copies of
// this gang fit now?") answers what the scheduler then does: as many gangs
// of that shape plan, and the next one does not. Capacity that those plans
// hold is not offered again.
func TestDryRunMatchesPlans(t *testing.T) {
	var pods []*v1.Pod
	var groups []*pgv1alpha1.PodGroup
	const gangs = 6
	for g := range gangs {
		name := "g" + string(rune('0'+g))
		groups = append(groups, plugintest.PodGroup(name, 3))
		pods = append(pods, members(name, 3, "1", 1)...)
	}
	// 13 GPUs on four nodes of different sizes.
	e, pl := env(t, plugintest.Objects{
		Nodes: []*v1.Node{plugintest.Node("n0", "8", 4, nil), plugintest.Node("n1", "8", 4, nil),
			plugintest.Node("n2", "8", 2, nil), plugintest.Node("n3", "8", 3, nil)},
		Pods: pods, PodGroups: groups,
	})
	for g := range gangs {
		ref := ident.Ref{Namespace: "default", Name: "g" + string(rune('0'+g))}
		e.Eventually("members indexed", func() bool { return len(pl.gangs.Members(ref)) == 3 })
	}
	copies := func() gang.Answer {
		shape := []*v1.Pod{plugintest.Pod("probe-a", "", "1", 1), plugintest.Pod("probe-b", "", "1", 1), plugintest.Pod("probe-c", "", "1", 1)}
		state, _, _ := e.Cycle(shape[0])
		infos, err := e.FW.SnapshotSharedLister().NodeInfos().List()
		if err != nil {
			t.Fatal(err)
		}
		return pl.m.Copies(e.Ctx, gang.Query{Members: shape, Prober: probe.Filters(e.FW, Name, state, infos)})
	}
	// Each gang's arrival wakes its members once; let that settle.
	all, woken := sets.New[string](), sets.New[string]()
	for _, p := range pods {
		all.Insert("default/" + p.Name)
	}
	e.Eventually("arrival wakes", func() bool {
		woken = woken.Union(sets.New(e.Activated()...))
		return woken.Equal(all)
	})
	before := copies()
	if before.Copies != 4 {
		t.Fatalf("dry run: %d copies (%s), want 4 (13 GPUs, gangs of 3)", before.Copies, before.Why)
	}
	if pl.m.HoldsAnywhere() || len(pl.m.Reservations()) != 0 {
		t.Fatal("the dry run holds capacity; it must change nothing")
	}
	planned := 0
	for g := range gangs {
		ref := ident.Ref{Namespace: "default", Name: "g" + string(rune('0'+g))}
		if pl.m.Phase(ref) != lifecycle.PhaseIdle {
			t.Fatalf("gang %s is %s after the dry run, want Idle", ref, pl.m.Phase(ref))
		}
		first := pods[3*g]
		state, _, st := e.Cycle(first)
		if !st.IsSuccess() {
			continue
		}
		if fit, _ := e.Filter(state, first); len(fit) == 1 && pl.m.Phase(ref) == lifecycle.PhasePlanned {
			planned++
		}
	}
	if planned != before.Copies {
		t.Fatalf("%d gangs planned, the dry run said %d", planned, before.Copies)
	}
	if after := copies(); after.Copies != 0 || !strings.Contains(after.Why, "no placement") {
		t.Fatalf("dry run with every GPU held by plans: %d copies (%q), want 0", after.Copies, after.Why)
	}
}

// TestFragmentationScore: a plain 1-GPU pod scores the half-used node above
// the empty one that the workload's 8-GPU pods need (LeastAllocated would
// spread it there), by 50 points per GPU of fragmentation; gang members and
// a profile with the score off are not scored.
func TestFragmentationScore(t *testing.T) {
	withHalfLife := func(seconds int64) plugintest.Plugin {
		return plugintest.Plugin{
			Name: Name, Extensions: []string{"QueueSort", "PreFilter", "Filter"},
			New: func(ctx context.Context, h fwk.Handle, rt *runtime.Runtime) (fwk.Plugin, error) {
				return New(ctx, &config.CoschedulingArgs{DefaultScheduleTimeoutSeconds: 60, ReservationAfterSeconds: 30, FragmentationHalfLifeSeconds: seconds, ScheduledEvents: "PerGang"}, h, rt, NewBindSlots(GangBindConcurrency))
			},
		}
	}
	single := plugintest.Pod("single", "", "1", 1)
	member := plugintest.Pod("member-a", "g", "1", 1)
	objs := plugintest.Objects{
		Nodes: []*v1.Node{
			plugintest.Node("empty", "64", 8, nil),
			plugintest.Node("half", "64", 8, nil),
			plugintest.Node("full", "64", 8, nil),
		},
		PodGroups: []*pgv1alpha1.PodGroup{plugintest.PodGroup("g", 1)},
		// The workload seen: an 8-GPU pod, a 4-GPU pod and the 1-GPU pods.
		Pods: []*v1.Pod{
			plugintest.OnNode(plugintest.Pod("eight", "", "1", 8), "full"),
			plugintest.OnNode(plugintest.Pod("four", "", "1", 4), "half"),
			single, member,
		},
	}
	scores := func(pl *Coscheduling, state fwk.CycleState, e *plugintest.Env, pod *v1.Pod) map[string]int64 {
		list := fwk.NodeScoreList{}
		for _, n := range []string{"empty", "half"} {
			s, st := pl.Score(e.Ctx, state, pod, e.NodeInfo(n))
			if !st.IsSuccess() {
				t.Fatalf("Score on %s: %v", n, st)
			}
			list = append(list, fwk.NodeScore{Name: n, Score: s})
		}
		if st := pl.NormalizeScore(e.Ctx, state, pod, list); !st.IsSuccess() {
			t.Fatalf("NormalizeScore: %v", st)
		}
		out := map[string]int64{}
		for _, s := range list {
			out[s.Name] = s.Score
		}
		return out
	}

	e := plugintest.New(t, objs, withHalfLife(3600), plugintest.NodeResourcesFit)
	pl := e.Plugins[Name].(*Coscheduling)
	e.Eventually("the workload's four pods", func() bool {
		total := 0.0
		for _, w := range pl.m.Workload.Workload(pl.m.Now()) {
			total += w.Weight
		}
		// A fake clock: no decay.
		return total == 4
	})
	state, _, st := e.Cycle(single)
	if !st.IsSuccess() && !st.IsSkip() {
		t.Fatalf("PreFilter: %v", st)
	}
	if st := pl.PreScore(e.Ctx, state, single, nil); !st.IsSuccess() {
		t.Fatalf("PreScore of a plain GPU pod: %v, want it scored", st)
	}
	// Workload weights: 8 GPUs 1/4, 4 GPUs 1/4, 1 GPU 1/2. On the empty node
	// the pod adds 1.75 GPUs of expected fragmentation (7 left, useless to
	// the 8-GPU shape); on the half-used one 0.5. The empty node is 1.25
	// GPUs behind: 62 points.
	if got := scores(pl, state, e, single); got["half"] != fwk.MaxScore || got["empty"] != fwk.MaxScore-62 {
		t.Errorf("scores %v: want half %d, empty %d", got, fwk.MaxScore, fwk.MaxScore-62)
	}
	state, _, _ = e.Cycle(member)
	if st := pl.PreScore(e.Ctx, state, member, nil); !st.IsSkip() {
		t.Errorf("PreScore of a gang member: %v, want Skip (it goes to its planned node)", st)
	}

	off := plugintest.New(t, objs, withHalfLife(0), plugintest.NodeResourcesFit)
	offPl := off.Plugins[Name].(*Coscheduling)
	state, _, _ = off.Cycle(single)
	if st := offPl.PreScore(off.Ctx, state, single, nil); !st.IsSkip() {
		t.Errorf("PreScore with fragmentationHalfLifeSeconds 0: %v, want Skip", st)
	}
}
