package requeue

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/lifecycle"
	"github.com/phalanx-sched/phalanx/internal/metrics"
)

// directory is a fake of the gang directory: members by gang, in order.
type directory struct {
	mu      sync.Mutex
	members map[ident.Ref][]*v1.Pod
}

func (d *directory) Members(ref ident.Ref) []*v1.Pod {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.members[ref])
}

func (d *directory) Pending(ref ident.Ref) []*v1.Pod {
	var out []*v1.Pod
	for _, p := range d.Members(ref) {
		if p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func (d *directory) RefOf(pod *v1.Pod) (ident.Ref, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for ref, ms := range d.members {
		for _, m := range ms {
			if m.UID == pod.UID {
				return ref, true
			}
		}
	}
	return ident.Ref{}, false
}

func (d *directory) Exists(ref ident.Ref) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.members[ref]
	return ok
}

type noListener struct{}

func (noListener) Released(ident.Ref, []types.UID, string, string) {}

// activations records what the waker moved to the active queue.
type activations struct {
	mu    sync.Mutex
	woken []string // "reason pod"
}

func (a *activations) activate(reason string, pods map[string]*v1.Pod) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, k := range slices.Sorted(maps.Keys(pods)) {
		a.woken = append(a.woken, reason+" "+k)
	}
}

// take returns what was woken since the last take.
func (a *activations) take() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.woken
	a.woken = nil
	return out
}

type fixture struct {
	clock   *clocktesting.FakeClock
	dir     *directory
	lc      *lifecycle.Lifecycle
	act     *activations
	w       *Waker
	started bool
	refused map[ident.Ref]bool
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newFixture() *fixture {
	f := &fixture{clock: clocktesting.NewFakeClock(t0), dir: &directory{members: map[ident.Ref][]*v1.Pod{}},
		act: &activations{}, started: true, refused: map[ident.Ref]bool{}}
	f.lc = lifecycle.NewLifecycle(f.clock, noListener{})
	f.w = New(Ports{
		Directory: f.dir, Lifecycle: f.lc, Clock: f.clock, Activate: f.act.activate,
		AwaitQueue:   func() {},
		LoopStarted:  func() bool { return f.started },
		QueueRefused: func(ref ident.Ref) bool { return f.refused[ref] },
	})
	return f
}

// addGang adds n pending members, created a second apart (m0 oldest).
func (f *fixture) addGang(name string, n int) (ident.Ref, []*v1.Pod) {
	ref := ident.Ref{Namespace: "ns", Name: name}
	var pods []*v1.Pod
	for i := range n {
		pods = append(pods, &v1.Pod{ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: fmt.Sprintf("%s-m%d", name, i), UID: types.UID(fmt.Sprintf("%s-%d", name, i)),
			CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(i) * time.Second)),
		}})
	}
	for _, p := range pods {
		f.lc.ObserveMember(ref, p.UID, "")
	}
	f.dir.mu.Lock()
	f.dir.members[ref] = pods
	f.dir.mu.Unlock()
	return ref, pods
}

func woken(reason string, pods ...*v1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, reason+" "+p.Namespace+"/"+p.Name)
	}
	slices.Sort(out)
	return out
}

func sameWakes(t *testing.T, what string, got, want []string) {
	t.Helper()
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("%s: woken %v, want %v", what, got, want)
	}
}

func TestQuorumWakesOneLeadAndOthersSleepBehindIt(t *testing.T) {
	f := newFixture()
	ref, m := f.addGang("g", 3)
	// m1 and m2 were offered and turned away before the quorum; m0 completes it.
	f.w.Offered(ref, m[1])
	f.w.Offered(ref, m[2])
	if !f.w.TurnedAwayForQuorum(ref) {
		t.Fatal("members offered before the quorum do not count as turned away for it")
	}
	f.w.WakeAtQuorum(ref)
	sameWakes(t, "the quorum", f.act.take(), woken(metrics.WokenQuorum, m[1]))
	if l, ok := f.w.LeadOf(ref); !ok || l.UID != m[1].UID || !l.Since.Equal(t0) {
		t.Fatalf("lead = %+v, %v; want the oldest sleeper %s since the wake", l, ok, m[1].UID)
	}
	if !f.w.Asleep(ref, m[2].UID) || f.w.Asleep(ref, m[1].UID) {
		t.Fatal("the lead must be awake and the other member asleep behind it")
	}
	// While the gang is unplanned, another member is kept back; the lead passes.
	if f.w.QuorumMet(ref, m[2].UID) {
		t.Fatal("a sleeper passed PreEnqueue before the lead's plan")
	}
	if !f.w.QuorumMet(ref, m[1].UID) {
		t.Fatal("the lead was kept back")
	}
	// Placed members end the sleep: the gang is no longer untouched.
	f.lc.MemberReserved(ref, m[1].UID, "node-a", "shape")
	if !f.w.QuorumMet(ref, m[2].UID) {
		t.Fatal("a member of a gang with a placed member was kept back")
	}
}

