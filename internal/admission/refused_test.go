package admission

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/metrics"
	"github.com/phalanx-sched/phalanx/internal/requeue"
)

// TestBlockWakesOnceForABurst: the first refusals of a burst schedule one
// wake, blockedWakeDelay later; it wakes each refused gang through its lead
// in SortRefs order, then the plain pods. A refusal already known schedules
// nothing; after the wake a new one schedules the next.
func TestBlockWakesOnceForABurst(t *testing.T) {
	f := newFixture(t, Options{})
	refs := []ident.Ref{
		f.addGang("b", "a", nil, pod("b", "a0", 1000, 0, nil)),
		f.addGang("a", "z", nil, pod("a", "z0", 1000, 0, nil)),
		f.addGang("a", "b", nil, pod("a", "b0", 1000, 0, nil)),
	}
	p1, p2 := pod("ns", "p1", 1000, 0, nil), pod("ns", "p2", 1000, 0, nil)
	for _, ref := range refs {
		f.q.Block(ref, nil)
	}
	f.q.Block(refs[0], nil)
	f.q.Block(ident.Ref{}, p2)
	f.q.Block(ident.Ref{}, p1)
	if got := f.clock.Waiters(); got != 1 {
		t.Fatalf("a burst of refusals scheduled %d wakes, want 1", got)
	}
	for _, ref := range refs {
		if !f.q.Blocked(ref) {
			t.Fatalf("%s not blocked", ref)
		}
	}

	f.clock.Step(blockedWakeDelay - time.Millisecond)
	if got := f.clock.Waiters(); got != 1 {
		t.Fatalf("the wake fired before blockedWakeDelay (%d waiters left)", got)
	}
	f.clock.Step(time.Millisecond)
	r := metrics.WokenQueueAdmission
	want := []string{r + " lead a/b", r + " lead a/z", r + " lead b/a", r + " pods [ns/p1 ns/p2]"}
	var got []string
	eventually(t, "the wake", func() bool { got = append(got, f.wakes.take()...); return len(got) >= len(want) })
	if !slices.Equal(got, want) {
		t.Fatalf("woke %v, want %v", got, want)
	}

	eventually(t, "the wake to be done", func() bool { f.q.mu.Lock(); defer f.q.mu.Unlock(); return !f.q.wakePending })
	f.q.Block(refs[1], nil)
	f.q.Block(ident.Ref{}, p1)
	if got := f.clock.Waiters(); got != 0 {
		t.Fatalf("refusals already known scheduled %d wakes", got)
	}
	f.q.Block(ident.Ref{}, pod("ns", "p3", 1000, 0, nil))
	if got := f.clock.Waiters(); got != 1 {
		t.Fatalf("a new refusal after the wake scheduled %d wakes, want 1", got)
	}
}

// TestUnblock forgets a gang or a plain pod; a nil pod with no gang is no-op.
func TestUnblock(t *testing.T) {
	f := newFixture(t, Options{})
	ref := ident.Ref{Namespace: "ns", Name: "g"}
	p := pod("ns", "p", 1000, 0, nil)
	f.q.Block(ref, nil)
	f.q.Block(ident.Ref{}, p)
	f.q.Unblock(ident.Ref{}, nil)
	if got := f.q.Sizes(); got["blocked"] != 1 || got["blockedPod"] != 1 {
		t.Fatalf("Unblock of nothing forgot something: %v", got)
	}
	f.q.Unblock(ref, nil)
	f.q.Unblock(ident.Ref{}, p)
	if f.q.Blocked(ref) || f.q.Sizes()["blockedPod"] != 0 {
		t.Fatalf("still blocked after Unblock: %v", f.q.Sizes())
	}
}

// TestBlockedPlainPodsBounded: the plain pods kept for waking stop at
// requeue.MaxTurnedAway; gangs are still kept.
func TestBlockedPlainPodsBounded(t *testing.T) {
	f := newFixture(t, Options{})
	for i := range requeue.MaxTurnedAway + 5 {
		f.q.Block(ident.Ref{}, pod("ns", fmt.Sprintf("p%d", i), 1, 0, nil))
	}
	ref := ident.Ref{Namespace: "ns", Name: "g"}
	f.q.Block(ref, nil)
	if got := f.q.Sizes(); got["blockedPod"] != requeue.MaxTurnedAway || !f.q.Blocked(ref) {
		t.Fatalf("sizes %v, gang blocked %v; want %d plain pods and the gang", got, f.q.Blocked(ref), requeue.MaxTurnedAway)
	}
}

