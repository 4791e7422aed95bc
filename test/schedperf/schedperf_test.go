// Package schedperf runs the benchmark workloads of internal/bench through
// upstream's scheduler_perf (k8s.io/kubernetes/test/integration/scheduler_perf)
// with phalanx's plugins as its out-of-tree registry, so the figures can be
// read next to upstream's published thresholds. `make bench-perf` runs it;
// the summary table is printed at the end.
//
// scheduler_perf starts etcd by exec'ing "etcd" from PATH: make puts
// bin/etcd (test/schedperf/etcd, the embedded etcd server) there.
package schedperf

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	_ "k8s.io/component-base/logs/json/register"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"
	"k8s.io/kubernetes/test/utils/client-go/ktesting"

	"github.com/phalanx-sched/phalanx/internal/bench"
	"github.com/phalanx-sched/phalanx/internal/bench/host"
	benchperf "github.com/phalanx-sched/phalanx/internal/bench/perf"
	"github.com/phalanx-sched/phalanx/internal/bench/stats"
	"github.com/phalanx-sched/phalanx/plugins"
)

var (
	sizes      = bench.DefaultSizes
	resultsDir = flag.String("results-dir", "", "keep scheduler_perf's data items of each pass here (default: a temporary directory)")
	passes     int
)

func init() {
	flag.IntVar(&sizes.Nodes, "nodes", sizes.Nodes, "nodes for the plain-pod workload")
	flag.IntVar(&sizes.Pods, "pods", sizes.Pods, "plain pods")
	flag.IntVar(&sizes.Gangs, "gangs", sizes.Gangs, "gangs")
	flag.IntVar(&sizes.GangSize, "gang-size", sizes.GangSize, "pods per gang")
	flag.IntVar(&sizes.GangNodes, "gang-nodes", sizes.GangNodes, "nodes for the gang and queue workloads")
	flag.IntVar(&sizes.TopologyNodes, "topology-nodes", sizes.TopologyNodes, "nodes for the topology workload")
	flag.IntVar(&sizes.TopologyGang, "topology-gang", sizes.TopologyGang, "members of the topology gang")
	flag.IntVar(&sizes.Queues, "queues", sizes.Queues, "queues of the queue workload")
}

