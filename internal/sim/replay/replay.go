package replay

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/phalanx-sched/phalanx/internal/bench"
	"github.com/phalanx-sched/phalanx/internal/sim"
	"github.com/phalanx-sched/phalanx/internal/sim/trace"
	"github.com/phalanx-sched/phalanx/manifests"
)

// Schedulers a trace can be replayed with.
const (
	TracePhalanx = "phalanx"
	// TracePhalanxNoFGD is phalanx with fragmentation-aware placement off
	// (fragmentationHalfLifeSeconds 0): its placement before the score.
	TracePhalanxNoFGD = "phalanx-no-fgd"
	// TracePhalanxConsolidate is phalanx with consolidation on
	// (consolidationAfterSeconds ConsolidateAfterSeconds, scaled with the
	// other timers).
	TracePhalanxConsolidate = "phalanx-consolidate"
	TraceStock              = "stock"
	TraceUpstreamGang       = "upstream-gang"
)

// ConsolidateAfterSeconds is how long a gang waits for a domain before
// phalanx-consolidate moves gangs for it, in trace seconds.
const ConsolidateAfterSeconds = 600

// TraceScheduler returns how to run scheduler name: nil for phalanx and
// phalanx-no-fgd (in this process, with the canonical profile); stock and upstream-gang run
// kubeScheduler, upstream's kube-scheduler binary, as bench does (the
// upstream gang plugin with the alpha Workload API gates on).
func TraceScheduler(name, kubeScheduler string) (*sim.SchedulerSpec, error) {
	config := func(profile string) []byte {
		return []byte(strings.Replace(string(bench.StockConfig), "schedulerName: stock-scheduler", "schedulerName: "+profile, 1))
	}
	// CompositePodGroup too: jobs with sub-groups are composites for it.
	gates := "--feature-gates=" + strings.Join(append(slices.Clone(bench.UpstreamGates), bench.CompositeGate), "=true,") + "=true"
	switch name {
	case TracePhalanx, TracePhalanxNoFGD, TracePhalanxConsolidate:
		return nil, nil
	case TraceStock:
		return &sim.SchedulerSpec{Name: name, Binary: kubeScheduler, Config: config(bench.Stock.SchedulerName()), SchedulerName: bench.Stock.SchedulerName()}, nil
	case TraceUpstreamGang:
		return &sim.SchedulerSpec{
			Name: name, Binary: kubeScheduler, Config: config(bench.UpstreamGang.SchedulerName()), SchedulerName: bench.UpstreamGang.SchedulerName(),
			Args:           []string{gates},
			APIServerFlags: []string{gates, "--runtime-config=scheduling.k8s.io/v1beta1=true,scheduling.k8s.io/v1alpha3=true"},
			UpstreamGang:   true,
		}, nil
	}
	return nil, fmt.Errorf("no scheduler %q (phalanx, phalanx-no-fgd, stock, upstream-gang)", name)
}

// ReplayOptions tune ReplayTrace.
type ReplayOptions struct {
	sim.Options
	// Speed is trace seconds per second of the run.
	Speed float64
	// Timeout bounds each run (0: see Trace.Scenario).
	Timeout time.Duration
	// KubeScheduler is upstream's kube-scheduler binary (stock and
	// upstream-gang).
	KubeScheduler string
	// ScaleTimers divides phalanx's wall-clock timers that shape placement
	// over time — Coscheduling's reservationAfterSeconds and
	// fragmentationHalfLifeSeconds, CapacityQueue's minRuntimeSeconds and
	// usageHalfLifeSeconds — by Speed (whole seconds, reservation and
	// half-lives at least 1, a half-life of 0 stays off), so they mean in
	// trace time what they mean in a real cluster.
	ScaleTimers bool
}

// scaledTimers are the canonical profile's timers that shape placement, and
// the least each may be scaled down to.
var scaledTimers = map[string]float64{"reservationAfterSeconds": 1, "minRuntimeSeconds": 0, "fragmentationHalfLifeSeconds": 1, "usageHalfLifeSeconds": 1,
	"consolidationAfterSeconds": 1, "consolidationMinRuntimeSeconds": 0}

// optionalTimers may be missing from a configuration (profiles written
// before decayed fair share and consolidation).
var optionalTimers = map[string]bool{"usageHalfLifeSeconds": true, "consolidationAfterSeconds": true, "consolidationMinRuntimeSeconds": true}

