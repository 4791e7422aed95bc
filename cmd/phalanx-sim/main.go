// Command phalanx-sim runs scenarios on an in-process cluster with the phalanx
// scheduler (demo), and measures phalanx against the stock kube-scheduler
// profile in the same run (bench).
//
//	phalanx-sim demo [-html report.html] [scenario.yaml]
//	phalanx-sim bench [-nodes 5000 -pods 10000 ...]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/phalanx-sched/phalanx/examples"
	"github.com/phalanx-sched/phalanx/internal/sim"
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
		err = bench(ctx, os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(errOut, "phalanx-sim:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: phalanx-sim demo [scenario.yaml] | bench [flags]")
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
	suite, err := sim.Parse(raw)
	if err != nil {
		return err
	}
	logw, closeLog := quietLogs(*logFile)
	defer closeLog()
	fmt.Printf("phalanx-sim: %d scenario(s), each on a fresh in-process cluster\n", len(suite.Scenarios))
	results, err := sim.RunSuite(ctx, suite, sim.Options{Log: logw, Progress: os.Stdout})
	for _, res := range results {
		res.WriteText(os.Stdout)
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
		failed += len(res.Check())
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
	if err := sim.WriteHTML(f, results); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func bench(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	nodes := fs.Int("nodes", 5000, "nodes for the plain-pod workload")
	pods := fs.Int("pods", 10000, "plain pods")
	gangs := fs.Int("gangs", 100, "gangs")
	gangSize := fs.Int("gang-size", 64, "pods per gang")
	gangNodes := fs.Int("gang-nodes", 1000, "nodes for the gang workload")
	topoNodes := fs.Int("topology-nodes", 4096, "nodes (3 network levels) for the topology workload")
	topoGang := fs.Int("topology-gang", 1024, "members of the topology-constrained gang")
	queues := fs.Int("queues", 4, "queues (weights 1..n) the queue workload's gangs are spread over")
	only := fs.String("only", "", "run only this workload (plain-pods, gangs, topology, queues)")
	logFile := fs.String("log", "", "write the control plane's log to this file")
	_ = fs.Parse(args)
	logw, closeLog := quietLogs(*logFile)
	defer closeLog()
	var workloads []sim.Workload
	for _, w := range []sim.Workload{
		{Name: "plain-pods", Nodes: *nodes, Pods: *pods, CPU: "100m"},
		{Name: "gangs", Nodes: *gangNodes, Gangs: *gangs, GangSize: *gangSize, CPU: "1"},
		// One gang of 4 GPUs per member, required inside one IB cluster.
		{Name: "topology", Nodes: *topoNodes, Gangs: 1, GangSize: *topoGang, CPU: "1", GPUs: 4, Topology: true, RequiredLevel: "ib-cluster"},
		// The gang workload again, its gangs spread over weighted queues.
		{Name: "queues", Nodes: *gangNodes, Gangs: *gangs, GangSize: *gangSize, CPU: "1", Queues: *queues},
	} {
		if *only == "" || *only == w.Name {
			workloads = append(workloads, w)
		}
	}
	results, err := sim.Bench(ctx, workloads, logw, os.Stdout)
	fmt.Printf("\n%-12s %7s %7s %14s %14s %8s %14s\n", "WORKLOAD", "NODES", "PODS", "STOCK pods/s", "PHALANX pods/s", "RATIO", "PLAN ms/gang")
	for _, r := range results {
		pods := r.Workload.Pods
		if r.Workload.GangSize > 0 {
			pods = r.Workload.Gangs * r.Workload.GangSize
		}
		plan := "-"
		if r.PlanSeconds > 0 {
			plan = fmt.Sprintf("%.1f", r.PlanSeconds*1000)
		}
		fmt.Printf("%-12s %7d %7d %14.0f %14.0f %8.2f %14s\n", r.Workload.Name, r.Workload.Nodes, pods, r.StockPodsPerS, r.PhalanxPerS, r.Ratio(), plan)
	}
	return err
}
