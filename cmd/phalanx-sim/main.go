// Command phalanx-sim runs scenarios on an in-process cluster with the phalanx
// scheduler (demo), and measures phalanx against the stock kube-scheduler
// profile in the same run (bench), times the Karmada estimator's answers on a
// large member (estimator-bench), measures the Karmada global tier on
// stand-in members (global-bench), and replays a cluster's history with
// several schedulers in turns (trace).
//
//	phalanx-sim demo [-html report.html] [scenario.yaml]
//	phalanx-sim bench [-runs 3] [-profile] [-only gangs,topology,subgroups] [-nodes 5000 ...]
//	phalanx-sim estimator-bench [-phalanx-scheduler bin/phalanx-scheduler] [-nodes 5000] [-gang 1024] [-runs 20] [-profile]
//	phalanx-sim global-bench [-members 3,20] [-runs 5] [-waiting 100,1000] [-weights 2,1,1]
//	phalanx-sim trace -nodes nodes.csv -jobs jobs.csv [-queues queues.csv] [-speed 100] [-schedulers phalanx,stock,upstream-gang]
//	phalanx-sim trace -generate [-seed 1] [-load 1.25] [-node-count 16] [-job-count 200] [-out report/trace]
//	phalanx-sim trace -generate -cliques 8 [-spine-cliques 4] [-subgroup-share 0.2] ...
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/phalanx-sched/phalanx/examples"
	"github.com/phalanx-sched/phalanx/internal/bench"
	"github.com/phalanx-sched/phalanx/internal/bench/estimatorbench"
	"github.com/phalanx-sched/phalanx/internal/bench/host"
	"github.com/phalanx-sched/phalanx/internal/bench/side"
	benchreport "github.com/phalanx-sched/phalanx/internal/bench/side/report"
	"github.com/phalanx-sched/phalanx/internal/sim"
	"github.com/phalanx-sched/phalanx/internal/sim/report"
	"github.com/phalanx-sched/phalanx/internal/sim/scenario"
	"github.com/phalanx-sched/phalanx/internal/version"
)

