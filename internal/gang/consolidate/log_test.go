package consolidate

import (
	"testing"
	"time"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/preempt"
)

// At most PerHour consolidations per queue within any hour; the next one
// waits until the oldest is an hour old.
func TestLogRate(t *testing.T) {
	var l Log
	if ok, _ := l.Allowed("q", t0, 1); !ok {
		t.Fatal("the first consolidation refused")
	}
	l.Record("q", t0, []preempt.Victim{{Ref: ident.Ref{Namespace: "ns", Name: "v"}}})
	if ok, next := l.Allowed("q", t0.Add(59*time.Minute), 1); ok || !next.Equal(t0.Add(time.Hour)) {
		t.Fatalf("second within the hour: allowed %v, next %v", ok, next)
	}
	if ok, _ := l.Allowed("other", t0.Add(time.Minute), 1); !ok {
		t.Fatal("another queue's consolidation refused")
	}
	if ok, _ := l.Allowed("q", t0.Add(time.Hour), 1); !ok {
		t.Fatal("refused after an hour")
	}
	if got := l.MovedAt(ident.Ref{Namespace: "ns", Name: "v"}); !got.Equal(t0) {
		t.Fatalf("moved at %v", got)
	}
}

// A gang whose members fail again and again while it waits gets one retry
// timer, not one per failure.
func TestLogClaimWakeOnce(t *testing.T) {
	var l Log
	ref := ident.Ref{Namespace: "ns", Name: "g"}
	if !l.ClaimWake(ref, t0, t0.Add(time.Minute)) {
		t.Fatal("the first retry was not scheduled")
	}
	if l.ClaimWake(ref, t0.Add(time.Second), t0.Add(time.Minute)) || l.ClaimWake(ref, t0.Add(time.Second), t0.Add(2*time.Minute)) {
		t.Error("a second retry was scheduled while one no later is pending")
	}
	if !l.ClaimWake(ref, t0.Add(time.Second), t0.Add(30*time.Second)) {
		t.Error("an earlier retry was not scheduled")
	}
	if !l.ClaimWake(ref, t0.Add(time.Minute), t0.Add(2*time.Minute)) {
		t.Error("no retry after the pending one fired")
	}
	if !l.ClaimWake(ident.Ref{Namespace: "ns", Name: "other"}, t0, t0.Add(time.Minute)) {
		t.Error("another gang's retry was not scheduled")
	}
}
