package sim

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/phalanx-sched/phalanx/internal/bench"
	"github.com/phalanx-sched/phalanx/manifests"
)

// Schedulers a trace can be replayed with.
const (
	TracePhalanx      = "phalanx"
	TraceStock        = "stock"
	TraceUpstreamGang = "upstream-gang"
)

// TraceScheduler returns how to run scheduler name: nil for phalanx (in this
// process, with the canonical profile); stock and upstream-gang run
// kubeScheduler, upstream's kube-scheduler binary, as bench does (the
// upstream gang plugin with the alpha Workload API gates on).
func TraceScheduler(name, kubeScheduler string) (*SchedulerSpec, error) {
	config := func(profile string) []byte {
		return []byte(strings.Replace(string(bench.StockConfig), "schedulerName: stock-scheduler", "schedulerName: "+profile, 1))
	}
	gates := "--feature-gates=" + strings.Join(bench.UpstreamGates, "=true,") + "=true"
	switch name {
	case TracePhalanx:
		return nil, nil
	case TraceStock:
		return &SchedulerSpec{Name: name, Binary: kubeScheduler, Config: config(bench.Stock.SchedulerName()), SchedulerName: bench.Stock.SchedulerName()}, nil
	case TraceUpstreamGang:
		return &SchedulerSpec{
			Name: name, Binary: kubeScheduler, Config: config(bench.UpstreamGang.SchedulerName()), SchedulerName: bench.UpstreamGang.SchedulerName(),
			Args:           []string{gates},
			APIServerFlags: []string{gates, "--runtime-config=scheduling.k8s.io/v1alpha2=true"},
			UpstreamGang:   true,
		}, nil
	}
	return nil, fmt.Errorf("no scheduler %q (phalanx, stock, upstream-gang)", name)
}

// ReplayOptions tune ReplayTrace.
type ReplayOptions struct {
	Options
	// Speed is trace seconds per second of the run.
	Speed float64
	// Timeout bounds each run (0: see Trace.Scenario).
	Timeout time.Duration
	// KubeScheduler is upstream's kube-scheduler binary (stock and
	// upstream-gang).
	KubeScheduler string
	// ScaleTimers divides phalanx's wall-clock timers that shape placement
	// over time — Coscheduling's reservationAfterSeconds and CapacityQueue's
	// minRuntimeSeconds — by Speed (whole seconds, reservation at least 1),
	// so they mean in trace time what they mean in a real cluster.
	ScaleTimers bool
}

// ScaledSchedulerConfig is the canonical phalanx profile with its
// reservation and minimum-runtime timers divided by speed.
func ScaledSchedulerConfig(speed float64) ([]byte, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(manifests.SchedulerConfig, &doc); err != nil {
		return nil, err
	}
	profiles, _ := doc["profiles"].([]any)
	scaled := 0
	for _, p := range profiles {
		pm, _ := p.(map[string]any)
		cfgs, _ := pm["pluginConfig"].([]any)
		for _, c := range cfgs {
			cm, _ := c.(map[string]any)
			args, _ := cm["args"].(map[string]any)
			for key, floor := range map[string]float64{"reservationAfterSeconds": 1, "minRuntimeSeconds": 0} {
				if v, ok := args[key].(float64); ok {
					args[key] = int64(math.Max(floor, math.Round(v/speed)))
					scaled++
				}
			}
		}
	}
	if scaled != 2 {
		return nil, fmt.Errorf("scaling timers: found %d of reservationAfterSeconds and minRuntimeSeconds in manifests/scheduler-config.yaml", scaled)
	}
	return yaml.Marshal(doc)
}

// ReplayTrace replays the trace once per scheduler, each on a fresh
// cluster, in the order given.
func ReplayTrace(ctx context.Context, t *Trace, schedulers []string, o ReplayOptions) ([]TraceRun, error) {
	var runs []TraceRun
	for _, name := range schedulers {
		spec, err := TraceScheduler(name, o.KubeScheduler)
		if err != nil {
			return runs, err
		}
		sc, err := t.Scenario("trace-"+name, o.Speed, o.Timeout)
		if err != nil {
			return runs, err
		}
		opts := o.Options
		opts.Scheduler = spec
		if spec == nil && o.ScaleTimers {
			if opts.SchedulerConfig, err = ScaledSchedulerConfig(o.Speed); err != nil {
				return runs, err
			}
		}
		opts.LiveQuorum = true
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "\n== %s: %d jobs on %d nodes at %gx (at most %s)\n", name, len(sc.Jobs), len(sc.Nodes), o.Speed, sc.Timeout.Duration)
		}
		res, err := Run(ctx, sc, opts)
		if err != nil {
			return runs, fmt.Errorf("%s: %w", name, err)
		}
		runs = append(runs, TraceRun{Scheduler: name, Speed: o.Speed, Result: res})
	}
	return runs, nil
}
