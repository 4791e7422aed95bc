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
)

func runTrace(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("trace", flag.ExitOnError)
	nodes := fs.String("nodes", "", "node CSV (docs/simulator.md)")
	jobs := fs.String("jobs", "", "job CSV")
	queues := fs.String("queues", "", "queue CSV (optional; queues named by jobs get weight 1)")
	speed := fs.Float64("speed", 100, "time compression: trace seconds per second of the replay")
	timeout := fs.Duration("timeout", 0, "bound each replay (default: twice the compressed horizon plus a minute)")
	schedulers := fs.String("schedulers", "phalanx,phalanx-no-fgd,stock,upstream-gang", "schedulers to replay with, in turns")
	kubeScheduler := fs.String("kube-scheduler", "bin/kube-scheduler", "upstream kube-scheduler binary for stock and upstream-gang (make bench-bins builds it); without it only phalanx runs")
	htmlPath := fs.String("html", "report/trace.html", "write the HTML report here (\"\": none)")
	logFile := fs.String("log", "", "write the control plane's log to this file")
	scaleTimers := fs.Bool("scale-timers", true, "divide phalanx's reservation, minimum-runtime and half-life timers by -speed, so they keep their meaning in trace time")
	config := fs.String("config", "", "phalanx's KubeSchedulerConfiguration for phalanx and phalanx-no-fgd (default: manifests/scheduler-config.yaml); with -scale-timers it must set the three scaled timers")
	details := fs.String("details", "", "write each replay's per-job table (the demo's text report) into this directory")
	profileDir := fs.String("profile-dir", "", "write a CPU profile of the whole replay (control plane, kwok and the in-process phalanx) and a goroutine dump every 2 s of the run into this directory (what the scheduling loop was doing while jobs waited)")
	runTimeLimit := fs.Float64("run-time-limit", 0, "give each pod activeDeadlineSeconds of this many times its run time (e.g. 1.5), as jobs with time limits declare; phalanx backfills reservations with such pods; 0: none")
	gen := sim.DefaultGenOptions
	generate := fs.Bool("generate", false, "generate the trace from the openb shapes (examples/trace) instead of reading -nodes/-jobs")
	fs.Int64Var(&gen.Seed, "seed", gen.Seed, "generator seed")
	fs.Float64Var(&gen.Load, "load", gen.Load, "generator: offered GPU load")
	fs.IntVar(&gen.Nodes, "node-count", gen.Nodes, "generator: nodes")
	fs.IntVar(&gen.Jobs, "job-count", gen.Jobs, "generator: jobs")
	fs.IntVar(&gen.LeafSize, "leaf-size", gen.LeafSize, "generator: nodes per leaf switch")
	fs.Float64Var(&gen.TopologyShare, "topology-share", gen.TopologyShare, "generator: fraction of gangs that require one leaf (with -cliques: one nvlink-clique)")
	fs.IntVar(&gen.IBLeaves, "ib-leaves", 0, "generator: an InfiniBand-cluster level above the leaves, this many leaves per IB cluster (level ib-cluster); 0: none")
	fs.Float64Var(&gen.IBShare, "ib-share", 0, "generator, with -ib-leaves: fraction of gangs that require one ib-cluster (drawn from those that do not require a leaf)")
	fs.Int64Var(&gen.NodeGPUs, "node-gpus", 0, "generator: only openb node shapes with this many GPUs (e.g. 8); 0: all shapes in their proportions")
	fs.IntVar(&gen.Cliques, "cliques", 0, fmt.Sprintf("generator: a GB200 NVL72-class cluster of this many NVLink cliques of %d nodes × %d GPUs, under spines (instead of -node-count openb nodes in leaves); 0: off", sim.CliqueNodes, sim.GB200Node.GPUs))
	fs.IntVar(&gen.SpineCliques, "spine-cliques", gen.SpineCliques, "generator, with -cliques: NVLink cliques per spine")
	fs.Float64Var(&gen.SubGroupShare, "subgroup-share", gen.SubGroupShare, "generator, with -cliques: fraction of multi-node gangs (more GPUs than a node) made tensor-parallel: the gang inside one spine, sub-groups each inside one nvlink-clique")
	gangMix := fs.String("gang-mix", "", "generator: gang sizes and their weights, size:weight,… (default 1:0.6,2:0.15,4:0.15,8:0.1; size 1 is a single pod)")
	genQueues := fs.String("gen-queues", "", "generator: the queues jobs are drawn into, name:weight,… (default team-a:1,team-b:2)")
	out := fs.String("out", "report/trace", "generator: write nodes.csv, jobs.csv and queues.csv here")
	noRun := fs.Bool("no-run", false, "generator: write the CSVs and stop")
	_ = fs.Parse(args)

	var t *sim.Trace
	var err error
	if *gangMix != "" {
		if gen.GangMix, err = parseGangMix(*gangMix); err != nil {
			return fmt.Errorf("-gang-mix: %w", err)
		}
	}
	if *genQueues != "" {
		if gen.Queues, err = parseQueues(*genQueues); err != nil {
			return fmt.Errorf("-gen-queues: %w", err)
		}
	}
	if *generate {
		sh, err := sim.OpenbShapes()
		if err != nil {
			return err
		}
		if t, err = sim.Generate(sh, gen); err != nil {
			return err
		}
		if err := t.WriteFiles(*out); err != nil {
			return err
		}
		fmt.Printf("phalanx-sim trace: generated %d nodes (%d GPUs), %d jobs, offered load %.2f, horizon %.0fs (seed %d) into %s\n",
			len(t.Nodes), t.GPUs(), len(t.Jobs), t.OfferedLoad(), t.Horizon(), gen.Seed, *out)
		if *noRun {
			return nil
		}
	} else {
		if *nodes == "" || *jobs == "" {
			return fmt.Errorf("trace: -nodes and -jobs are required (or -generate)")
		}
		if t, err = sim.ReadTraceFiles(*nodes, *jobs, *queues); err != nil {
			return err
		}
	}
	var names []string
	for _, n := range strings.Split(*schedulers, ",") {
		if n = strings.TrimSpace(n); n == "" {
			continue
		}
		if n != sim.TracePhalanx && n != sim.TracePhalanxNoFGD && n != sim.TracePhalanxConsolidate {
			if _, err := os.Stat(*kubeScheduler); err != nil {
				fmt.Printf("phalanx-sim trace: skipping %s: no kube-scheduler binary (%v); make bench-bins builds it\n", n, err)
				continue
			}
		}
		names = append(names, n)
	}
	if len(names) == 0 {
		return fmt.Errorf("trace: no scheduler to run")
	}
	var phalanxConfig []byte
	if *config != "" {
		if phalanxConfig, err = os.ReadFile(*config); err != nil {
			return err
		}
	}
	logw, closeLog := quietLogs(*logFile)
	defer closeLog()
	if *profileDir != "" {
		stop, err := profileReplay(ctx, *profileDir)
		if err != nil {
			return err
		}
		defer stop()
	}
	start := time.Now()
	runs, err := sim.ReplayTrace(ctx, t, names, sim.ReplayOptions{
		Options: sim.Options{Log: logw, Progress: os.Stdout, SchedulerConfig: phalanxConfig, RunTimeLimit: *runTimeLimit},
		Speed:   *speed, Timeout: *timeout, KubeScheduler: *kubeScheduler, ScaleTimers: *scaleTimers,
	})
	sim.WriteTraceText(os.Stdout, runs)
	if *details != "" {
		if err := os.MkdirAll(*details, 0o755); err != nil {
			return err
		}
		for _, tr := range runs {
			f, err := os.Create(filepath.Join(*details, tr.Scheduler+"-jobs.txt"))
			if err != nil {
				return err
			}
			tr.Result.WriteText(f)
			f.Close()
		}
		if err := writePhalanxMetrics(filepath.Join(*details, "phalanx-metrics.txt")); err != nil {
			return err
		}
		fmt.Printf("per-job details: %s/<scheduler>-jobs.txt; the in-process phalanx's own metrics at the end: %s/phalanx-metrics.txt\n", *details, *details)
	}
	if *htmlPath != "" && len(runs) > 0 {
		if werr := writeTraceHTML(*htmlPath, runs); werr != nil {
			return werr
		}
		fmt.Printf("\nHTML report: %s\n", *htmlPath)
	}
	fmt.Printf("trace took %s\n", time.Since(start).Round(time.Second))
	return err
}

