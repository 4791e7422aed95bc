package integration

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/phalanx-sched/phalanx/examples"
	"github.com/phalanx-sched/phalanx/internal/sim"
)

// TestDemoScenario runs `make demo`'s scenarios (kwok as the kubelet) and
// checks their outcomes, not their speed: every gang started whole or not at
// all, every job met its expectation, gangs that require an IB cluster ran in
// one, the queues' GPU shares were 1:2 within tolerance while both waited, and
// no pod landed where the kubelet's NUMA alignment would reject it.
func TestDemoScenario(t *testing.T) {
	suite, err := sim.Parse(examples.Demo)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	for _, sc := range suite.Scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			res, err := sim.Run(ctx, sc, sim.Options{Log: io.Discard})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range res.Check() {
				t.Error(e)
			}
			ran := 0
			for _, j := range res.Jobs {
				if j.Ran() {
					ran++
				}
				if j.Job.MinMember > 0 && j.Ran() && j.Spread > 2*time.Second {
					t.Errorf("%s: members bound over %v, not together", j.Job.Key(), j.Spread)
				}
				if j.Ran() && j.Job.Duration.Duration > 0 && j.Completed < j.Job.Replicas {
					t.Errorf("%s: %d of %d pods completed; kwok should have completed them all", j.Job.Key(), j.Completed, j.Job.Replicas)
				}
			}
			if ran == 0 {
				t.Errorf("no job ran")
			}
			if t.Failed() {
				res.WriteText(testWriter{t})
			}
		})
	}
}

// testWriter sends a report to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
