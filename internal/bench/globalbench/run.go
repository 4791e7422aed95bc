package globalbench

import (
	"context"
	"fmt"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// Report is every run of a benchmark.
type Report struct {
	Options Options
	Sims    []runResult
	Costs   []costResult
	Wall    time.Duration
}

// dispatchers are the tier and the baseline, in the report's order.
var dispatchers = []func(*clocktesting.FakePassiveClock) dispatcher{
	func(c *clocktesting.FakePassiveClock) dispatcher { return newTier(c) },
	func(*clocktesting.FakePassiveClock) dispatcher { return karmadaDefault{} },
}

// Run measures the pass cost at each member and waiting-job count, then
// simulates each member count with each dispatcher over seeds 1..Runs.
func Run(ctx context.Context, o Options) (rep Report, err error) {
	start := time.Now()
	rep = Report{Options: o}
	defer func() { rep.Wall = time.Since(start) }()
	if err := o.Validate(); err != nil {
		return rep, err
	}
	for _, m := range o.Members {
		for _, n := range o.Waiting {
			for seed := uint64(1); seed <= uint64(o.Runs); seed++ {
				for _, mk := range dispatchers {
					if err := ctx.Err(); err != nil {
						return rep, err
					}
					rep.Costs = append(rep.Costs, passCost(ctx, o, m, n, seed, mk))
				}
			}
		}
	}
	for _, m := range o.Members {
		for seed := uint64(1); seed <= uint64(o.Runs); seed++ {
			for _, mk := range dispatchers {
				r, err := simulate(ctx, o, m, seed, mk)
				if err != nil {
					return rep, err
				}
				rep.Sims = append(rep.Sims, r)
				if o.Progress != nil {
					fmt.Fprintf(o.Progress, "global-bench: %s, %d members, seed %d: %d jobs, %d passes in %s\n",
						r.Dispatcher, m, seed, r.Jobs, r.Passes, r.Wall.Round(time.Millisecond))
				}
			}
		}
	}
	return rep, nil
}
