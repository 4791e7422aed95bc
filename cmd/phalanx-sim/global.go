package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/phalanx-sched/phalanx/internal/bench/globalbench"
	"github.com/phalanx-sched/phalanx/internal/bench/host"
)

// runGlobalBench is `phalanx-sim global-bench`: the global tier against
// Karmada's default dispatch on stand-in members (internal/bench/globalbench).
func runGlobalBench(ctx context.Context, args []string) error {
	o := globalbench.Defaults()
	fs := flag.NewFlagSet("global-bench", flag.ExitOnError)
	members := fs.String("members", joinInts(o.Members), "member counts to simulate, comma-separated")
	waiting := fs.String("waiting", joinInts(o.Waiting), "waiting-job counts of the pass cost probe, comma-separated")
	weights := fs.String("weights", joinInts(o.Weights), "the teams' queue weights, comma-separated")
	fs.Int64Var(&o.GPUs, "gpus", o.GPUs, "GPUs per member")
	fs.Float64Var(&o.Load, "load", o.Load, "offered GPU load over the window, as a fraction of all GPUs")
	fs.DurationVar(&o.Window, "window", o.Window, "how long jobs are submitted")
	fs.DurationVar(&o.Tick, "tick", o.Tick, "simulated time between passes")
	fs.DurationVar(&o.Delay, "delay", o.Delay, "simulated time from dispatch to start in the member")
	fs.DurationVar(&o.MedianRun, "median-run", o.MedianRun, "median run time of a job")
	fs.IntVar(&o.Runs, "runs", o.Runs, "seeds per configuration")
	fs.DurationVar(&o.CostTime, "cost-time", o.CostTime, "wall time each pass cost probe repeats its pass")
	_ = fs.Parse(args)
	var err error
	if o.Members, err = parseInts[int]("-members", *members); err != nil {
		return err
	}
	if o.Waiting, err = parseInts[int]("-waiting", *waiting); err != nil {
		return err
	}
	if o.Weights, err = parseInts[int32]("-weights", *weights); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return fmt.Errorf("global-bench: %w", err)
	}
	o.Progress = os.Stdout
	machine := host.Machine()
	fmt.Printf("phalanx-sim global-bench: members %s, %d runs each; %s; load %s\n", *members, o.Runs, machine, host.LoadAverage())
	rep, err := globalbench.Run(ctx, o)
	globalbench.WriteReport(os.Stdout, rep, machine, strings.Join(os.Args, " "))
	return err
}

func parseInts[T int | int32](flagName, s string) ([]T, error) {
	var out []T
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(part), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a comma-separated list of integers", flagName, s)
		}
		out = append(out, T(n))
	}
	return out, nil
}

func joinInts[T int | int32](v []T) string {
	parts := make([]string, len(v))
	for i, n := range v {
		parts[i] = strconv.Itoa(int(n))
	}
	return strings.Join(parts, ",")
}
