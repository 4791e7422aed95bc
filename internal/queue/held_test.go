package queue

import (
	"testing"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

// TestHeldRoundTrip: the held annotation renders quantities compactly (CPU
// from millicores), reads back to the same amounts, and is "" for nothing;
// ChargeHeld adds gangs' holds up per queue and skips unresolved gangs.
func TestHeldRoundTrip(t *testing.T) {
	l := resources.List{"cpu": 8500, "memory": 64 << 30, "nvidia.com/gpu": 4, "pods": 0}
	s := EncodeHeld(l)
	if want := `{"cpu":"8500m","memory":"64Gi","nvidia.com/gpu":"4"}`; s != want {
		t.Fatalf("EncodeHeld = %s, want %s", s, want)
	}
	back, err := DecodeHeld(s)
	if err != nil || back.String() != l.String() {
		t.Fatalf("DecodeHeld = %v, %v; want %v", back, err, l)
	}
	if s := EncodeHeld(resources.List{"cpu": 0}); s != "" {
		t.Errorf("EncodeHeld(nothing) = %q, want \"\"", s)
	}
	if l, err := DecodeHeld(""); err != nil || !l.IsZero() {
		t.Errorf("DecodeHeld(\"\") = %v, %v", l, err)
	}

	byQueue := ChargeHeld(map[string]resources.List{
		"a": {"cpu": 1000}, "b": {"cpu": 2000}, "c": {"cpu": 4000}, "gone": {"cpu": 8000},
	}, func(g string) (string, bool) {
		switch g {
		case "a", "b":
			return "q1", true
		case "c":
			return "q2", true
		}
		return "", false
	})
	if len(byQueue) != 2 || byQueue["q1"]["cpu"] != 3000 || byQueue["q2"]["cpu"] != 4000 {
		t.Fatalf("ChargeHeld = %v, want q1 cpu 3000m, q2 cpu 4000m", byQueue)
	}
}