func main() {
	if version.Requested(os.Args[1:]) {
		fmt.Println(version.String("phalanx-sim"))
		return
	}
	if len(os.Args) < 2 {
		usage()
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	var err error
	switch os.Args[1] {
	case "demo":
		err = demo(ctx, os.Args[2:])
	case "bench":
		err = runBench(ctx, os.Args[2:])
	case "estimator-bench":
		err = runEstimatorBench(ctx, os.Args[2:])
	case "global-bench":
		err = runGlobalBench(ctx, os.Args[2:])
	case "trace":
		err = runTrace(ctx, os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(errOut, "phalanx-sim:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: phalanx-sim demo [scenario.yaml] | bench [flags] | estimator-bench [flags] | global-bench [flags] | trace [flags]")
	os.Exit(2)
}

// quietLogs sends the control plane's klog output to a file, or drops it.
// The embedded etcd client logs through its own logger to stderr, so stderr
// goes there too while the run lasts; phalanx-sim's own errors use the saved
// stderr (errOut).
func quietLogs(path string) (io.Writer, func()) {
	restoreStderr := redirectStderr(path)
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	// Errors of the embedded control plane (no kube-system namespace, loopback
	// endpoints) are expected here; keep them off the terminal.
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	if path == "" {
		klog.SetOutput(io.Discard)
		return io.Discard, func() {}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		klog.SetOutput(io.Discard)
		return io.Discard, restoreStderr
	}
	klog.SetOutput(f)
	return f, func() { restoreStderr(); f.Close() }
}

// errOut is the terminal's stderr, kept while fd 2 is redirected.
var errOut = os.Stderr

func redirectStderr(path string) func() {
	if path == "" {
		path = os.DevNull
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return func() {}
	}
	saved, err := syscall.Dup(2)
	if err != nil {
		f.Close()
		return func() {}
	}
	errOut = os.NewFile(uintptr(saved), "stderr")
	_ = syscall.Dup2(int(f.Fd()), 2)
	f.Close()
	return func() { _ = syscall.Dup2(saved, 2) }
}

func demo(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ExitOnError)
	logFile := fs.String("log", "", "write the control plane's log to this file")
	htmlPath := fs.String("html", "report/phalanx-sim.html", "write the HTML report here (\"\": none)")
	_ = fs.Parse(args)
	raw := examples.Demo
	if fs.NArg() > 0 {
		var err error
		if raw, err = os.ReadFile(fs.Arg(0)); err != nil {
			return err
		}
	}
	suite, err := scenario.Parse(raw)
	if err != nil {
		return err
	}
	logw, closeLog := quietLogs(*logFile)
	defer closeLog()
	fmt.Printf("phalanx-sim: %d scenario(s), each on a fresh in-process cluster\n", len(suite.Scenarios))
	results, err := sim.RunSuite(ctx, suite, sim.Options{Log: logw, Progress: os.Stdout})
	for _, res := range results {
		report.WriteText(os.Stdout, res)
	}
	if *htmlPath != "" && len(results) > 0 {
		if werr := writeHTML(*htmlPath, results); werr != nil {
			return werr
		}
		fmt.Printf("\nHTML report: %s\n", *htmlPath)
	}
	if err != nil {
		return err
	}
	failed := 0
	for _, res := range results {
		failed += len(report.Check(res))
	}
	if failed > 0 {
		return fmt.Errorf("%d expectation(s) not met", failed)
	}
	return nil
}

func writeHTML(path string, results []*sim.Result) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := report.WriteHTML(f, results); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func runBench(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	sz := bench.DefaultSizes
	fs.IntVar(&sz.Nodes, "nodes", sz.Nodes, "nodes for the plain-pod workload")
	fs.IntVar(&sz.Pods, "pods", sz.Pods, "plain pods")
	fs.IntVar(&sz.Gangs, "gangs", sz.Gangs, "gangs")
	fs.IntVar(&sz.GangSize, "gang-size", sz.GangSize, "pods per gang")
	fs.IntVar(&sz.GangNodes, "gang-nodes", sz.GangNodes, "nodes for the gang and queue workloads")
	fs.IntVar(&sz.TopologyNodes, "topology-nodes", sz.TopologyNodes, "nodes (3 network levels) for the topology workload")
	fs.IntVar(&sz.TopologyGang, "topology-gang", sz.TopologyGang, "members of the topology-constrained gang")
	fs.IntVar(&sz.Queues, "queues", sz.Queues, "queues (weights 1..n) the queue workload's gangs are spread over")
	fs.IntVar(&sz.DRAGangSize, "dra-gang-size", sz.DRAGangSize, "pods per gang of the DRA workload (on -gang-nodes, -gangs gangs)")
	fs.IntVar(&sz.SubGroupNodes, "subgroup-nodes", sz.SubGroupNodes, fmt.Sprintf("GB200-class nodes (%d GPUs, %d per NVLink clique, %d cliques per spine) for the sub-group workload", bench.CliqueNodeGPUs, bench.CliqueNodes, bench.SpineCliques))
	fs.IntVar(&sz.SubGroupGang, "subgroup-gang", sz.SubGroupGang, "members (1 GPU each) of the sub-group workload's gang")
	fs.IntVar(&sz.SubGroupSize, "subgroup-size", sz.SubGroupSize, "members per sub-group (each required inside one NVLink clique); must divide -subgroup-gang")
	fs.IntVar(&sz.ScaleNodes, "scale-nodes", sz.ScaleNodes, "nodes (IB clusters of 512, leaves of 16) for the scale workload")
	fs.IntVar(&sz.ScaleGangs, "scale-gangs", sz.ScaleGangs, "gangs of 8 to 256 members (1 GPU each, one in 3 required one IB cluster) in the scale workload")
	fs.IntVar(&sz.ScalePods, "scale-pods", sz.ScalePods, "plain CPU pods mixed into the scale workload")
	only := fs.String("only", "", "comma-separated workloads to run (plain-pods, gangs, topology, queues, dra-gangs, subgroups, scale); default all")
	schedulers := fs.String("schedulers", "", "comma-separated schedulers to run (stock, upstream-gang, phalanx, phalanx-flat, raw-bind); default every one the workload compares")
	runs := fs.Int("runs", 3, "timed passes per scheduler and workload (medians and ranges over these)")
	profile := fs.Bool("profile", false, "add a profiled pass per scheduler: CPU and block profiles, top functions")
	profileDir := fs.String("profile-dir", "report/profiles", "keep the raw profiles here (\"\": don't)")
	kubeScheduler := fs.String("kube-scheduler", "bin/kube-scheduler", "upstream kube-scheduler binary (make bench builds it)")
	phalanxScheduler := fs.String("phalanx-scheduler", "bin/phalanx-scheduler", "phalanx-scheduler binary")
	logFile := fs.String("log", "", "write the control plane's log to this file")
	_ = fs.Parse(args)
	for _, b := range []string{*kubeScheduler, *phalanxScheduler} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("scheduler binary: %w (make bench builds it)", err)
		}
	}
	if sz.SubGroupSize <= 0 || sz.SubGroupGang%sz.SubGroupSize != 0 {
		return fmt.Errorf("-subgroup-size %d must be > 0 and divide -subgroup-gang %d", sz.SubGroupSize, sz.SubGroupGang)
	}
	workloads := bench.Workloads(sz)
	if *only != "" {
		// In the order given, so the workload that matters most runs first.
		var picked []bench.Workload
		for _, name := range strings.Split(*only, ",") {
			if i := slices.IndexFunc(workloads, func(w bench.Workload) bool { return w.Name == name }); i >= 0 {
				picked = append(picked, workloads[i])
			} else {
				return fmt.Errorf("-only: no workload %q", name)
			}
		}
		workloads = picked
	}
	var picked []bench.Scheduler
	if *schedulers != "" {
		for _, name := range strings.Split(*schedulers, ",") {
			s := bench.Scheduler(name)
			if !slices.Contains(bench.AllSchedulers, s) {
				return fmt.Errorf("-schedulers: no scheduler %q (want one of %v)", name, bench.AllSchedulers)
			}
			picked = append(picked, s)
		}
	}
	logw, closeLog := quietLogs(*logFile)
	defer closeLog()
	machine := host.Machine()
	start := time.Now()
	fmt.Printf("phalanx-sim bench: %d workload(s), %d timed pass(es) each; %s; load %s\n", len(workloads), *runs, machine, host.LoadAverage())
	results, err := side.Run(ctx, workloads, side.Options{
		Runs: *runs, Profile: *profile, ProfileDir: *profileDir,
		Binaries:   side.Binaries{KubeScheduler: *kubeScheduler, Phalanx: *phalanxScheduler},
		Schedulers: picked,
		Log:        logw, Progress: os.Stdout,
		Done: func(r side.Result) { benchreport.WriteDetails(os.Stdout, r) },
	})
	benchreport.WriteReport(os.Stdout, results, machine, *runs)
	fmt.Printf("\nbench took %s; load at the end %s\n", time.Since(start).Round(time.Second), host.LoadAverage())
	return err
}

