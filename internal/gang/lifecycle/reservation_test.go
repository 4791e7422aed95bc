package lifecycle

import (
	"testing"
	"time"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
)

// TestReservationOrderIsCompare: of two gangs of one queue asking for its
// starvation reservation, the one Compare puts first keeps it; at equal
// priority and time, by namespace and name, as the queue sort does.
func TestReservationOrderIsCompare(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	a := ident.Ref{Namespace: "team", Name: "a"}
	b := ident.Ref{Namespace: "team", Name: "b"}
	if !goesFirst(0, t0, a, 0, t0, b) || goesFirst(0, t0, b, 0, t0, a) {
		t.Error("same priority and time: a should go before b")
	}
	if !goesFirst(0, t0, b, 0, t0.Add(time.Second), a) {
		t.Error("the older gang should go first")
	}
	if !goesFirst(5, t0.Add(time.Hour), b, 0, t0, a) {
		t.Error("the higher priority should go first")
	}
	w := ident.Ref{Source: ident.SourceWorkload, Namespace: "team", Name: "a"}
	if c1, c2 := goesFirst(0, t0, a, 0, t0, w), goesFirst(0, t0, w, 0, t0, a); c1 == c2 {
		t.Errorf("gangs of two sources with one name must be ordered one way: %v, %v", c1, c2)
	}
}