func writeTraceHTML(path string, runs []sim.TraceRun) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := sim.WriteTraceHTML(f, runs); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// parseQueues reads name:weight,… into trace queues.
func parseQueues(s string) ([]sim.TraceQueue, error) {
	var out []sim.TraceQueue
	for _, part := range strings.Split(s, ",") {
		name, w, ok := strings.Cut(strings.TrimSpace(part), ":")
		weight, err := strconv.ParseInt(w, 10, 32)
		if !ok || name == "" || err != nil || weight < 1 {
			return nil, fmt.Errorf("%q: want name:weight with a weight of 1 or more", part)
		}
		out = append(out, sim.TraceQueue{Name: name, Weight: int32(weight)})
	}
	return out, nil
}

// parseGangMix reads size:weight,… into a gang-size mix.
func parseGangMix(s string) ([]sim.GangWeight, error) {
	var out []sim.GangWeight
	for _, part := range strings.Split(s, ",") {
		size, w, ok := strings.Cut(strings.TrimSpace(part), ":")
		n, err1 := strconv.Atoi(size)
		weight, err2 := strconv.ParseFloat(w, 64)
		if !ok || err1 != nil || err2 != nil || n < 1 || weight <= 0 {
			return nil, fmt.Errorf("%q: want size:weight with a size of 1 or more and a positive weight", part)
		}
		out = append(out, sim.GangWeight{Size: n, Weight: weight})
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
