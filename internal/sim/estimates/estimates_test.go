package estimates

import (
	"testing"
	"time"

	"github.com/phalanx-sched/phalanx/internal/sim/scenario"
)

func TestEstimates(t *testing.T) {
	for raw, want := range map[string]float64{"": 0, "none": 0, "exact": 1, "over:5": 5} {
		e, err := Parse(raw)
		if err != nil || e.Over != want {
			t.Errorf("Parse(%q) = %+v, %v; want over %g", raw, e, err, want)
		}
	}
	for _, raw := range []string{"over:0.5", "over:x", "soon"} {
		if _, err := Parse(raw); err == nil {
			t.Errorf("Parse(%q) accepted", raw)
		}
	}
	job := scenario.Job{Name: "j1", Duration: scenario.Duration{Duration: 100 * time.Second}}
	if got := (Model{Over: 1}).Of(job); got != 100*time.Second {
		t.Errorf("exact estimate %v", got)
	}
	if got := (Model{}).Of(job); got != 0 {
		t.Errorf("no estimate %v", got)
	}
	over := Model{Over: 5}
	lo, hi := time.Duration(1<<62), time.Duration(0)
	for i := range 200 {
		j := job
		j.Name = "job-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		d := over.Of(j)
		if d != over.Of(j) {
			t.Fatal("estimates differ between calls")
		}
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo < 100*time.Second || hi > 500*time.Second || hi-lo < 300*time.Second {
		t.Errorf("over:5 estimates span %v–%v; want within and across 100–500 s", lo, hi)
	}
}