func TestQuorumBeforeLoopStartsWakesWholeGang(t *testing.T) {
	f := newFixture()
	f.started = false
	ref, m := f.addGang("g", 3)
	f.w.Offered(ref, m[1])
	f.w.WakeAtQuorum(ref)
	sameWakes(t, "before the loop", f.act.take(), woken(metrics.WokenQuorum, m...))
	if _, ok := f.w.LeadOf(ref); ok {
		t.Fatal("a lead was made before the scheduling loop ran")
	}
	// The first member to pass after that leads nothing either.
	if !f.w.QuorumMet(ref, m[0].UID) || !f.w.QuorumMet(ref, m[2].UID) {
		t.Fatal("members were kept back before the loop ran")
	}
}

func TestQuorumWithoutSleepersWakesWholeGang(t *testing.T) {
	f := newFixture()
	ref, m := f.addGang("g", 2)
	f.w.WakeAtQuorum(ref)
	sameWakes(t, "no sleepers", f.act.take(), woken(metrics.WokenQuorum, m...))
}

func TestLaterQuorumWakesOnlyNewlyTurnedAway(t *testing.T) {
	f := newFixture()
	ref, m := f.addGang("g", 3)
	f.w.WakeAtQuorum(ref) // whole: none offered
	f.act.take()
	f.w.Offered(ref, m[2])
	f.w.WakeAtQuorum(ref)
	sameWakes(t, "a later quorum", f.act.take(), woken(metrics.WokenQuorum, m[2]))
	f.w.WakeAtQuorum(ref)
	sameWakes(t, "a quorum with nothing turned away", f.act.take(), nil)
	// Short again: the next quorum wakes a lead anew.
	f.w.QuorumShort(ref)
	f.w.Offered(ref, m[0])
	f.w.Offered(ref, m[1])
	f.w.WakeAtQuorum(ref)
	sameWakes(t, "the quorum after a shortage", f.act.take(), woken(metrics.WokenQuorum, m[0]))
}

func TestWakeAtQuorumForgetsAGoneGroup(t *testing.T) {
	f := newFixture()
	ref := ident.Ref{Namespace: "ns", Name: "gone"}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "p"}}
	f.w.Offered(ref, pod)
	f.w.Offered(ref, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "q", UID: "q"}})
	f.w.WakeAtQuorum(ref)
	for k, n := range f.w.Sizes() {
		if n != 0 {
			t.Errorf("after the quorum of a gang whose group is gone, %s holds %d", k, n)
		}
	}
}

func TestRefusedLeadWakesSleepersUnlessQueueRefused(t *testing.T) {
	for _, queueRefused := range []bool{false, true} {
		t.Run(fmt.Sprintf("queueRefused=%v", queueRefused), func(t *testing.T) {
			f := newFixture()
			ref, m := f.addGang("g", 3)
			f.w.WakeLead(metrics.WokenFailedRetry, ref)
			sameWakes(t, "the lead", f.act.take(), woken(metrics.WokenFailedRetry, m[0]))
			f.refused[ref] = queueRefused
			f.w.Refused(m[0])
			got := f.act.take()
			if queueRefused {
				sameWakes(t, "a lead its queue refused", got, nil)
				if !f.w.Asleep(ref, m[1].UID) {
					t.Fatal("sleepers were dropped when the queue refused the lead")
				}
				return
			}
			sameWakes(t, "a refused lead", got, woken(metrics.WokenLeadRefused, m...))
			if _, ok := f.w.LeadOf(ref); ok || f.w.Asleep(ref, m[1].UID) {
				t.Fatal("the gang still sleeps after it was woken whole")
			}
		})
	}
}

func TestRefusedPlainPodOrUnledGangWakesNothing(t *testing.T) {
	f := newFixture()
	_, m := f.addGang("g", 2)
	f.w.Refused(m[0]) // no lead
	f.w.Refused(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "plain", UID: "plain"}})
	sameWakes(t, "refusals without a lead", f.act.take(), nil)
}

func TestWakeLeadWakesSmallGangOrBeforeLoopWhole(t *testing.T) {
	f := newFixture()
	ref, m := f.addGang("one", 1)
	f.w.WakeLead(metrics.WokenResumed, ref)
	sameWakes(t, "a gang of one pending member", f.act.take(), woken(metrics.WokenResumed, m...))
	f.started = false
	ref2, m2 := f.addGang("two", 2)
	f.w.WakeLead(metrics.WokenResumed, ref2)
	sameWakes(t, "before the loop", f.act.take(), woken(metrics.WokenResumed, m2...))
}

func TestWakeSkipsBoundAndDeletingMembers(t *testing.T) {
	f := newFixture()
	ref, m := f.addGang("g", 3)
	m[0].Spec.NodeName = "node-a"
	now := metav1.NewTime(t0)
	m[1].DeletionTimestamp = &now
	f.w.Wake(metrics.WokenPlanned, ref)
	sameWakes(t, "a wake", f.act.take(), woken(metrics.WokenPlanned, m[2]))
}

