package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/utils/ptr"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// gangPods returns n member pods of a PodGroup.
func gangPods(ns, group string, n int, spec testcluster.PodSpec) []testcluster.PodSpec {
	out := make([]testcluster.PodSpec, n)
	for i := range out {
		s := spec
		s.Namespace, s.PodGroup = ns, group
		s.Name = fmt.Sprintf("%s-%d", group, i)
		out[i] = s
	}
	return out
}

func createGang(t *testing.T, c *testcluster.Cluster, pg *pgv1alpha1.PodGroup, pods []testcluster.PodSpec) {
	t.Helper()
	ctx := ctxFor(t)
	if pg.Namespace != "default" {
		_, _ = c.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pg.Namespace}}, metav1.CreateOptions{})
	}
	if err := c.CreatePodGroup(ctx, pg); err != nil {
		t.Fatal(err)
	}
	if err := c.CreatePods(ctx, pods...); err != nil {
		t.Fatal(err)
	}
}

func boundCount(ctx context.Context, c *testcluster.Cluster, ns, group string) (int, error) {
	b, err := c.BoundPods(ctx, ns, pgv1alpha1.PodGroupLabel+"="+group)
	return len(b), err
}

// scheduledCondition reads the Scheduled condition the scheduler writes on a
// PodGroup (raw JSON: the upstream Go type has no conditions field).
func scheduledCondition(ctx context.Context, c *testcluster.Cluster, ns, name string) (*metav1.Condition, error) {
	return c.PodGroupCondition(ctx, ns, name, "Scheduled")
}

