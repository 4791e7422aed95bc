package integration

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/phalanx-sched/phalanx/examples"
	"github.com/phalanx-sched/phalanx/internal/sim"
)

// TestDemoScenario runs `make demo`'s scenario and checks its outcomes, not
// its speed: every gang started whole or not at all, and every job met its
// expectation (the too-big gang holds nothing; dependencies ran in order).
func TestDemoScenario(t *testing.T) {
	sc, err := sim.Parse(examples.Demo)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := sim.Run(ctx, sc, sim.Options{Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range res.Check() {
		t.Error(e)
	}
	for _, j := range res.Jobs {
		if j.Job.MinMember > 0 && j.Ran() && j.Spread > 2*time.Second {
			t.Errorf("%s: members bound over %v, not together", j.Job.Key(), j.Spread)
		}
	}
}