func TestOverdueLeadPassesToNextSleeperThenWakesWhole(t *testing.T) {
	f := newFixture()
	ref, m := f.addGang("g", 3)
	f.w.WakeLead(metrics.WokenFailedRetry, ref)
	f.act.take()
	f.clock.Step(LeadWait - time.Second)
	f.w.WakeOverdueLeads()
	sameWakes(t, "before LeadWait", f.act.take(), nil)
	f.clock.Step(time.Second)
	f.w.WakeOverdueLeads()
	sameWakes(t, "the first overdue lead", f.act.take(), woken(metrics.WokenLeadOverdue, m[1]))
	if l, _ := f.w.LeadOf(ref); l.UID != m[1].UID || !l.Since.Equal(t0.Add(LeadWait)) {
		t.Fatalf("lead after passing = %+v, want %s since now", l, m[1].UID)
	}
	f.clock.Step(LeadWait)
	f.w.WakeOverdueLeads()
	sameWakes(t, "the second overdue lead", f.act.take(), woken(metrics.WokenLeadOverdue, m[2]))
	f.clock.Step(LeadWait)
	f.w.WakeOverdueLeads()
	sameWakes(t, "no sleeper left", f.act.take(), woken(metrics.WokenLeadOverdue, m...))
}

func TestOverdueLeadOfQueueRefusedGangStays(t *testing.T) {
	f := newFixture()
	ref, _ := f.addGang("g", 3)
	f.w.WakeLead(metrics.WokenFailedRetry, ref)
	f.act.take()
	f.refused[ref] = true
	f.clock.Step(2 * LeadWait)
	f.w.WakeOverdueLeads()
	sameWakes(t, "an overdue lead its queue refused", f.act.take(), nil)
}

func TestTurnedAwayPodsWokenOnceOnChange(t *testing.T) {
	f := newFixture()
	a := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "a"}}
	b := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b", UID: "b"}}
	f.w.TurnedAway(a)
	f.w.TurnedAway(b)
	f.w.ForgetPod(ident.Ref{}, false, "b")
	f.w.CapacityChanged()
	sameWakes(t, "the first change", f.act.take(), woken(metrics.WokenTurnedAway, a))
	f.w.Changed()
	sameWakes(t, "the second change", f.act.take(), nil)
}

func TestTurnedAwayIsBounded(t *testing.T) {
	f := newFixture()
	for i := range MaxTurnedAway + 10 {
		f.w.TurnedAway(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint(i), UID: types.UID(fmt.Sprint(i))}})
	}
	if n := f.w.Sizes()["turnedAway"]; n != MaxTurnedAway {
		t.Fatalf("turnedAway holds %d, want the bound %d", n, MaxTurnedAway)
	}
}

func TestForgetPodAndGangDropRecords(t *testing.T) {
	f := newFixture()
	ref, m := f.addGang("g", 3)
	f.w.WakeLead(metrics.WokenFailedRetry, ref)
	f.w.ForgetPod(ref, true, m[1].UID)
	if f.w.Asleep(ref, m[1].UID) {
		t.Fatal("a deleted member still sleeps")
	}
	f.w.ForgetGang(ref)
	for k, n := range f.w.Sizes() {
		if n != 0 {
			t.Errorf("after ForgetGang, %s holds %d", k, n)
		}
	}
}

func TestQuorumWhileLeadStandsWakesNoSleeper(t *testing.T) {
	f := newFixture()
	ref, m := f.addGang("g", 3)
	f.w.Offered(ref, m[1])
	f.w.Offered(ref, m[2])
	f.w.WakeAtQuorum(ref)
	f.act.take()
	if f.w.TurnedAwayForQuorum(ref) {
		t.Fatal("a gang its quorum woke still counts as turned away for it")
	}
	// Another member completing the quorum again leaves the sleepers asleep
	// behind the lead.
	f.w.WakeAtQuorum(ref)
	sameWakes(t, "a quorum while the lead stands", f.act.take(), nil)
	if !f.w.Asleep(ref, m[2].UID) {
		t.Fatal("a sleeper was woken while its lead stands")
	}
	// The plan wakes the gang whole and ends the lead.
	f.w.Wake(metrics.WokenPlanned, ref)
	sameWakes(t, "the plan", f.act.take(), woken(metrics.WokenPlanned, m...))
	if _, ok := f.w.LeadOf(ref); ok {
		t.Fatal("the lead stands after the gang was woken whole")
	}
}

func TestWakePodsOfNoneActivatesNothing(t *testing.T) {
	f := newFixture()
	calls := 0
	f.w.Activate = func(string, map[string]*v1.Pod) { calls++ }
	f.w.WakePods(metrics.WokenTurnedAway, nil)
	f.w.Changed()
	if calls != 0 {
		t.Fatalf("Activate called %d times with nothing to wake", calls)
	}
}