// TestRefusedAhead: another queue's refused work counts as ahead of the
// pod when it goes first by the Order port (queue order, then priority,
// then submission); the first of that queue's refused work decides.
func TestRefusedAhead(t *testing.T) {
	withPrio := func(p *v1.Pod, prio int32) *v1.Pod { p.Spec.Priority = &prio; return p }
	type setup struct {
		plain []*v1.Pod
		gang  []*v1.Pod // members of one refused gang
	}
	for _, tc := range []struct {
		name  string
		setup setup
		// busyB charges queue b above a, so queue order puts b after a.
		busyB bool
		want  bool
	}{
		{name: "nothing refused", want: false},
		{name: "higher priority", setup: setup{plain: []*v1.Pod{withPrio(pod("ns", "b", 1000, 20, inQueue("b")), 5)}}, want: true},
		{name: "lower priority", setup: setup{plain: []*v1.Pod{withPrio(pod("ns", "b", 1000, 0, inQueue("b")), -5)}}, want: false},
		{name: "submitted earlier", setup: setup{plain: []*v1.Pod{pod("ns", "b", 1000, 0, inQueue("b"))}}, want: true},
		{name: "submitted later", setup: setup{plain: []*v1.Pod{pod("ns", "b", 1000, 20, inQueue("b"))}}, want: false},
		{name: "the first of several decides", setup: setup{plain: []*v1.Pod{
			pod("ns", "late", 1000, 20, inQueue("b")), pod("ns", "early", 1000, 1, inQueue("b"))}}, want: true},
		{name: "another queue's work", setup: setup{plain: []*v1.Pod{pod("ns", "c", 1000, 0, inQueue("c"))}}, want: false},
		{name: "gang by its oldest pending member", setup: setup{gang: []*v1.Pod{
			pod("ns", "m-late", 1000, 30, inQueue("b")), pod("ns", "m-early", 1000, 2, inQueue("b"))}}, want: true},
		{name: "gang with no pending member", setup: setup{gang: []*v1.Pod{bound(pod("ns", "m", 1000, 0, inQueue("b")), "n1")}}, want: false},
		{name: "queue order before priority", busyB: true,
			setup: setup{plain: []*v1.Pod{withPrio(pod("ns", "b", 1000, 0, inQueue("b")), 5)}}, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{})
			mine := pod("ns", "mine", 1000, 10, inQueue("a"))
			if tc.busyB {
				f.addQueue("a")
				f.addQueue("b")
				f.addNode("n1", 8000)
				f.addPod(mine)
				f.addPod(bound(pod("ns", "b-run", 4000, 0, inQueue("b")), "n1"))
			}
			for _, p := range tc.setup.plain {
				f.q.Block(ident.Ref{}, p)
			}
			if len(tc.setup.gang) > 0 {
				f.q.Block(f.addGang("ns", "g", nil, tc.setup.gang...), nil)
			}
			snap := f.q.Snapshot()
			if tc.busyB && snap.Compare("a", "b") >= 0 {
				t.Fatalf("setup: queue a does not go before b (%v)", snap.Allocated)
			}
			ahead := f.q.RefusedAhead(mine, snap)
			if f.wakes.orders != 0 {
				t.Fatal("RefusedAhead read the order before it was asked")
			}
			if got := ahead("b"); got != tc.want {
				t.Fatalf("ahead(b) = %v, want %v", got, tc.want)
			}
			loaded := f.wakes.orders
			if ahead("c"); f.wakes.orders != loaded {
				t.Fatal("the refused work's order was read again")
			}
		})
	}
}

// TestRunWakesAsUsageDecays: with decayed fair share the refused are
// retried every sixteenth of the half-life, until ctx ends.
func TestRunWakesAsUsageDecays(t *testing.T) {
	f := newFixture(t, Options{UsageHalfLife: 16 * time.Minute})
	ref := ident.Ref{Namespace: "ns", Name: "g"}
	f.q.Block(ref, nil)
	f.clock.Step(blockedWakeDelay) // the refusal's own wake
	eventually(t, "the refusal's wake", func() bool { return len(f.wakes.take()) == 2 })
	eventually(t, "the refusal's wake to be done", func() bool { return f.clock.Waiters() == 0 })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.q.Run(ctx)
	r := metrics.WokenQueueAdmission
	for round := range 2 {
		eventually(t, "the decay timer", f.clock.HasWaiters)
		f.clock.Step(time.Minute - time.Millisecond)
		if got := f.wakes.take(); len(got) != 0 {
			t.Fatalf("round %d: woke %v before a sixteenth of the half-life", round, got)
		}
		f.clock.Step(time.Millisecond)
		var got []string
		eventually(t, "the decay wake", func() bool { got = append(got, f.wakes.take()...); return len(got) >= 2 })
		if want := []string{r + " lead ns/g", r + " pods []"}; !slices.Equal(got, want) {
			t.Fatalf("round %d: woke %v, want %v", round, got, want)
		}
	}
	cancel()
}