func runEstimatorBench(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("estimator-bench", flag.ExitOnError)
	var o estimatorbench.Options
	fs.StringVar(&o.PhalanxBinary, "phalanx-scheduler", "bin/phalanx-scheduler", "phalanx-scheduler binary")
	fs.IntVar(&o.Nodes, "nodes", 5000, "nodes of the member cluster (8 GPUs each, half of them taken)")
	fs.IntVar(&o.GangSize, "gang", 1024, "pods per set: one master and gang-1 GPU workers")
	fs.IntVar(&o.Runs, "runs", 20, "timed calls per case, after one warm-up call")
	fs.DurationVar(&o.Timeout, "timeout", 3*time.Second, "timeout of each call (karmada-scheduler's --scheduler-estimator-timeout)")
	fs.BoolVar(&o.Profile, "profile", false, "also call each case back to back under the scheduler's CPU profiler; print the top functions")
	fs.IntVar(&o.ProfileSeconds, "profile-seconds", 6, "seconds of profiled calls per case")
	fs.StringVar(&o.ProfileDir, "profile-dir", "report/profiles", "keep the raw profiles here (\"\": don't)")
	logFile := fs.String("log", "", "write the control plane's log to this file")
	_ = fs.Parse(args)
	if _, err := os.Stat(o.PhalanxBinary); err != nil {
		return fmt.Errorf("scheduler binary: %w (make bench-estimator builds it)", err)
	}
	command := strings.Join(os.Args, " ")
	logw, closeLog := quietLogs(*logFile)
	defer closeLog()
	o.Log, o.Progress = logw, os.Stdout
	machine := host.Machine()
	fmt.Printf("phalanx-sim estimator-bench: %d nodes, %d-pod sets, %d calls per case; %s; load %s\n", o.Nodes, o.GangSize, o.Runs, machine, host.LoadAverage())
	rep, err := estimatorbench.Run(ctx, o)
	estimatorbench.WriteReport(os.Stdout, rep, machine, command)
	fmt.Printf("\nestimator-bench took %s; load at the end %s\n", rep.Wall.Round(time.Second), host.LoadAverage())
	return err
}
