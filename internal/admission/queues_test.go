package admission

import (
	"context"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/metrics"
)

// TestQueueOf: a pod's own label wins, then its gang's group object's, then
// its namespace's, else the default queue.
func TestQueueOf(t *testing.T) {
	for _, tc := range []struct {
		name                string
		pod, group, ns      string // queue labels ("" none)
		inGang, specMissing bool
		nsMissing           bool
		want                string
	}{
		{name: "pod label first", pod: "p", group: "g", ns: "n", inGang: true, want: "p"},
		{name: "group label next", group: "g", ns: "n", inGang: true, want: "g"},
		{name: "namespace label next", ns: "n", inGang: true, want: "n"},
		{name: "plain pod takes its namespace's", ns: "n", want: "n"},
		{name: "default last", inGang: true, want: "default"},
		{name: "gang whose group cannot be read", group: "g", ns: "n", inGang: true, specMissing: true, want: "n"},
		{name: "namespace not in the lister", nsMissing: true, want: "default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{})
			label := func(q string) map[string]string {
				if q == "" {
					return nil
				}
				return inQueue(q)
			}
			if !tc.nsMissing {
				f.addNamespace("ns", label(tc.ns))
			}
			p := pod("ns", "p", 1000, 0, label(tc.pod))
			if tc.inGang {
				ref := f.addGang("ns", "g", label(tc.group), p)
				if tc.specMissing {
					delete(f.gangs.specs, ref)
				}
			}
			if got := f.q.QueueOf(p); got != tc.want {
				t.Fatalf("QueueOf = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestQueueOfGang: a gang's queue is its member's label, else its group's,
// else its namespace's, else the default; with no member at hand the group
// decides.
func TestQueueOfGang(t *testing.T) {
	f := newFixture(t, Options{DefaultQueue: "fallback"})
	f.addNamespace("labelled", inQueue("n"))
	f.addNamespace("plain", nil)
	spec := func(ns string, group map[string]string) *gangspec.Spec {
		return &gangspec.Spec{Ref: ident.Ref{Namespace: ns, Name: "g"}, Labels: group}
	}
	for _, tc := range []struct {
		name   string
		spec   *gangspec.Spec
		member *v1.Pod
		want   string
	}{
		{"member label", spec("labelled", inQueue("g")), pod("labelled", "m", 1, 0, inQueue("m")), "m"},
		{"group label without a member", spec("labelled", inQueue("g")), nil, "g"},
		{"group label over a member without one", spec("labelled", inQueue("g")), pod("labelled", "m", 1, 0, nil), "g"},
		{"namespace label", spec("labelled", nil), nil, "n"},
		{"default", spec("plain", nil), nil, "fallback"},
		{"unknown namespace", spec("missing", nil), nil, "fallback"},
	} {
		if got := f.q.QueueOfGang(tc.spec, tc.member); got != tc.want {
			t.Errorf("%s: QueueOfGang = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestPodHandlerCharges: a pod's demand is pending in its queue until it is
// bound or reserved, allocated while it runs, and gone once it finished or
// was deleted; a placed pod that finishes schedules a wake of the refused.
func TestPodHandlerCharges(t *testing.T) {
	f := newFixture(t, Options{})
	charged := func(what string, pending, allocated int64) {
		t.Helper()
		s := f.q.Snapshot()
		if cpu(s.Pending, "a") != pending || cpu(s.Allocated, "a") != allocated {
			t.Fatalf("%s: queue a pending %dm allocated %dm, want %dm and %dm", what, cpu(s.Pending, "a"), cpu(s.Allocated, "a"), pending, allocated)
		}
	}
	p := pod("ns", "p", 1000, 0, inQueue("a"))
	f.addPod(p)
	charged("added", 1000, 0)
	f.updatePod(bound(p, "n1"))
	charged("bound", 0, 1000)
	if f.clock.Waiters() != 0 {
		t.Fatal("a bound pod scheduled a wake")
	}
	done := bound(p, "n1")
	done.Status.Phase = v1.PodSucceeded
	f.updatePod(done)
	charged("finished", 0, 0)
	if f.clock.Waiters() != 1 {
		t.Fatalf("a finished pod's give-back scheduled %d wakes, want 1", f.clock.Waiters())
	}

	// A gang member the lifecycle placed counts as allocated before it binds.
	m := pod("ns", "m", 2000, 0, inQueue("a"))
	f.holds.placed[m.UID] = true
	f.addGang("ns", "g", nil, m)
	charged("placed member", 0, 2000)

	// The informer may hand the deleted pod as a tombstone.
	if err := f.pods.Delete(m); err != nil {
		t.Fatal(err)
	}
	f.q.PodHandler().DeleteFunc(cache.DeletedFinalStateUnknown{Key: "ns/m", Obj: m})
	charged("deleted", 0, 0)
}

// TestDeletedPodsLeaveBlocked: a gang stays blocked while a member is left,
// not after its last one goes; a deleted plain pod is forgotten at once.
func TestDeletedPodsLeaveBlocked(t *testing.T) {
	f := newFixture(t, Options{})
	m0, m1 := pod("ns", "m0", 1000, 0, nil), pod("ns", "m1", 1000, 1, nil)
	ref := f.addGang("ns", "g", nil, m0, m1)
	plain := pod("ns", "plain", 1000, 0, nil)
	f.addPod(plain)
	f.q.Block(ref, m0)
	f.q.Block(ident.Ref{}, plain)

	f.deletePod(m0)
	if !f.q.Blocked(ref) {
		t.Fatal("a gang with a member left was unblocked")
	}
	f.deletePod(m1)
	if f.q.Blocked(ref) {
		t.Fatal("a gang whose last member was deleted is still blocked")
	}
	f.deletePod(plain)
	if got := f.q.Sizes(); got["blocked"] != 0 || got["blockedPod"] != 0 {
		t.Fatalf("sizes after every pod went: %v", got)
	}
}

// TestReserved: a reserved pod counts as allocated, even before the
// informer's add, and a lagging pending update keeps it so; unreserved, it
// is pending again.
func TestReserved(t *testing.T) {
	f := newFixture(t, Options{})
	p := pod("ns", "p", 1500, 0, inQueue("a"))
	f.q.Reserved(p)
	if s := f.q.Snapshot(); cpu(s.Allocated, "a") != 1500 || cpu(s.Pending, "a") != 0 {
		t.Fatalf("reserved before the informer saw it: allocated %v pending %v", s.Allocated, s.Pending)
	}
	f.addPod(p) // the add event, still unbound
	if s := f.q.Snapshot(); cpu(s.Allocated, "a") != 1500 {
		t.Fatalf("a lagging add event undid the reservation: allocated %v", s.Allocated)
	}
	f.q.Unreserved(p)
	if s := f.q.Snapshot(); cpu(s.Allocated, "a") != 0 || cpu(s.Pending, "a") != 1500 {
		t.Fatalf("unreserved: allocated %v pending %v, want pending again", s.Allocated, s.Pending)
	}
}

// TestRecharge: a namespace's label change moves its pods to the new
// queue (and drops the sort's keys); a gang's label change moves its
// members only.
func TestRecharge(t *testing.T) {
	f := newFixture(t, Options{})
	old := f.addNamespace("team", inQueue("q1"))
	f.addPod(pod("team", "p", 1000, 0, nil))
	f.addPod(pod("team", "own", 500, 0, inQueue("own")))
	m := pod("team", "m", 2000, 0, nil)
	ref := f.addGang("team", "g", inQueue("g1"), m)
	other := f.addGang("team", "h", inQueue("g1"), pod("team", "h0", 300, 0, nil))
	pending := func(q string) int64 { return cpu(f.q.Snapshot().Pending, q) }
	if pending("q1") != 1000 || pending("g1") != 2300 || pending("own") != 500 {
		t.Fatalf("before: %v", f.q.Snapshot().Pending)
	}

	f.q.NamespaceHandler().UpdateFunc(old, old.DeepCopy())
	if f.wakes.orderChanged != 0 {
		t.Fatal("an update that kept the queue label recharged")
	}
	moved := old.DeepCopy()
	moved.Labels = inQueue("q2")
	if err := f.namespaces.Update(moved); err != nil {
		t.Fatal(err)
	}
	f.q.NamespaceHandler().UpdateFunc(old, moved)
	if pending("q1") != 0 || pending("q2") != 1000 || pending("own") != 500 || pending("g1") != 2300 {
		t.Fatalf("after the namespace's label changed: %v", f.q.Snapshot().Pending)
	}
	if f.wakes.orderChanged != 1 {
		t.Fatalf("OrderChanged called %d times, want 1", f.wakes.orderChanged)
	}

	f.gangs.specs[ref].Labels = inQueue("g2")
	f.q.Recharge("team", &ref)
	if pending("g1") != 300 || pending("g2") != 2000 {
		t.Fatalf("after gang %s's label changed (not %s's): %v", ref, other, f.q.Snapshot().Pending)
	}
}

// TestQueueHandlerWakes: a Queue added, changed or deleted wakes every
// refused gang through its lead and the refused plain pods.
func TestQueueHandlerWakes(t *testing.T) {
	f := newFixture(t, Options{})
	ref := f.addGang("ns", "g", nil, pod("ns", "m", 1000, 0, nil))
	plain := pod("ns", "plain", 1000, 0, nil)
	f.q.Block(ref, nil)
	f.q.Block(ident.Ref{}, plain)
	want := []string{metrics.WokenQueueAdmission + " lead ns/g", metrics.WokenQueueAdmission + " pods [ns/plain]"}

	o := f.addQueue("a")
	if got := f.wakes.take(); !slices.Equal(got, want) {
		t.Fatalf("queue added: woke %v, want %v", got, want)
	}
	if _, ok := f.q.Snapshot().Tree.Get("a"); !ok {
		t.Fatal("the added queue is not in the tree")
	}
	f.q.QueueHandler().UpdateFunc(o, o)
	if got := f.wakes.take(); !slices.Equal(got, want) {
		t.Fatalf("queue changed: woke %v, want %v", got, want)
	}
	f.q.QueueHandler().DeleteFunc(cache.DeletedFinalStateUnknown{Key: "a", Obj: o})
	if got := f.wakes.take(); !slices.Equal(got, want) {
		t.Fatalf("queue deleted: woke %v, want %v", got, want)
	}
	if _, ok := f.q.Snapshot().Tree.Get("a"); ok {
		t.Fatal("the deleted queue is still in the tree")
	}
}

// TestEnsureDefaultQueue: the default queue is created when the lister
// does not have it, and left alone when it does.
func TestEnsureDefaultQueue(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, Options{DefaultQueue: "everyone"})
	f.q.EnsureDefaultQueue(ctx)
	if _, err := f.client.SchedulingV1alpha1().Queues().Get(ctx, "everyone", metav1.GetOptions{}); err != nil {
		t.Fatalf("default queue not created: %v", err)
	}
	// Created already (the lister lags): the conflict is not an error.
	f.q.EnsureDefaultQueue(ctx)

	f = newFixture(t, Options{DefaultQueue: "everyone"})
	f.addQueue("everyone")
	f.q.EnsureDefaultQueue(ctx)
	if got := f.client.Actions(); len(got) != 0 {
		t.Fatalf("an existing default queue made calls %v", got)
	}
}

// TestNodeHandler: nodes count in the total until deleted.
func TestNodeHandler(t *testing.T) {
	f := newFixture(t, Options{})
	f.addNode("n1", 8000)
	f.addNode("n2", 4000)
	cordoned := f.nodes["n2"].DeepCopy()
	cordoned.Spec.Unschedulable = true
	f.q.NodeHandler().UpdateFunc(f.nodes["n2"], cordoned)
	if got := f.q.Snapshot().Total[v1.ResourceCPU]; got != 8000 {
		t.Fatalf("total %dm with n2 cordoned, want 8000m", got)
	}
	f.q.NodeHandler().DeleteFunc(cache.DeletedFinalStateUnknown{Key: "n1", Obj: f.nodes["n1"]})
	if got := f.q.Snapshot().Total[v1.ResourceCPU]; got != 0 {
		t.Fatalf("total %dm after n1 went, want 0", got)
	}
}
