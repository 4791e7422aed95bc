// Package globalbench measures phalanx's global tier (internal/global) in
// a simulated run over simulated time: members are stand-ins that answer
// as a member planner does on plain GPUs, gang jobs of several teams are
// submitted over time, and each tick runs one Tier.Pass and applies its
// verdicts. A baseline dispatcher that does what Karmada does without the
// tier (first come first served, each job to the member with the most free
// GPUs where it fits, no queues) runs the same jobs for comparison. No
// gRPC and no API server: the figures are the tier's decisions and cost.
package globalbench

import (
	"errors"
	"fmt"
	"io"
	"time"
)

// Options size a benchmark.
type Options struct {
	// Members are the member counts simulated, each in its own runs.
	Members []int
	// GPUs of each member.
	GPUs int64
	// Weights of the teams' queues, team-a first.
	Weights []int32
	// Load is the offered GPU load over the submission window, as a
	// fraction of all members' GPUs (above 1: work waits).
	Load float64
	// Window is how long jobs are submitted; the run goes on until every
	// job is done.
	Window time.Duration
	// Tick is the simulated time between passes; Delay is the time from
	// dispatch to the job's start in its member (propagation).
	Tick, Delay time.Duration
	// MedianRun is the median run time of a job (log-normal).
	MedianRun time.Duration
	// Runs are the seeds per configuration (seeds 1..Runs).
	Runs int
	// Waiting are the waiting-job counts of the pass cost probe.
	Waiting []int
	// CostTime is how long each probe repeats its pass.
	CostTime time.Duration
	// Progress gets a line per finished run (nil: none).
	Progress io.Writer
}

// Defaults: the sizes `make bench-global` runs.
func Defaults() Options {
	return Options{Members: []int{3, 20}, GPUs: 64, Weights: []int32{2, 1, 1}, Load: 1.6,
		Window: 3 * time.Hour, Tick: 5 * time.Second, Delay: 10 * time.Second, MedianRun: 20 * time.Minute,
		Runs: 5, Waiting: []int{100, 1000}, CostTime: 300 * time.Millisecond}
}

// Validate names the first bad field.
func (o Options) Validate() error {
	var errs []error
	if len(o.Members) == 0 {
		errs = append(errs, errors.New("members: no member count given"))
	}
	for _, m := range o.Members {
		if m < 1 {
			errs = append(errs, fmt.Errorf("members: %d is below 1", m))
		}
	}
	if o.GPUs < 32 {
		errs = append(errs, fmt.Errorf("gpus: %d per member cannot hold a 32-GPU job", o.GPUs))
	}
	if len(o.Weights) < 1 || len(o.Weights) > 26 {
		errs = append(errs, fmt.Errorf("weights: %d teams, want 1 to 26", len(o.Weights)))
	}
	for i, w := range o.Weights {
		if w < 1 {
			errs = append(errs, fmt.Errorf("weights[%d]: %d is below 1", i, w))
		}
	}
	if o.Load <= 0 {
		errs = append(errs, fmt.Errorf("load: %v is not positive", o.Load))
	}
	if o.Window <= 0 || o.Tick <= 0 || o.Delay < 0 || o.MedianRun <= 0 {
		errs = append(errs, fmt.Errorf("window %v, tick %v, median run %v must be positive and delay %v not negative", o.Window, o.Tick, o.MedianRun, o.Delay))
	}
	if o.Runs < 1 {
		errs = append(errs, fmt.Errorf("runs: %d is below 1", o.Runs))
	}
	for _, n := range o.Waiting {
		if n < 1 {
			errs = append(errs, fmt.Errorf("waiting: %d is below 1", n))
		}
	}
	return errors.Join(errs...)
}

// team is the queue name of team i.
func team(i int) string { return "team-" + string(rune('a'+i)) }