// waitCondition waits until the PodGroup's Scheduled condition has reason
// (and, if given, a message containing each of messageParts).
func waitCondition(t *testing.T, c *testcluster.Cluster, ns, name, reason string, messageParts ...string) *metav1.Condition {
	t.Helper()
	var got *metav1.Condition
	err := testcluster.Eventually(ctxFor(t), 60*time.Second, func(ctx context.Context) (bool, error) {
		cond, err := scheduledCondition(ctx, c, ns, name)
		got = cond
		if err != nil || cond == nil || cond.Reason != reason {
			return false, err
		}
		for _, part := range messageParts {
			if !strings.Contains(cond.Message, part) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("PodGroup %s/%s never got Scheduled reason %s with %q (last: %+v): %v", ns, name, reason, messageParts, got, err)
	}
	return got
}

func waitBoundCount(t *testing.T, c *testcluster.Cluster, ns, group string, want int) {
	t.Helper()
	var n int
	err := testcluster.Eventually(ctxFor(t), 60*time.Second, func(ctx context.Context) (bool, error) {
		var err error
		n, err = boundCount(ctx, c, ns, group)
		return n == want, err
	})
	if err != nil {
		t.Fatalf("gang %s/%s: %d members bound, want %d: %v", ns, group, n, want, err)
	}
}

func assertBound(t *testing.T, c *testcluster.Cluster, ns, group string, want int) {
	t.Helper()
	n, err := boundCount(ctxFor(t), c, ns, group)
	if err != nil {
		t.Fatal(err)
	}
	if n != want {
		t.Fatalf("gang %s/%s: %d members bound, want %d", ns, group, n, want)
	}
}

// TestGangReference is the reference scenario: 4 nodes × 4 CPU. A job of 20
// pods × 4 CPU with minMember 20 gets none bound and a condition that says
// why; the same job with minMember 4 gets exactly 4 bound.
func TestGangReference(t *testing.T) {
	c := startCluster(t, nodes("n", 4, testcluster.NodeSpec{CPU: "4", Memory: "16Gi"})...)
	startScheduler(t, c)
	member := testcluster.PodSpec{CPU: "4", Memory: "1Gi"}

	createGang(t, c, testcluster.PodGroup("all", "big", 20), gangPods("all", "big", 20, member))
	cond := waitCondition(t, c, "all", "big", "Unschedulable", "20 more members", "at most 4 fit")
	if cond.Status != metav1.ConditionFalse {
		t.Fatalf("condition status %s, want False", cond.Status)
	}
	assertBound(t, c, "all", "big", 0)

	createGang(t, c, testcluster.PodGroup("some", "big", 4), gangPods("some", "big", 20, member))
	waitBoundCount(t, c, "some", "big", 4)
	waitCondition(t, c, "some", "big", "Scheduled")
	// The first gang still has nothing: no partial gang, ever.
	assertBound(t, c, "all", "big", 0)
}

// TestGangFragmentation: the cluster has enough free CPU in total, but no
// arrangement fits the gang. It is rejected whole and holds nothing.
func TestGangFragmentation(t *testing.T) {
	c := startCluster(t, nodes("n", 4, testcluster.NodeSpec{CPU: "4", Memory: "16Gi"})...)
	startScheduler(t, c)
	ctx := ctxFor(t)
	for i := 0; i < 4; i++ {
		if err := c.CreatePods(ctx, testcluster.PodSpec{Name: fmt.Sprintf("filler-%d", i), CPU: "1",
			NodeSelector: map[string]string{v1.LabelHostname: fmt.Sprintf("n-%d", i)}}); err != nil {
			t.Fatal(err)
		}
		waitBound(t, c, "default", fmt.Sprintf("filler-%d", i))
	}
	// 12 CPU free in total, 3 per node: three 4-CPU members cannot fit.
	createGang(t, c, testcluster.PodGroup("default", "frag", 3), gangPods("default", "frag", 3, testcluster.PodSpec{CPU: "4"}))
	waitCondition(t, c, "default", "frag", "Unschedulable", "at most 0 fit", "NodeResourcesFit")
	assertBound(t, c, "default", "frag", 0)
	// Nothing is held: a plain pod can still use the free CPU on every node.
	for i := 0; i < 4; i++ {
		if err := c.CreatePods(ctx, testcluster.PodSpec{Name: fmt.Sprintf("after-%d", i), CPU: "3"}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 4; i++ {
		waitBound(t, c, "default", fmt.Sprintf("after-%d", i))
	}
	assertBound(t, c, "default", "frag", 0)
}

// TestGangFilteredCapacity: nodes that taints exclude are not counted.
func TestGangFilteredCapacity(t *testing.T) {
	specs := nodes("n", 4, testcluster.NodeSpec{CPU: "4", Memory: "16Gi"})
	taint := v1.Taint{Key: "reserved", Value: "infra", Effect: v1.TaintEffectNoSchedule}
	specs[0].Taints = []v1.Taint{taint}
	specs[1].Taints = []v1.Taint{taint}
	c := startCluster(t, specs...)
	startScheduler(t, c)

	createGang(t, c, testcluster.PodGroup("default", "three", 3), gangPods("default", "three", 3, testcluster.PodSpec{CPU: "4"}))
	waitCondition(t, c, "default", "three", "Unschedulable", "2 of 4 nodes fail filters", "TaintToleration")
	assertBound(t, c, "default", "three", 0)

	createGang(t, c, testcluster.PodGroup("default", "two", 2), gangPods("default", "two", 2, testcluster.PodSpec{CPU: "4"}))
	waitBoundCount(t, c, "default", "two", 2)
	bound, err := c.BoundPods(ctxFor(t), "default", pgv1alpha1.PodGroupLabel+"=two")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range bound {
		if p.Spec.NodeName == "n-0" || p.Spec.NodeName == "n-1" {
			t.Fatalf("member %s bound to tainted node %s", p.Name, p.Spec.NodeName)
		}
	}
}

// TestGangPlainPodsStillSchedule: pods without a PodGroup in the phalanx
// profile are scheduled as kube-scheduler would.
func TestGangPlainPodsStillSchedule(t *testing.T) {
	c := startCluster(t, nodes("n", 2, testcluster.NodeSpec{CPU: "4", Memory: "16Gi"})...)
	startScheduler(t, c)
	ctx := ctxFor(t)
	for i := 0; i < 6; i++ {
		if err := c.CreatePods(ctx, testcluster.PodSpec{Name: fmt.Sprintf("plain-%d", i), CPU: "1"}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 6; i++ {
		waitBound(t, c, "default", fmt.Sprintf("plain-%d", i))
	}
}

// TestGangMissingPodGroup: a pod naming a PodGroup that does not exist waits
// with an event saying so, and is scheduled once the PodGroup appears.
func TestGangMissingPodGroup(t *testing.T) {
	c := startCluster(t, nodes("n", 1, testcluster.NodeSpec{CPU: "4", Memory: "16Gi"})...)
	startScheduler(t, c)
	ctx := ctxFor(t)
	if err := c.CreatePods(ctx, gangPods("default", "late", 2, testcluster.PodSpec{CPU: "1"})...); err != nil {
		t.Fatal(err)
	}
	err := testcluster.Eventually(ctx, 60*time.Second, func(ctx context.Context) (bool, error) {
		events, err := c.Client.EventsV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Regarding.Name == "late-0" && e.Reason == "PodGroupNotFound" && strings.Contains(e.Note, "default/late") {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no PodGroupNotFound event: %v", err)
	}
	assertBound(t, c, "default", "late", 0)
	if err := c.CreatePodGroup(ctx, testcluster.PodGroup("default", "late", 2)); err != nil {
		t.Fatal(err)
	}
	waitBoundCount(t, c, "default", "late", 2)
}

// TestGangWaitsForMembers: no member takes a scheduling cycle before
// minMember members exist.
func TestGangWaitsForMembers(t *testing.T) {
	c := startCluster(t, nodes("n", 2, testcluster.NodeSpec{CPU: "4", Memory: "16Gi"})...)
	startScheduler(t, c)
	pods := gangPods("default", "g", 3, testcluster.PodSpec{CPU: "1"})
	createGang(t, c, testcluster.PodGroup("default", "g", 3), pods[:2])
	// Members arrive one by one; the condition follows them.
	waitCondition(t, c, "default", "g", "MembersPending", "2 of 3 members exist")
	assertBound(t, c, "default", "g", 0)
	if err := c.CreatePods(ctxFor(t), pods[2]); err != nil {
		t.Fatal(err)
	}
	waitBoundCount(t, c, "default", "g", 3)
}

// TestGangDependency: a gang annotated depends-on waits until its dependency
// has minMember pods running.
func TestGangDependency(t *testing.T) {
	c := startCluster(t, nodes("n", 2, testcluster.NodeSpec{CPU: "4", Memory: "16Gi"})...)
	startScheduler(t, c)
	ctx := ctxFor(t)
	train := testcluster.PodGroup("default", "train", 2)
	train.Annotations = map[string]string{"scheduling.phalanx.dev/depends-on": "prep"}
	createGang(t, c, train, gangPods("default", "train", 2, testcluster.PodSpec{CPU: "1"}))
	waitCondition(t, c, "default", "train", "DependencyNotFound", "default/prep")

	createGang(t, c, testcluster.PodGroup("default", "prep", 2), gangPods("default", "prep", 2, testcluster.PodSpec{CPU: "1"}))
	waitBoundCount(t, c, "default", "prep", 2)
	waitCondition(t, c, "default", "train", "WaitingForDependency")
	assertBound(t, c, "default", "train", 0)

	// No kubelet here: mark the prep pods Running as one would.
	for i := 0; i < 2; i++ {
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, fmt.Sprintf("prep-%d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Status.Phase = v1.PodRunning
		if _, err := c.Client.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitBoundCount(t, c, "default", "train", 2)
}

// TestGangRestartMidGang: the scheduler stops while members wait in Permit
// for a sibling; nothing is bound, and after restart the gang is replanned
// and bound whole.
func TestGangRestartMidGang(t *testing.T) {
	c := startCluster(t, nodes("n", 2, testcluster.NodeSpec{CPU: "4", Memory: "16Gi"})...)
	s := startScheduler(t, c)
	ctx := ctxFor(t)
	pods := gangPods("default", "r", 3, testcluster.PodSpec{CPU: "1"})
	plannedBefore := planOutcomes(t, "planned")
	pg := testcluster.PodGroup("default", "r", 3)
	pg.Spec.ScheduleTimeoutSeconds = ptr.To[int32](600)
	if err := c.CreatePodGroup(ctx, pg); err != nil {
		t.Fatal(err)
	}
	// The third member cannot pass the volume filter: the other two are
	// planned, reserved and wait in Permit for it.
	blocked := createLastBlocked(t, c, pods)
	// The scheduler runs in this process: its plan counter shows the gang
	// was planned, so its two members are reserved and wait in Permit.
	err := testcluster.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		return planOutcomes(t, "planned") > plannedBefore, nil
	})
	if err != nil {
		t.Fatalf("gang never planned: %v", err)
	}
	assertBound(t, c, "default", "r", 0)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	assertBound(t, c, "default", "r", 0)

	startScheduler(t, c)
	// The workload replaces the broken member with one that can run.
	replaceMember(t, c, blocked, pods[len(pods)-1])
	waitBoundCount(t, c, "default", "r", 3)
}

// TestGangScheduleTimeout: members wait in Permit for a sibling that never
// comes (it names a volume claim that does not exist); at the PodGroup's
// timeout they are all released (nothing bound), the condition names the
// member and says when the gang plans again, and the gang holds nothing
// meanwhile: a plain pod turned away by its hold takes the whole node
// within seconds of the timeout.
func TestGangScheduleTimeout(t *testing.T) {
	c := startCluster(t, nodes("n", 1, testcluster.NodeSpec{CPU: "4", Memory: "16Gi"})...)
	startScheduler(t, c)
	ctx := ctxFor(t)
	pg := testcluster.PodGroup("default", "slow", 3)
	pg.Spec.ScheduleTimeoutSeconds = ptr.To[int32](3)
	if err := c.CreatePodGroup(ctx, pg); err != nil {
		t.Fatal(err)
	}
	createLastBlocked(t, c, gangPods("default", "slow", 3, testcluster.PodSpec{CPU: "1"}))
	waitPlanned(t, c, "slow")
	// While the plan holds the node, a plain pod that needs all of it is
	// turned away by the hold.
	if err := c.CreatePods(ctx, testcluster.PodSpec{Name: "whole-node", CPU: "4"}); err != nil {
		t.Fatal(err)
	}
	// The condition moves on once the gang plans again (it no longer fits:
	// Unschedulable, later Reserving); the event stays.
	// (On a loaded machine a schedulable member may miss the 3 s too.)
	waitGroupEvent(t, c, "default", "slow", "ScheduleTimeout", "of 3 members were placed within 3s",
		"never placed: ", `slow-2 (`, `"missing-slow-2" not found`, "planning again after 1.5s")
	// The hold ended at most the 3 s timeout after whole-node was created.
	waitBoundWithin(t, c, "default", "whole-node", 3*time.Second+holdEndWake)
	assertBound(t, c, "default", "slow", 0)
}

// waitGroupEvent waits for an event on a gang's group object with reason
// and a note containing each of parts.
func waitGroupEvent(t *testing.T, c *testcluster.Cluster, ns, group, reason string, parts ...string) {
	t.Helper()
	waitKindEvent(t, c, "PodGroup", ns, group, reason, parts...)
}

// waitKindEvent waits for an event of reason on the object of kind whose
// note contains each of parts.
func waitKindEvent(t *testing.T, c *testcluster.Cluster, kind, ns, group, reason string, parts ...string) {
	t.Helper()
	var seen []string
	err := testcluster.Eventually(ctxFor(t), 60*time.Second, func(ctx context.Context) (bool, error) {
		events, err := c.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		seen = seen[:0]
	next:
		for _, e := range events.Items {
			if e.Regarding.Name != group || e.Regarding.Kind != kind {
				continue
			}
			seen = append(seen, e.Reason+": "+e.Note)
			if e.Reason != reason {
				continue
			}
			for _, part := range parts {
				if !strings.Contains(e.Note, part) {
					continue next
				}
			}
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s event on %s %s/%s saying %q (events: %q): %v", reason, kind, ns, group, parts, seen, err)
	}
}

// TestGangGatedMemberHoldsNothing: a member with a scheduling gate does not
// count toward the quorum: the gang waits as MembersPending, naming the
// gate, and holds nothing (a plain pod takes the whole node). Once the gate
// is removed and the room is free, the gang binds whole.
func TestGangGatedMemberHoldsNothing(t *testing.T) {
	c := startCluster(t, nodes("n", 1, testcluster.NodeSpec{CPU: "4", Memory: "16Gi"})...)
	startScheduler(t, c)
	ctx := ctxFor(t)
	if err := c.CreatePodGroup(ctx, testcluster.PodGroup("default", "gated", 3)); err != nil {
		t.Fatal(err)
	}
	gated := createLastGated(t, c, gangPods("default", "gated", 3, testcluster.PodSpec{CPU: "1"}))
	waitCondition(t, c, "default", "gated", "MembersPending", "2 of 3 members can be scheduled", "1 more wait on scheduling gates (example.com/hold)")
	if err := c.CreatePods(ctx, testcluster.PodSpec{Name: "whole-node", CPU: "4"}); err != nil {
		t.Fatal(err)
	}
	waitBound(t, c, "default", "whole-node")
	assertBound(t, c, "default", "gated", 0)

	if err := c.Client.CoreV1().Pods("default").Delete(ctx, "whole-node", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ungated, err := c.Client.CoreV1().Pods("default").Get(ctx, gated.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ungated.Spec.SchedulingGates = nil
	if _, err := c.Client.CoreV1().Pods("default").Update(ctx, ungated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitBoundCount(t, c, "default", "gated", 3)
}

// TestHoldEndWakesTurnedAway: a plain pod turned away by a gang's hold binds
// within seconds of the hold's end, for a plan broken by a lost member and
// for a gang torn down by its PodGroup's deletion (its waiting members are
// released with it).
func TestHoldEndWakesTurnedAway(t *testing.T) {
	c := startCluster(t, nodes("n", 1, testcluster.NodeSpec{CPU: "4", Memory: "16Gi"})...)
	startScheduler(t, c)
	ctx := ctxFor(t)
	for _, end := range []string{"broken", "teardown"} {
		t.Run(end, func(t *testing.T) {
			name, plain := "hold-"+end, "turned-away-"+end
			pg := testcluster.PodGroup("default", name, 3)
			pg.Spec.ScheduleTimeoutSeconds = ptr.To[int32](600)
			if err := c.CreatePodGroup(ctx, pg); err != nil {
				t.Fatal(err)
			}
			pods := gangPods("default", name, 3, testcluster.PodSpec{CPU: "1"})
			blocked := createLastBlocked(t, c, pods)
			waitPlanned(t, c, name)
			// Two members are reserved (2 CPU) and the plan holds the third
			// slot: 3 CPU would fit the node's free room but not the hold.
			if err := c.CreatePods(ctx, testcluster.PodSpec{Name: plain, CPU: "3"}); err != nil {
				t.Fatal(err)
			}
			waitPodMessage(t, c, "default", plain, "held for a planned or reserved gang")
			switch end {
			case "broken":
				// A reserved member deleted: the plan breaks, the other
				// member is released, and two members cannot replan.
				if err := c.Client.CoreV1().Pods("default").Delete(ctx, pods[0].Name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			case "teardown":
				if err := c.PodGroups.SchedulingV1alpha1().PodGroups("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			waitBoundWithin(t, c, "default", plain, holdEndWake)
			assertBound(t, c, "default", name, 0)
			// Clean up for the next case.
			for _, p := range append(pods, testcluster.PodSpec{Name: plain}) {
				_ = c.Client.CoreV1().Pods("default").Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			}
			_ = c.Client.CoreV1().Pods("default").Delete(ctx, blocked.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			_ = c.PodGroups.SchedulingV1alpha1().PodGroups("default").Delete(ctx, name, metav1.DeleteOptions{})
			waitGone(t, c, "default", append(pods, testcluster.PodSpec{Name: plain}))
		})
	}
}

// TestPodGroupStatusFromController: phalanx-controller keeps phase and counts.
func TestPodGroupStatusFromController(t *testing.T) {
	c := startCluster(t, nodes("n", 2, testcluster.NodeSpec{CPU: "4", Memory: "16Gi"})...)
	startScheduler(t, c)
	if err := c.StartController(); err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	createGang(t, c, testcluster.PodGroup("default", "st", 2), gangPods("default", "st", 2, testcluster.PodSpec{CPU: "1"}))
	waitBoundCount(t, c, "default", "st", 2)
	waitPhase := func(phase pgv1alpha1.PodGroupPhase, check func(pgv1alpha1.PodGroupStatus) bool) {
		t.Helper()
		var last pgv1alpha1.PodGroupStatus
		err := testcluster.Eventually(ctx, 60*time.Second, func(ctx context.Context) (bool, error) {
			pg, err := c.PodGroups.SchedulingV1alpha1().PodGroups("default").Get(ctx, "st", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			last = pg.Status
			return pg.Status.Phase == phase && check(pg.Status), nil
		})
		if err != nil {
			t.Fatalf("PodGroup never reached %s: last status %+v: %v", phase, last, err)
		}
	}
	waitPhase(pgv1alpha1.PodGroupScheduling, func(s pgv1alpha1.PodGroupStatus) bool { return !s.ScheduleStartTime.IsZero() })
	setPhase := func(phase v1.PodPhase) {
		for i := 0; i < 2; i++ {
			p, err := c.Client.CoreV1().Pods("default").Get(ctx, fmt.Sprintf("st-%d", i), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			p.Status.Phase = phase
			if _, err := c.Client.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	setPhase(v1.PodRunning)
	waitPhase(pgv1alpha1.PodGroupRunning, func(s pgv1alpha1.PodGroupStatus) bool { return s.Running == 2 })
	setPhase(v1.PodSucceeded)
	waitPhase(pgv1alpha1.PodGroupFinished, func(s pgv1alpha1.PodGroupStatus) bool { return s.Succeeded == 2 && s.Running == 0 })
}

// planOutcomes reads phalanx_gang_plan_outcomes_total{outcome} from the
// in-process scheduler's metrics registry.
func planOutcomes(t *testing.T, outcome string) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "phalanx_gang_plan_outcomes_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// createLastGated creates the pods, the last one with a scheduling gate, so
// the gang's quorum cannot be met until the gate is removed.
func createLastGated(t *testing.T, c *testcluster.Cluster, pods []testcluster.PodSpec) *v1.Pod {
	t.Helper()
	ctx := ctxFor(t)
	gated := pods[len(pods)-1].Pod()
	gated.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "example.com/hold"}}
	if err := c.CreatePods(ctx, pods[:len(pods)-1]...); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().Pods(gated.Namespace).Create(ctx, gated, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return gated
}

// createLastBlocked creates the pods, the last one mounting a volume claim
// that does not exist ("missing-<name>"): the volume filter turns it away
// before any gang plugin sees it, so it counts toward the quorum but never
// reaches Permit, and its siblings wait there for it.
func createLastBlocked(t *testing.T, c *testcluster.Cluster, pods []testcluster.PodSpec) *v1.Pod {
	t.Helper()
	ctx := ctxFor(t)
	blocked := pods[len(pods)-1].Pod()
	blocked.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
		PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "missing-" + blocked.Name},
	}}}
	if err := c.CreatePods(ctx, pods[:len(pods)-1]...); err != nil {
		t.Fatal(err)
	}
	created, err := c.Client.CoreV1().Pods(blocked.Namespace).Create(ctx, blocked, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// replaceMember deletes a member and creates it again from spec.
func replaceMember(t *testing.T, c *testcluster.Cluster, old *v1.Pod, spec testcluster.PodSpec) {
	t.Helper()
	ctx := ctxFor(t)
	if err := c.Client.CoreV1().Pods(old.Namespace).Delete(ctx, old.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, c, old.Namespace, []testcluster.PodSpec{spec})
	if err := c.CreatePods(ctx, spec); err != nil {
		t.Fatal(err)
	}
}

// holdEndWake is how soon a pod turned away by a hold must bind once the
// hold ends: a wake, not the scheduling queue's periodic flush (minutes).
const holdEndWake = 10 * time.Second

// waitBoundWithin waits for a pod to be bound, for at most d.
func waitBoundWithin(t *testing.T, c *testcluster.Cluster, ns, name string, d time.Duration) {
	t.Helper()
	var last *v1.Pod
	err := testcluster.Eventually(ctxFor(t), d, func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		last = p
		return err == nil && p.Spec.NodeName != "", err
	})
	if err != nil {
		t.Fatalf("pod %s/%s not bound within %v (last status %+v): %v", ns, name, d, podScheduledCondition(last), err)
	}
}

// waitPodMessage waits until a pod's PodScheduled condition says part.
func waitPodMessage(t *testing.T, c *testcluster.Cluster, ns, name, part string) {
	t.Helper()
	var last *v1.Pod
	err := testcluster.Eventually(ctxFor(t), 60*time.Second, func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		last = p
		if err != nil {
			return false, err
		}
		cond := podScheduledCondition(p)
		return cond != nil && strings.Contains(cond.Message, part), nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s never said %q (last %+v): %v", ns, name, part, podScheduledCondition(last), err)
	}
}

func podScheduledCondition(p *v1.Pod) *v1.PodCondition {
	if p == nil {
		return nil
	}
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == v1.PodScheduled {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// waitPlanned waits until the gang's plan holds its nodes (the held
// annotation the scheduler publishes on the PodGroup).
func waitPlanned(t *testing.T, c *testcluster.Cluster, name string) {
	t.Helper()
	err := testcluster.Eventually(ctxFor(t), 60*time.Second, func(ctx context.Context) (bool, error) {
		return gangPlanned(t, c, name), nil
	})
	if err != nil {
		t.Fatalf("gang %s never planned: %v", name, err)
	}
}

// gangPlanned reports whether the gang's PodGroup says it holds capacity.
func gangPlanned(t *testing.T, c *testcluster.Cluster, name string) bool {
	t.Helper()
	pg, err := c.PodGroups.SchedulingV1alpha1().PodGroups("default").Get(ctxFor(t), name, metav1.GetOptions{})
	return err == nil && pg.Annotations[phalanxv1alpha1.HeldAnnotation] != ""
}

// waitGone waits until the pods no longer exist.
func waitGone(t *testing.T, c *testcluster.Cluster, ns string, pods []testcluster.PodSpec) {
	t.Helper()
	err := testcluster.Eventually(ctxFor(t), 60*time.Second, func(ctx context.Context) (bool, error) {
		for _, p := range pods {
			if _, err := c.Client.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{}); err == nil {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("pods not gone: %v", err)
	}
}
