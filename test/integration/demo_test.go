package integration

import (
	"context"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/phalanx-sched/phalanx/examples"
	"github.com/phalanx-sched/phalanx/internal/sim"
	"github.com/phalanx-sched/phalanx/internal/sim/report"
	"github.com/phalanx-sched/phalanx/internal/sim/scenario"
)

// The demo's scenarios, each its own test so that they run in parallel
// processes (hack/test-parallel.sh); TestDemoScenariosAllRun keeps the list
// whole.
var demoScenarios = []string{"gangs", "queues", "ib-clusters", "numa"}

func TestDemoScenarioGangs(t *testing.T)      { runDemoScenario(t, "gangs") }
func TestDemoScenarioQueues(t *testing.T)     { runDemoScenario(t, "queues") }
func TestDemoScenarioIBClusters(t *testing.T) { runDemoScenario(t, "ib-clusters") }
func TestDemoScenarioNUMA(t *testing.T)       { runDemoScenario(t, "numa") }

// TestDemoScenariosAllRun: every scenario of `make demo` has its test above.
func TestDemoScenariosAllRun(t *testing.T) {
	suite, err := scenario.Parse(examples.Demo)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sc := range suite.Scenarios {
		names = append(names, sc.Name)
	}
	if !slices.Equal(names, demoScenarios) {
		t.Fatalf("demo scenarios %v, tests run %v: add a TestDemoScenario<Name> for each", names, demoScenarios)
	}
}

// runDemoScenario runs one of `make demo`'s scenarios (kwok as the kubelet)
// and checks its outcomes, not its speed: every gang started whole or not at
// all, every job met its expectation, gangs that require an IB cluster ran in
// one, the queues' GPU shares were 1:2 within tolerance while both waited, and
// no pod landed where the kubelet's NUMA alignment would reject it.
func runDemoScenario(t *testing.T, name string) {
	suite, err := scenario.Parse(examples.Demo)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	for _, sc := range suite.Scenarios {
		if sc.Name != name {
			continue
		}
		res, err := sim.Run(ctx, sc, sim.Options{Log: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range report.Check(res) {
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
			report.WriteText(testWriter{t}, res)
		}
		return
	}
	t.Fatalf("make demo has no scenario %q", name)
}

// testWriter sends a report to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
