package lifecycle

import (
	"reflect"
	"testing"
	"time"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
)

// TestLifecycleFailureStamps: a failure stamped with the version seen before
// the plan is void when capacity changed meanwhile; its member stands for
// the gang while it waits.
func TestLifecycleFailureStamps(t *testing.T) {
	lc, _, _ := newTestLifecycle()
	lc.ObserveMember(g1, "p1", "")
	v := lc.Version()
	lc.Changed() // capacity changed during the plan
	lc.FailAt(g1, "p1", "no room", v)
	if _, ok := lc.Failed(g1); ok {
		t.Error("a failure stamped before a change is cached")
	}
	if !lc.FailedSince(g1, "p1", v) || lc.FailedSince(g1, "p1", v+1) {
		t.Error("FailedSince must hold from the failure's own version only")
	}
	if lc.FailedSince(g1, "other", v) {
		t.Error("FailedSince holds for a member that did not fail")
	}
	if got := lc.Representative(g1); got != "p1" {
		t.Errorf("Representative = %q, want p1", got)
	}
	// A representative that is no longer pending stands for nothing.
	lc.MemberReserved(g1, "p1", "a", "w")
	if got := lc.Representative(g1); got != "" {
		t.Errorf("Representative = %q of a reserved member, want none", got)
	}
	if lc.FailedSince(g1, "p1", v) {
		t.Error("FailedSince holds for a member no longer pending")
	}
	lc.Retry(g1)
	if lc.Representative(g1) != "" || lc.FailedSince(g1, "p1", 0) {
		t.Error("a retried gang still has a failure")
	}
	if lc.Representative(ident.Ref{Name: "unknown"}) != "" {
		t.Error("an unknown gang has a representative")
	}
}

// TestLifecycleFailedGangs: the gangs that failed, what their plans cost,
// which are stalled and which failed long enough ago to retry.
func TestLifecycleFailedGangs(t *testing.T) {
	lc, clk, _ := newTestLifecycle()
	old := ident.Ref{Namespace: "ns", Name: "old"}
	young := ident.Ref{Namespace: "ns", Name: "young"}
	lc.Fail(old, "o", "no room")
	lc.FailCost(old, 30*time.Millisecond)
	clk.Step(time.Minute)
	lc.Fail(young, "y", "no room")
	lc.FailCost(young, 10*time.Millisecond)
	lc.FailCost(g1, time.Second) // not failed: not counted

	refs, cost := lc.FailedGangs()
	if !reflect.DeepEqual(refs, []ident.Ref{old, young}) || cost != 40*time.Millisecond {
		t.Errorf("FailedGangs = %v, %v; want old and young, 40ms", refs, cost)
	}
	if got := lc.FailedBefore(30 * time.Second); !reflect.DeepEqual(got, []ident.Ref{old}) {
		t.Errorf("FailedBefore(30s) = %v, want old", got)
	}
	if got := lc.FailedBefore(0); len(got) != 2 {
		t.Errorf("FailedBefore(0) = %v, want both", got)
	}
	if got := lc.Stalled(); !reflect.DeepEqual(got, []ident.Ref{old, young}) {
		t.Errorf("Stalled = %v, want both (nothing changed since)", got)
	}
	lc.Changed()
	if got := lc.Stalled(); len(got) != 0 {
		t.Errorf("Stalled = %v after a change, want none", got)
	}
	if refs, _ := lc.FailedGangs(); len(refs) != 2 {
		t.Errorf("FailedGangs = %v after a change, want both still (their failures stand until retried)", refs)
	}
	lc.Retry(old)
	if refs, cost := lc.FailedGangs(); !reflect.DeepEqual(refs, []ident.Ref{young}) || cost != 10*time.Millisecond {
		t.Errorf("FailedGangs = %v, %v after retrying old", refs, cost)
	}
}

// TestLifecycleWaitingSince: waiting starts at the first failure and ends
// with a plan; an unknown gang does not wait.
func TestLifecycleWaitingSince(t *testing.T) {
	lc, clk, _ := newTestLifecycle()
	if !lc.WaitingSince(ident.Ref{Name: "unknown"}).IsZero() || !lc.WaitingSince(g1).IsZero() {
		t.Fatal("a gang that never failed waits")
	}
	start := clk.Now()
	lc.Fail(g1, "p", "no room")
	clk.Step(time.Minute)
	lc.Retry(g1)
	lc.Fail(g1, "p", "no room")
	if got := lc.WaitingSince(g1); !got.Equal(start) {
		t.Errorf("WaitingSince = %v, want the first failure %v", got, start)
	}
}

func TestTimeoutPause(t *testing.T) {
	for _, tt := range []struct {
		ttl  time.Duration
		n    int
		want time.Duration
	}{
		{ttl: time.Minute, n: 1, want: 30 * time.Second},
		{ttl: time.Minute, n: 2, want: time.Minute},
		{ttl: time.Minute, n: 3, want: 2 * time.Minute},
		{ttl: time.Minute, n: 10, want: maxTimeoutPause},
		{ttl: time.Hour, n: 1, want: maxTimeoutPause},
		{ttl: time.Second, n: 1, want: minTimeoutPause},
		{ttl: 0, n: 1, want: minTimeoutPause},
		{ttl: 3333 * time.Millisecond, n: 1, want: 1700 * time.Millisecond},
	} {
		if got := TimeoutPause(tt.ttl, tt.n); got != tt.want {
			t.Errorf("TimeoutPause(%v, %d) = %v, want %v", tt.ttl, tt.n, got, tt.want)
		}
	}
}
