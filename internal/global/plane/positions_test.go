package plane

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/global"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

var t0 = time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)

func waitingJob(ns, name, q string, prio int32, created time.Time) *global.Job {
	return &global.Job{Key: ns + "/" + name + "-job", Namespace: ns, Kind: "Job", Name: name, Queue: q, Priority: prio, Created: created}
}

// positionsOf: only waiting jobs, per namespace, in the verdicts' order;
// queue lengths count every namespace; the job ahead is named only in the
// same namespace, with the rule that put it first.
func TestPositionsOf(t *testing.T) {
	a1 := waitingJob("a", "a1", "q", 5, t0)
	a2 := waitingJob("a", "a2", "q", 0, t0.Add(-time.Hour))
	b1 := waitingJob("b", "b1", "q", 0, t0.Add(time.Minute))
	r1 := waitingJob("a", "r1", "r", 0, t0)
	r2 := waitingJob("a", "r2", "r", 0, t0)
	running := waitingJob("a", "running", "q", 0, t0)
	verdicts := []global.Verdict{
		{Job: a1, Reason: global.NoMemberFitsNow, Position: 1, ClusterPosition: 1},
		{Job: running, Member: "m1", Reason: global.Dispatched},
		{Job: r1, Reason: global.QueueAboveShare, Position: 1, ClusterPosition: 2},
		{Job: a2, Reason: global.NoMemberFitsNow, Position: 2, ClusterPosition: 3},
		{Job: b1, Reason: global.DependencyWaiting, Position: 3, ClusterPosition: 4},
		{Job: r2, Reason: global.QueueAboveShare, Position: 2, ClusterPosition: 5},
		{Job: waitingJob("a", "moved", "q", 0, t0), Member: "m2", Reason: global.Dispatched, Move: true},
	}
	got := positionsOf(verdicts)
	if len(got) != 2 || got["a"] == nil || got["b"] == nil {
		t.Fatalf("namespaces %v, want a and b", got)
	}
	type want struct {
		name            string
		queue           string
		inQueue, length int32
		inCluster       int32
		aheadName       string
		aheadReason     string
	}
	for ns, wants := range map[string][]want{
		"a": {
			{"a1-job", "q", 1, 3, 1, "", ""},
			{"r1-job", "r", 1, 2, 2, "", ""},
			{"a2-job", "q", 2, 3, 3, "a1-job", "higher priority (5 > 0)"},
			{"r2-job", "r", 2, 2, 5, "r1-job", "same priority and submission time, so names decide"},
		},
		"b": {{"b1-job", "q", 3, 3, 4, "", "submitted earlier (2026-12-07T11:00:00Z, 1h1m0s before)"}},
	} {
		qp := got[ns]
		if qp.Name != phalanxv1alpha1.QueuePositionsName || qp.Namespace != ns || qp.PendingGangs != int32(len(wants)) || qp.ClusterPendingGangs != 5 {
			t.Errorf("%s: %s/%s pending %d of %d, want phalanx, %d of 5", ns, qp.Namespace, qp.Name, qp.PendingGangs, qp.ClusterPendingGangs, len(wants))
		}
		if len(qp.Gangs) != len(wants) {
			t.Fatalf("%s: %d entries, want %d: %+v", ns, len(qp.Gangs), len(wants), qp.Gangs)
		}
		for i, w := range wants {
			g := qp.Gangs[i]
			if g.Name != w.name || g.Kind != BindingKind || g.Queue != w.queue || g.PositionInQueue != w.inQueue || g.QueueLength != w.length || g.PositionInCluster != w.inCluster {
				t.Errorf("%s[%d] = %+v, want %+v", ns, i, g, w)
			}
			switch {
			case w.aheadReason == "" && g.Ahead != nil:
				t.Errorf("%s: ahead %+v, want none", g.Name, g.Ahead)
			case w.aheadReason != "" && (g.Ahead == nil || g.Ahead.Name != w.aheadName || g.Ahead.Reason != w.aheadReason):
				t.Errorf("%s: ahead %+v, want %q because %q", g.Name, g.Ahead, w.aheadName, w.aheadReason)
			}
		}
	}
	if g := got["a"].Gangs[0]; g.Priority != 5 || !g.Submitted.Time.Equal(t0) {
		t.Errorf("a1: priority %d submitted %v, want 5 at %v", g.Priority, g.Submitted, t0)
	}
}

// One namespace lists at most MaxGangPositions entries and counts all.
func TestPositionsOfBounded(t *testing.T) {
	n := phalanxv1alpha1.MaxGangPositions + 5
	verdicts := make([]global.Verdict, n)
	for i := range verdicts {
		verdicts[i] = global.Verdict{Job: waitingJob("a", fmt.Sprintf("j%05d", i), "q", 0, t0), Reason: global.NoMemberFitsNow, Position: i + 1, ClusterPosition: i + 1}
	}
	qp := positionsOf(verdicts)["a"]
	if len(qp.Gangs) != phalanxv1alpha1.MaxGangPositions || qp.PendingGangs != int32(n) || qp.Gangs[len(qp.Gangs)-1].QueueLength != int32(n) {
		t.Fatalf("%d entries, %d pending, want %d entries and %d pending", len(qp.Gangs), qp.PendingGangs, phalanxv1alpha1.MaxGangPositions, n)
	}
}