// ScaledSchedulerConfig is the canonical phalanx profile with its
// reservation, minimum-runtime and half-life timers divided by speed.
func ScaledSchedulerConfig(speed float64) ([]byte, error) {
	return ScaleTimers(manifests.SchedulerConfig, speed)
}

// ScaleTimers divides a phalanx configuration's reservation, minimum-runtime
// and half-life timers by speed; each must be set once.
func ScaleTimers(config []byte, speed float64) ([]byte, error) {
	return editArgs(config, func(args map[string]any) int {
		scaled := 0
		for key, floor := range scaledTimers {
			if v, ok := args[key].(float64); ok {
				if v != 0 { // 0 turns a half-life or consolidation off: it stays off
					args[key] = int64(math.Max(floor, math.Round(v/speed)))
				}
				if !optionalTimers[key] {
					scaled++
				}
			}
		}
		return scaled
	}, len(scaledTimers)-len(optionalTimers))
}

// WithoutFragmentation turns fragmentation-aware placement off in a
// phalanx configuration.
func WithoutFragmentation(config []byte) ([]byte, error) {
	return editArgs(config, func(args map[string]any) int {
		if _, ok := args["fragmentationHalfLifeSeconds"]; !ok {
			return 0
		}
		args["fragmentationHalfLifeSeconds"] = 0
		return 1
	}, 1)
}

// WithConsolidation turns consolidation on in a phalanx configuration: a
// gang waits afterSeconds for a domain before gangs are moved for it.
func WithConsolidation(config []byte, afterSeconds int64) ([]byte, error) {
	return editArgs(config, func(args map[string]any) int {
		if _, ok := args["reservationAfterSeconds"]; !ok {
			return 0
		}
		args["consolidationAfterSeconds"] = afterSeconds
		return 1
	}, 1)
}

// editArgs applies edit to every plugin's args in config; edit says how many
// settings it changed, and want is how many there must be in all.
func editArgs(config []byte, edit func(args map[string]any) int, want int) ([]byte, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(config, &doc); err != nil {
		return nil, err
	}
	profiles, _ := doc["profiles"].([]any)
	changed := 0
	for _, p := range profiles {
		pm, _ := p.(map[string]any)
		cfgs, _ := pm["pluginConfig"].([]any)
		for _, c := range cfgs {
			cm, _ := c.(map[string]any)
			if args, ok := cm["args"].(map[string]any); ok {
				changed += edit(args)
			}
		}
	}
	if changed != want {
		return nil, fmt.Errorf("editing the scheduler configuration: changed %d settings, want %d (manifests/scheduler-config.yaml names each once)", changed, want)
	}
	return yaml.Marshal(doc)
}

// ReplayTrace replays the trace once per scheduler, each on a fresh
// cluster, in the order given.
func ReplayTrace(ctx context.Context, t *trace.Trace, schedulers []string, o ReplayOptions) ([]TraceRun, error) {
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
		if name == TracePhalanxConsolidate {
			base := opts.SchedulerConfig
			if base == nil {
				base = manifests.SchedulerConfig
			}
			if opts.SchedulerConfig, err = WithConsolidation(base, ConsolidateAfterSeconds); err != nil {
				return runs, err
			}
		}
		if spec == nil && o.ScaleTimers {
			base := opts.SchedulerConfig
			if base == nil {
				base = manifests.SchedulerConfig
			}
			if opts.SchedulerConfig, err = ScaleTimers(base, o.Speed); err != nil {
				return runs, err
			}
		}
		if name == TracePhalanxNoFGD {
			base := opts.SchedulerConfig
			if base == nil {
				base = manifests.SchedulerConfig
			}
			if opts.SchedulerConfig, err = WithoutFragmentation(base); err != nil {
				return runs, err
			}
		}
		opts.LiveQuorum = true
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "\n== %s: %d jobs on %d nodes at %gx (at most %s)\n", name, len(sc.Jobs), len(sc.Nodes), o.Speed, sc.Timeout.Duration)
		}
		res, err := sim.Run(ctx, sc, opts)
		if err != nil {
			return runs, fmt.Errorf("%s: %w", name, err)
		}
		runs = append(runs, TraceRun{Scheduler: name, Speed: o.Speed, Result: res})
	}
	return runs, nil
}
