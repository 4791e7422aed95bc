package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/phalanx-sched/phalanx/internal/sim"
	"github.com/phalanx-sched/phalanx/internal/sim/estimates"
	"github.com/phalanx-sched/phalanx/internal/sim/replay"
	"github.com/phalanx-sched/phalanx/internal/sim/report"
	"github.com/phalanx-sched/phalanx/internal/sim/trace"
)

// traceFlags are the trace command's flags.
type traceFlags struct {
	nodes, jobs, queues, schedulers, kubeScheduler string
	htmlPath, logFile, config, details, profileDir string
	speed, runTimeLimit                            float64
	timeout                                        time.Duration
	scaleTimers                                    bool
	gen                                            trace.GenOptions
	generate, noRun                                bool
	gangMix, genQueues, out                        string
	estimates                                      string
}

func parseTraceFlags(args []string) *traceFlags {
	f := &traceFlags{gen: trace.DefaultGenOptions}
	fs := flag.NewFlagSet("trace", flag.ExitOnError)
	fs.StringVar(&f.nodes, "nodes", "", "node CSV (docs/simulator.md)")
	fs.StringVar(&f.jobs, "jobs", "", "job CSV")
	fs.StringVar(&f.queues, "queues", "", "queue CSV (optional; queues named by jobs get weight 1)")
	fs.Float64Var(&f.speed, "speed", 100, "time compression: trace seconds per second of the replay")
	fs.DurationVar(&f.timeout, "timeout", 0, "bound each replay (default: twice the compressed horizon plus a minute)")
	fs.StringVar(&f.schedulers, "schedulers", "phalanx,phalanx-no-fgd,stock,upstream-gang", "schedulers to replay with, in turns")
	fs.StringVar(&f.kubeScheduler, "kube-scheduler", "bin/kube-scheduler", "upstream kube-scheduler binary for stock and upstream-gang (make bench-bins builds it); without it only phalanx runs")
	fs.StringVar(&f.htmlPath, "html", "report/trace.html", "write the HTML report here (\"\": none)")
	fs.StringVar(&f.logFile, "log", "", "write the control plane's log to this file")
	fs.BoolVar(&f.scaleTimers, "scale-timers", true, "divide phalanx's reservation, minimum-runtime and half-life timers by -speed, so they keep their meaning in trace time")
	fs.StringVar(&f.config, "config", "", "phalanx's KubeSchedulerConfiguration for phalanx and phalanx-no-fgd (default: manifests/scheduler-config.yaml); with -scale-timers it must set the three scaled timers")
	fs.StringVar(&f.details, "details", "", "write each replay's per-job table (the demo's text report) into this directory")
	fs.StringVar(&f.profileDir, "profile-dir", "", "write a CPU profile of the whole replay (control plane, kwok and the in-process phalanx) and a goroutine dump every 2 s of the run into this directory (what the scheduling loop was doing while jobs waited)")
	fs.Float64Var(&f.runTimeLimit, "run-time-limit", 0, "give each pod activeDeadlineSeconds of this many times its run time (e.g. 1.5), as jobs with time limits declare; phalanx backfills reservations with such pods; 0: none")
	fs.StringVar(&f.estimates, "estimates", "none", "give each pod an expected-runtime annotation from its job's run time: none, exact, or over:K (the run time times a factor drawn uniformly from [1, K] per job, as users over-estimate); phalanx places reservations and backfills by them")
	gen := &f.gen
	fs.BoolVar(&f.generate, "generate", false, "generate the trace from the openb shapes (examples/trace) instead of reading -nodes/-jobs")
	fs.Int64Var(&gen.Seed, "seed", gen.Seed, "generator seed")
	fs.Float64Var(&gen.Load, "load", gen.Load, "generator: offered GPU load")
	fs.IntVar(&gen.Nodes, "node-count", gen.Nodes, "generator: nodes")
	fs.IntVar(&gen.Jobs, "job-count", gen.Jobs, "generator: jobs")
	fs.IntVar(&gen.LeafSize, "leaf-size", gen.LeafSize, "generator: nodes per leaf switch")
	fs.Float64Var(&gen.TopologyShare, "topology-share", gen.TopologyShare, "generator: fraction of gangs that require one leaf (with -cliques: one nvlink-clique)")
	fs.IntVar(&gen.IBLeaves, "ib-leaves", 0, "generator: an InfiniBand-cluster level above the leaves, this many leaves per IB cluster (level ib-cluster); 0: none")
	fs.Float64Var(&gen.IBShare, "ib-share", 0, "generator, with -ib-leaves: fraction of gangs that require one ib-cluster (drawn from those that do not require a leaf)")
	fs.Int64Var(&gen.NodeGPUs, "node-gpus", 0, "generator: only openb node shapes with this many GPUs (e.g. 8); 0: all shapes in their proportions")
	fs.IntVar(&gen.Cliques, "cliques", 0, fmt.Sprintf("generator: a GB200 NVL72-class cluster of this many NVLink cliques of %d nodes × %d GPUs, under spines (instead of -node-count openb nodes in leaves); 0: off", trace.CliqueNodes, trace.GB200Node.GPUs))
	fs.IntVar(&gen.SpineCliques, "spine-cliques", gen.SpineCliques, "generator, with -cliques: NVLink cliques per spine")
	fs.Float64Var(&gen.SubGroupShare, "subgroup-share", gen.SubGroupShare, "generator, with -cliques: fraction of multi-node gangs (more GPUs than a node) made tensor-parallel: the gang inside one spine, sub-groups each inside one nvlink-clique")
	fs.StringVar(&f.gangMix, "gang-mix", "", "generator: gang sizes and their weights, size:weight,… (default 1:0.6,2:0.15,4:0.15,8:0.1; size 1 is a single pod)")
	fs.StringVar(&f.genQueues, "gen-queues", "", "generator: the queues jobs are drawn into, name:weight,… (default team-a:1,team-b:2)")
	fs.StringVar(&f.out, "out", "report/trace", "generator: write nodes.csv, jobs.csv and queues.csv here")
	fs.BoolVar(&f.noRun, "no-run", false, "generator: write the CSVs and stop")
	_ = fs.Parse(args)
	return f
}