// The writer on the API server: an object is created for a namespace with
// waiting jobs, left alone by a pass that changes nothing (same
// resourceVersion, and re-created after the refresh if someone deleted
// it), replaced when a position changes, deleted when none waits. A plane
// that does not serve the resource is skipped without error, and looked
// at again only after positionsRetry.
func testPositionsWriter(t *testing.T, c *testcluster.Cluster) {
	ctx, cancel := testContext(t)
	defer cancel()
	namespace(t, c, "pos", nil)
	clk := clocktesting.NewFakeClock(t0)
	w := &positionsWriter{client: c.Dynamic, resource: QueuePositionsResource, clock: clk}
	first := waitingJob("pos", "first", "q", 0, t0)
	second := waitingJob("pos", "second", "q", 0, t0.Add(time.Second))
	pass := func(jobs ...*global.Job) {
		vs := make([]global.Verdict, len(jobs))
		for i, j := range jobs {
			vs[i] = global.Verdict{Job: j, Reason: global.NoMemberFitsNow, Position: i + 1, ClusterPosition: i + 1}
		}
		w.write(ctx, positionsOf(vs))
	}
	get := func() (*phalanxv1alpha1.QueuePositions, error) {
		return c.Phalanx.SchedulingV1alpha1().QueuePositionses("pos").Get(ctx, phalanxv1alpha1.QueuePositionsName, metav1.GetOptions{})
	}
	pass(first, second)
	qp, err := get()
	if err != nil || len(qp.Gangs) != 2 || qp.Gangs[1].Name != "second-job" || qp.Gangs[1].Ahead == nil || qp.Gangs[1].Ahead.Name != "first-job" {
		t.Fatalf("after the first pass: %+v, %v; want first-job then second-job behind it", qp, err)
	}
	rv := qp.ResourceVersion
	pass(first, second)
	if qp, err = get(); err != nil || qp.ResourceVersion != rv {
		t.Fatalf("an unchanged pass wrote: resourceVersion %s → %s (%v)", rv, qp.ResourceVersion, err)
	}
	pass(second, first)
	if qp, err = get(); err != nil || qp.ResourceVersion == rv || qp.Gangs[0].Name != "second-job" {
		t.Fatalf("a changed order was not written: %+v (%v)", qp, err)
	}
	if err := c.Phalanx.SchedulingV1alpha1().QueuePositionses("pos").Delete(ctx, phalanxv1alpha1.QueuePositionsName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	clk.Step(positionsRefresh)
	pass(second, first)
	if _, err := get(); err != nil {
		t.Fatalf("deleted by someone else, the object was not written again after the refresh: %v", err)
	}
	pass()
	if _, err := get(); !apierrors.IsNotFound(err) {
		t.Fatalf("with no job waiting the object should be deleted: %v", err)
	}

	unserved := &positionsWriter{client: c.Dynamic, resource: phalanxv1alpha1.SchemeGroupVersion.WithResource("nosuchpositions"), clock: clk}
	unserved.write(ctx, positionsOf([]global.Verdict{{Job: first, Reason: global.NoMemberFitsNow, Position: 1, ClusterPosition: 1}}))
	if !unserved.unserved || !unserved.retryAt.Equal(clk.Now().Add(positionsRetry)) || unserved.have != nil {
		t.Fatalf("an unserved resource: unserved %v retry at %v, want true at %v", unserved.unserved, unserved.retryAt, clk.Now().Add(positionsRetry))
	}
	unserved.resource = QueuePositionsResource
	again := func() {
		unserved.write(ctx, positionsOf([]global.Verdict{{Job: first, Reason: global.NoMemberFitsNow, Position: 1, ClusterPosition: 1}}))
	}
	clk.Step(positionsRetry - time.Second)
	again()
	if _, err := get(); !apierrors.IsNotFound(err) {
		t.Fatalf("looked again before positionsRetry: %v", err)
	}
	clk.Step(time.Second)
	again()
	if _, err := get(); err != nil || unserved.unserved {
		t.Fatalf("once served, positions should be written: %v (unserved %v)", err, unserved.unserved)
	}
}

// A plane that serves no Queues starts and decides: each binding waits as
// QueueRefused, and positions are written.
func testPlaneWithoutQueues(t *testing.T, c *testcluster.Cluster) {
	ctx, cancel := testContext(t)
	defer cancel()
	namespace(t, c, "noqueues", nil)
	const sched = "phalanx-noqueues"
	create(t, c.Dynamic, Clusters, clusterObj("noqueues-m", 8))
	create(t, c.Dynamic, ResourceBindings, bindingIn("noqueues", "lone", sched, 1, nil))
	p := New(Options{SchedulerName: sched, DefaultQueue: "default", Interval: time.Second}, c.Dynamic, c.Client,
		staticTemplates{"noqueues/lone": {}}, nil, clocktesting.NewFakeClock(t0))
	p.queueResource = phalanxv1alpha1.SchemeGroupVersion.WithResource("nosuchqueues")
	started := make(chan error, 1)
	go func() { started <- p.start(ctx) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the plane never started without Queues")
	}
	if err := testcluster.Eventually(ctx, 10*time.Second, func(context.Context) (bool, error) {
		w, _ := p.world(ctx)
		found := false
		for _, j := range w.Jobs {
			found = found || j.Key == "noqueues/lone-job"
		}
		return found && len(w.Members) > 0, nil
	}); err != nil {
		t.Fatalf("the binding was never read: %v", err)
	}
	p.Pass(ctx)
	b := getBinding(t, c, "noqueues", "lone-job")
	if len(b.Status.Conditions) != 1 || b.Status.Conditions[0].Reason != string(global.QueueRefused) {
		t.Fatalf("conditions %+v, want Scheduled=False QueueRefused", b.Status.Conditions)
	}
	qp, err := c.Phalanx.SchedulingV1alpha1().QueuePositionses("noqueues").Get(ctx, phalanxv1alpha1.QueuePositionsName, metav1.GetOptions{})
	if err != nil || len(qp.Gangs) != 1 || qp.Gangs[0].Name != "lone-job" || qp.Gangs[0].Queue != "default" {
		t.Fatalf("positions %+v (%v), want lone-job in queue default", qp, err)
	}
}
