package readiness

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/internal/gang"
	"github.com/phalanx-sched/phalanx/internal/status"
	"github.com/phalanx-sched/phalanx/internal/workload"
)

// ownedBy makes the pods members of StatefulSet name.
func ownedBy(pods []*v1.Pod, name string) {
	for _, p := range pods {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: name, Controller: ptr.To(true)}}
	}
}

// waitFor polls cond until the deadline (the checks run on their own goroutines).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 5*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func TestShortGangOfAnOrderedWorkloadSaysOrderedStartup(t *testing.T) {
	f := newFixture(t)
	f.blocker = &workload.OrderedStartup{Policy: "spec.podManagementPolicy: OrderedReady", Fix: "set Parallel"}
	pods := f.addGang(ref, 3, 1, nil)
	ownedBy(pods, "sts")
	spec := f.dir.specs[ref]

	// The first look only schedules a check, after StartupCheckDelay.
	cond := f.gate.MembersShort(spec, f.gate.CountMembers(spec), 3)
	if cond.Reason != gang.ReasonMembersPending {
		t.Fatalf("before the check: %+v, want MembersPending", cond)
	}
	waitFor(t, "the check's timer", f.clock.HasWaiters)
	f.clock.Step(StartupCheckDelay - time.Millisecond)
	f.mu.Lock()
	early := f.reads
	f.mu.Unlock()
	if early != 0 {
		t.Fatal("the workload was read before StartupCheckDelay")
	}
	f.clock.Step(time.Millisecond)
	waitFor(t, "the OrderedStartup condition", func() bool {
		c, ok := f.conds.get(ref)
		return ok && c.Reason == status.ReasonOrderedStartup
	})
	c, _ := f.conds.get(ref)
	if !strings.Contains(c.Message, "1 of 3 members exist and no more will: StatefulSet ns/sts") || !strings.Contains(c.Message, "set Parallel") {
		t.Fatalf("condition message %q does not name the workload and the fix", c.Message)
	}
	if got := f.gate.MembersShort(spec, f.gate.CountMembers(spec), 3); got.Reason != status.ReasonOrderedStartup {
		t.Fatalf("after the check MembersShort = %+v, want OrderedStartup", got)
	}
	if f.gate.StartupsTracked() != 1 {
		t.Fatalf("tracked %d verdicts, want 1", f.gate.StartupsTracked())
	}
	f.gate.ForgetStartup(ref)
	if f.gate.StartupsTracked() != 0 {
		t.Fatal("ForgetStartup kept the verdict")
	}
}

func TestStartupCheckOfAGangThatFilledUpForgetsIt(t *testing.T) {
	f := newFixture(t)
	f.blocker = &workload.OrderedStartup{Policy: "p"}
	pods := f.addGang(ref, 2, 2, nil)
	ownedBy(pods, "sts")
	f.gate.checkStartup(context.Background(), ref)
	if f.reads != 0 || f.gate.StartupsTracked() != 0 {
		t.Fatalf("a gang with its quorum: %d reads, %d verdicts; want none", f.reads, f.gate.StartupsTracked())
	}
	if _, set := f.conds.get(ref); set {
		t.Fatal("a gang with its quorum got a startup condition")
	}
}

func TestStartupCheckWithoutABlockerSetsNothing(t *testing.T) {
	f := newFixture(t)
	pods := f.addGang(ref, 3, 1, nil)
	ownedBy(pods, "sts")
	f.gate.checkStartup(context.Background(), ref)
	if f.reads != 1 || f.gate.StartupsTracked() != 1 {
		t.Fatalf("%d reads, %d verdicts; want the workload read once and its verdict kept", f.reads, f.gate.StartupsTracked())
	}
	if _, set := f.conds.get(ref); set {
		t.Fatal("a gang no policy blocks got a condition from the check")
	}
}

func TestAPIWorkloadsReadsStatefulSets(t *testing.T) {
	ordered := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ordered"}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3)}}
	parallel := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "parallel"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3), PodManagementPolicy: appsv1.ParallelPodManagement}}
	a := APIWorkloads{Kube: fake.NewClientset(ordered, parallel)}
	for _, tc := range []struct {
		owner   workload.Owner
		blocked bool
	}{
		{owner: workload.Owner{Kind: "StatefulSet", Namespace: "ns", Name: "ordered"}, blocked: true},
		{owner: workload.Owner{Kind: "StatefulSet", Namespace: "ns", Name: "parallel"}},
		{owner: workload.Owner{Kind: "StatefulSet", Namespace: "ns", Name: "gone"}},
		// No dynamic client: JobSets and LeaderWorkerSets are not read.
		{owner: workload.Owner{Kind: "JobSet", Namespace: "ns", Name: "js"}},
		{owner: workload.Owner{Kind: "Deployment", Namespace: "ns", Name: "d"}},
	} {
		b, ok, err := a.OrderedStartup(context.Background(), tc.owner)
		if err != nil || ok != tc.blocked {
			t.Fatalf("%v: OrderedStartup = %v, %v; want blocked %v and no error", tc.owner, ok, err, tc.blocked)
		}
		if ok && (b.Owner != tc.owner || !strings.Contains(b.Policy, "OrderedReady")) {
			t.Fatalf("%v: blocker %+v does not name the workload and its policy", tc.owner, b)
		}
	}
}