func runTrace(ctx context.Context, args []string) error {
	f := parseTraceFlags(args)
	t, err := f.loadTrace()
	if err != nil || t == nil {
		return err
	}
	names, err := f.schedulerNames()
	if err != nil {
		return err
	}
	var phalanxConfig []byte
	if f.config != "" {
		if phalanxConfig, err = os.ReadFile(f.config); err != nil {
			return err
		}
	}
	logw, closeLog := quietLogs(f.logFile)
	defer closeLog()
	if f.profileDir != "" {
		stop, err := profileReplay(ctx, f.profileDir)
		if err != nil {
			return err
		}
		defer stop()
	}
	model, err := estimates.Parse(f.estimates)
	if err != nil {
		return fmt.Errorf("-estimates: %w", err)
	}
	start := time.Now()
	runs, err := replay.ReplayTrace(ctx, t, names, replay.ReplayOptions{
		Options: sim.Options{Log: logw, Progress: os.Stdout, SchedulerConfig: phalanxConfig, RunTimeLimit: f.runTimeLimit, Estimates: model},
		Speed:   f.speed, Timeout: f.timeout, KubeScheduler: f.kubeScheduler, ScaleTimers: f.scaleTimers,
	})
	replay.WriteTraceText(os.Stdout, runs)
	if f.details != "" {
		if err := writeTraceDetails(f.details, runs); err != nil {
			return err
		}
	}
	if f.htmlPath != "" && len(runs) > 0 {
		if werr := writeTraceHTML(f.htmlPath, runs); werr != nil {
			return werr
		}
		fmt.Printf("\nHTML report: %s\n", f.htmlPath)
	}
	fmt.Printf("trace took %s\n", time.Since(start).Round(time.Second))
	return err
}

// loadTrace generates or reads the trace; nil without error under -no-run.
func (f *traceFlags) loadTrace() (*trace.Trace, error) {
	var t *trace.Trace
	var err error
	if f.gangMix != "" {
		if f.gen.GangMix, err = parseGangMix(f.gangMix); err != nil {
			return nil, fmt.Errorf("-gang-mix: %w", err)
		}
	}
	if f.genQueues != "" {
		if f.gen.Queues, err = parseQueues(f.genQueues); err != nil {
			return nil, fmt.Errorf("-gen-queues: %w", err)
		}
	}
	if !f.generate {
		if f.nodes == "" || f.jobs == "" {
			return nil, fmt.Errorf("trace: -nodes and -jobs are required (or -generate)")
		}
		return trace.ReadTraceFiles(f.nodes, f.jobs, f.queues)
	}
	sh, err := trace.OpenbShapes()
	if err != nil {
		return nil, err
	}
	if t, err = trace.Generate(sh, f.gen); err != nil {
		return nil, err
	}
	if err := t.WriteFiles(f.out); err != nil {
		return nil, err
	}
	fmt.Printf("phalanx-sim trace: generated %d nodes (%d GPUs), %d jobs, offered load %.2f, horizon %.0fs (seed %d) into %s\n",
		len(t.Nodes), t.GPUs(), len(t.Jobs), t.OfferedLoad(), t.Horizon(), f.gen.Seed, f.out)
	if f.noRun {
		return nil, nil
	}
	return t, nil
}