func TestMain(m *testing.M) {
	if err := perf.InitTests(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Collect the phalanx and in-tree workload plugins' latencies too.
	perf.PluginNames = append(perf.PluginNames, "Coscheduling", "CapacityQueue", "NetworkTopology", "NUMATopology",
		"GangScheduling", "TopologyPlacementGenerator", "PodGroupPodsCount", "NodeDeclaredFeatures")
	code := m.Run()
	// Also summarises the passes of an earlier run given with -results-dir.
	if _, err := os.Stat(filepath.Join(*resultsDir, "pass-1")); *resultsDir != "" && err == nil {
		if err := summarise(os.Stdout, *resultsDir); err != nil {
			fmt.Fprintln(os.Stderr, "summary:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// BenchmarkPerfScheduling runs every workload × scheduler as a scheduler_perf
// test case; -count=N repeats them, each pass keeping its data items apart.
func BenchmarkPerfScheduling(b *testing.B) {
	if *resultsDir == "" {
		dir, err := os.MkdirTemp("", "phalanx-schedperf-")
		if err != nil {
			b.Fatal(err)
		}
		*resultsDir = dir
	}
	config, err := benchperf.Render(filepath.Join(*resultsDir, "config"), bench.Workloads(sizes))
	if err != nil {
		b.Fatal(err)
	}
	passes++
	if err := flag.Set("data-items-dir", filepath.Join(*resultsDir, fmt.Sprintf("pass-%d", passes))); err != nil {
		b.Fatal(err)
	}
	perf.RunBenchmarkPerfScheduling(b, config, "phalanx", registry(b), perf.WithNodeUpdateFn(publishNRTs))
}

// registry is phalanx's plugin registry (plugins.Options, as the binary
// uses it), each factory installing the CRDs first: scheduler_perf builds
// the scheduler before any hook can create objects.
func registry(b *testing.B) frameworkruntime.Registry {
	reg := frameworkruntime.Registry{}
	for _, o := range plugins.Options(b.Context()) {
		if err := o(reg); err != nil {
			b.Fatal(err)
		}
	}
	for name, factory := range reg {
		reg[name] = func(ctx context.Context, args runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			if err := benchperf.InstallCRDs(ctx, h.KubeConfig()); err != nil {
				return nil, fmt.Errorf("installing CRDs for %s: %w", name, err)
			}
			return factory(ctx, args, h)
		}
	}
	return reg
}

func publishNRTs(tCtx ktesting.TContext, _ *scheduler.Scheduler, _ *perf.Workload, nodes *v1.NodeList) error {
	if err := benchperf.InstallCRDs(tCtx, tCtx.RESTConfig()); err != nil {
		return err
	}
	return benchperf.PublishNRTs(tCtx, tCtx.RESTConfig(), nodes.Items)
}

type dataItems struct {
	DataItems []struct {
		Data   map[string]float64 `json:"data"`
		Unit   string             `json:"unit"`
		Labels map[string]string  `json:"labels"`
	} `json:"dataItems"`
}

// figures reads, per test case and pass, SchedulingThroughput Average (the
// mean of scheduler_perf's one-second samples, the metric of its
// thresholds) and SchedulingDuration (from the start of pod creation until
// every pod is scheduled): result[metric][testCase][pass].
func figures(root string) (map[string]map[string]map[int]float64, int, error) {
	out := map[string]map[string]map[int]float64{}
	n := 0
	for pass := 1; ; pass++ {
		dir := filepath.Join(root, fmt.Sprintf("pass-%d", pass))
		if _, err := os.Stat(dir); err != nil {
			break
		}
		n = pass
		files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				return nil, 0, err
			}
			var items dataItems
			if err := json.Unmarshal(raw, &items); err != nil {
				return nil, 0, fmt.Errorf("%s: %w", f, err)
			}
			for _, it := range items.DataItems {
				metric, bucket := it.Labels["Metric"], ""
				switch metric {
				case "SchedulingThroughput":
					bucket = "Average"
				case "SchedulingDuration":
					bucket = "Duration"
				default:
					continue
				}
				// Name is BenchmarkPerfScheduling/<test case>/<workload>/<namespace>.
				parts := strings.Split(it.Labels["Name"], "/")
				if len(parts) < 2 {
					continue
				}
				tc := parts[1]
				if out[metric] == nil {
					out[metric] = map[string]map[int]float64{}
				}
				if out[metric][tc] == nil {
					out[metric][tc] = map[int]float64{}
				}
				out[metric][tc][pass] = it.Data[bucket]
			}
		}
	}
	return out, n, nil
}

func spread(m map[int]float64, f func(float64) float64) stats.Spread {
	var v []float64
	for _, x := range m {
		v = append(v, f(x))
	}
	return stats.SpreadOf(v)
}

func summarise(w *os.File, root string) error {
	fig, n, err := figures(root)
	if err != nil {
		return err
	}
	tp, dur := fig["SchedulingThroughput"], fig["SchedulingDuration"]
	fmt.Fprintf(w, "\nscheduler_perf (upstream's harness; each test case on its own etcd, API server and in-process scheduler)\n")
	fmt.Fprintf(w, "median (min–max) over %d pass(es); %s; load %s; data items in %s\n", n, host.Machine(), host.LoadAverage(), root)
	fmt.Fprintf(w, "throughput: SchedulingThroughput Average (mean of 1 s samples; upstream's threshold metric); overall: pods / SchedulingDuration\n\n")
	fmt.Fprintf(w, "%-11s %-14s %-36s %-20s %-20s %s\n", "WORKLOAD", "SCHEDULER", "scheduler_perf test", "throughput pods/s", "overall pods/s", "upstream threshold")
	ratio := func(m map[string]map[int]float64, tcA, tcB string, f func(float64) float64) stats.Spread {
		var v []float64
		for pass, a := range m[tcA] {
			if b, ok := m[tcB][pass]; ok && f(b) > 0 {
				v = append(v, f(a)/f(b))
			}
		}
		return stats.SpreadOf(v)
	}
	var ratios []string
	for _, wl := range bench.Workloads(sizes) {
		overall := func(d float64) float64 { return float64(wl.Total()) / d }
		same := func(x float64) float64 { return x }
		for _, s := range wl.Schedulers() {
			tc := benchperf.TestCase(wl, s)
			if len(dur[tc]) == 0 {
				continue
			}
			threshold := "-"
			if t, ok := benchperf.UpstreamThresholds[wl.Name]; ok && wl.Nodes == 5000 {
				threshold = fmt.Sprintf("%.0f (SchedulingBasic/5000Nodes_10000Pods)", t)
			}
			fmt.Fprintf(w, "%-11s %-14s %-36s %-20s %-20s %s\n", wl.Name, s, tc+"/"+benchperf.WorkloadName(wl),
				spread(tp[tc], same).Format("%.0f"), spread(dur[tc], overall).Format("%.0f"), threshold)
		}
		for _, other := range []bench.Scheduler{bench.Stock, bench.UpstreamGang} {
			a, b := benchperf.TestCase(wl, bench.Phalanx), benchperf.TestCase(wl, other)
			if sp := ratio(dur, a, b, overall); !math.IsNaN(sp.Median) {
				ratios = append(ratios, fmt.Sprintf("  %-11s phalanx / %-14s throughput %-20s overall %s", wl.Name, other,
					ratio(tp, a, b, same).Format("%.2f"), sp.Format("%.2f")))
			}
		}
	}
	if len(ratios) > 0 {
		fmt.Fprintf(w, "\nRatios, pass by pass (each scheduler on its own control plane):\n%s\n", strings.Join(ratios, "\n"))
	}
	return nil
}

// TestRenderPerf checks that the rendered scheduler_perf config is complete:
// one test case per workload and scheduler, each with nodes, its gang
// objects and measured pods (the benchmark itself runs in make bench-perf).
func TestRenderPerf(t *testing.T) {
	dir := t.TempDir()
	path, err := benchperf.Render(dir, bench.Workloads(sizes))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"gangs_upstream-gang", "gangs_phalanx", "topology_phalanx", "plain-pods_stock", "createAny", "collectMetrics: true"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("config lacks %q", want)
		}
	}
	pod, err := os.ReadFile(filepath.Join(dir, "gangs_upstream-gang-pod.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(pod), "schedulingGroup") || !strings.Contains(string(pod), "DivideInt .Index 64") {
		t.Errorf("upstream gang pod template lacks its templated schedulingGroup:\n%s", pod)
	}
}