// schedulerNames are the -schedulers that can run: the upstream ones need
// the kube-scheduler binary.
func (f *traceFlags) schedulerNames() ([]string, error) {
	var names []string
	for _, n := range strings.Split(f.schedulers, ",") {
		if n = strings.TrimSpace(n); n == "" {
			continue
		}
		if n != replay.TracePhalanx && n != replay.TracePhalanxNoFGD && n != replay.TracePhalanxConsolidate {
			if _, err := os.Stat(f.kubeScheduler); err != nil {
				fmt.Printf("phalanx-sim trace: skipping %s: no kube-scheduler binary (%v); make bench-bins builds it\n", n, err)
				continue
			}
		}
		names = append(names, n)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("trace: no scheduler to run")
	}
	return names, nil
}

// writeTraceDetails writes each run's per-job table and phalanx's metrics into dir.
func writeTraceDetails(dir string, runs []replay.TraceRun) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, tr := range runs {
		f, err := os.Create(filepath.Join(dir, tr.Scheduler+"-jobs.txt"))
		if err != nil {
			return err
		}
		report.WriteText(f, tr.Result)
		f.Close()
	}
	if err := writePhalanxMetrics(filepath.Join(dir, "phalanx-metrics.txt")); err != nil {
		return err
	}
	fmt.Printf("per-job details: %s/<scheduler>-jobs.txt; the in-process phalanx's own metrics at the end: %s/phalanx-metrics.txt\n", dir, dir)
	return nil
}

func writeTraceHTML(path string, runs []replay.TraceRun) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := replay.WriteTraceHTML(f, runs); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// parseQueues reads name:weight,… into trace queues.
func parseQueues(s string) ([]trace.TraceQueue, error) {
	var out []trace.TraceQueue
	for _, part := range strings.Split(s, ",") {
		name, w, ok := strings.Cut(strings.TrimSpace(part), ":")
		weight, err := strconv.ParseInt(w, 10, 32)
		if !ok || name == "" || err != nil || weight < 1 {
			return nil, fmt.Errorf("%q: want name:weight with a weight of 1 or more", part)
		}
		out = append(out, trace.TraceQueue{Name: name, Weight: int32(weight)})
	}
	return out, nil
}

// parseGangMix reads size:weight,… into a gang-size mix.
func parseGangMix(s string) ([]trace.GangWeight, error) {
	var out []trace.GangWeight
	for _, part := range strings.Split(s, ",") {
		size, w, ok := strings.Cut(strings.TrimSpace(part), ":")
		n, err1 := strconv.Atoi(size)
		weight, err2 := strconv.ParseFloat(w, 64)
		if !ok || err1 != nil || err2 != nil || n < 1 || weight <= 0 {
			return nil, fmt.Errorf("%q: want size:weight with a size of 1 or more and a positive weight", part)
		}
		out = append(out, trace.GangWeight{Size: n, Weight: weight})
	}
	return out, nil
}

// profileReplay writes a CPU profile of the process into dir and a goroutine
// dump every profileEvery, until the returned stop is called.
func profileReplay(ctx context.Context, dir string) (stop func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(dir, "cpu.pprof"))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(profileEvery)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if g, err := os.Create(filepath.Join(dir, fmt.Sprintf("goroutines-%03d.txt", n))); err == nil {
				_ = pprof.Lookup("goroutine").WriteTo(g, 2)
				g.Close()
			}
		}
	}()
	return func() {
		cancel()
		<-done
		pprof.StopCPUProfile()
		f.Close()
		fmt.Printf("profile: %s/cpu.pprof, goroutine dumps every %v\n", dir, profileEvery)
	}, nil
}

// writePhalanxMetrics writes the in-process phalanx's phalanx_* metrics and
// its scheduling queue's (counters summed over its runs) in the text
// exposition format: what its plugins did during the replay, e.g. which
// path woke how many pods, and which events moved pods between queues.
func writePhalanxMetrics(path string) error {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := expfmt.NewEncoder(f, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range families {
		if strings.HasPrefix(mf.GetName(), "phalanx_") || slices.Contains(schedulerQueueMetrics, mf.GetName()) {
			if err := enc.Encode(mf); err != nil {
				f.Close()
				return err
			}
		}
	}
	return f.Close()
}

// schedulerQueueMetrics are the upstream scheduler's metrics of its queue,
// its attempts and its extension points that writePhalanxMetrics keeps.
var schedulerQueueMetrics = []string{"scheduler_queue_incoming_pods_total", "scheduler_schedule_attempts_total",
	"scheduler_scheduling_attempt_duration_seconds", "scheduler_pod_scheduling_attempts",
	"scheduler_framework_extension_point_duration_seconds", "scheduler_scheduling_algorithm_duration_seconds"}

// profileEvery spaces the goroutine dumps of -profile-dir.
const profileEvery = 2 * time.Second
