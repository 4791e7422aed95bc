package sim

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/legacyregistry"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
	"github.com/phalanx-sched/phalanx/manifests"
)

// StockConfig is kube-scheduler's default profile with the same client limits
// as the canonical phalanx config, so the comparison is about scheduling.
var StockConfig = []byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  qps: 500
  burst: 1000
profiles:
- schedulerName: stock-scheduler
`)

// Workload is one benchmark case.
type Workload struct {
	Name  string
	Nodes int
	// Gangs × GangSize pods when GangSize > 0, else Pods plain pods.
	Pods     int
	Gangs    int
	GangSize int
	CPU      string // per pod
	GPUs     int64  // per pod
	// Topology labels nodes in 3 levels (ib-cluster of 512 nodes, leaf of 16,
	// host) and asks gangs for RequiredLevel.
	Topology      bool
	RequiredLevel string
	// Queues spreads the gangs round-robin over this many queues with
	// weights 1..Queues (the stock scheduler ignores them).
	Queues int
}

// BenchResult is one workload through both schedulers.
type BenchResult struct {
	Workload      Workload
	StockPodsPerS float64
	PhalanxPerS   float64
	// PlanSeconds is the mean time phalanx took to plan one gang (filters
	// over all nodes included), from phalanx_gang_plan_duration_seconds.
	PlanSeconds float64
}

// Ratio is phalanx throughput over stock.
func (b BenchResult) Ratio() float64 {
	if b.StockPodsPerS == 0 {
		return 0
	}
	return b.PhalanxPerS / b.StockPodsPerS
}

// Bench runs each workload on its own cluster: first through the stock
// profile, then through phalanx, against the same API server and nodes.
func Bench(ctx context.Context, workloads []Workload, log io.Writer, progress io.Writer) ([]BenchResult, error) {
	var out []BenchResult
	for _, w := range workloads {
		r, err := benchOne(ctx, w, log, progress)
		if err != nil {
			return out, fmt.Errorf("%s: %w", w.Name, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func benchOne(ctx context.Context, w Workload, log io.Writer, progress io.Writer) (res BenchResult, err error) {
	res.Workload = w
	runner := testcluster.NewRunner(w.Name, log)
	defer runner.Close()
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(testcluster.FatalError)
			if !ok {
				panic(r)
			}
			err = f
		}
	}()
	c, err := testcluster.Start(runner, testcluster.Options{})
	if err != nil {
		return res, err
	}
	fmt.Fprintf(progress, "%s: creating %d nodes\n", w.Name, w.Nodes)
	if err := parallel(ctx, w.Nodes, func(i int) error {
		spec := testcluster.NodeSpec{Name: fmt.Sprintf("node-%d", i), CPU: "32", Memory: "256Gi", GPUs: 8, Pods: 110, NRTPolicy: "none"}
		if w.Topology {
			spec.Labels = map[string]string{ibLabel: fmt.Sprintf("ib-%d", i/512), leafLabel: fmt.Sprintf("leaf-%d", i/16)}
		}
		return c.CreateNodes(ctx, spec)
	}); err != nil {
		return res, err
	}
	if w.Topology {
		nt := &phalanxv1alpha1.NetworkTopology{
			ObjectMeta: metav1.ObjectMeta{Name: phalanxv1alpha1.DefaultNetworkTopologyName},
			Spec: phalanxv1alpha1.NetworkTopologySpec{Levels: []phalanxv1alpha1.TopologyLevel{
				{Name: "ib-cluster", NodeLabel: ibLabel}, {Name: "leaf", NodeLabel: leafLabel}, {Name: "host", NodeLabel: v1.LabelHostname},
			}},
		}
		if _, err := c.Phalanx.SchedulingV1alpha1().NetworkTopologies().Create(ctx, nt, metav1.CreateOptions{}); err != nil {
			return res, err
		}
	}
	for q := 0; q < w.Queues; q++ {
		queue := &phalanxv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("queue-%d", q)}, Spec: phalanxv1alpha1.QueueSpec{Weight: int32(q + 1)}}
		if _, err := c.Phalanx.SchedulingV1alpha1().Queues().Create(ctx, queue, metav1.CreateOptions{}); err != nil {
			return res, err
		}
	}
	planBefore := planStats()
	for _, run := range []struct {
		name, scheduler string
		config          []byte
		into            *float64
	}{
		{"stock kube-scheduler", "stock-scheduler", StockConfig, &res.StockPodsPerS},
		{"phalanx", "phalanx-scheduler", manifests.SchedulerConfig, &res.PhalanxPerS},
	} {
		ns := "bench-" + run.scheduler
		if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return res, err
		}
		total, err := createWorkload(ctx, c, w, ns, run.scheduler)
		if err != nil {
			return res, err
		}
		fmt.Fprintf(progress, "%s: %d pods through %s\n", w.Name, total, run.name)
		start := time.Now()
		s, err := c.StartScheduler(run.config)
		if err != nil {
			return res, err
		}
		perS, err := measure(ctx, c, ns, total, start)
		if stopErr := s.Stop(); err == nil {
			err = stopErr
		}
		if err != nil {
			return res, err
		}
		*run.into = perS
		fmt.Fprintf(progress, "%s: %s %.0f pods/s\n", w.Name, run.name, perS)
		if run.scheduler == "phalanx-scheduler" {
			after := planStats()
			if n := after.count - planBefore.count; n > 0 {
				res.PlanSeconds = (after.sum - planBefore.sum) / n
			}
		}
		if err := c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{}); err != nil {
			return res, err
		}
	}
	return res, nil
}

const (
	ibLabel   = "network.example.com/ib-cluster"
	leafLabel = "network.example.com/leaf"
)

type histogram struct{ sum, count float64 }

// planStats reads phalanx_gang_plan_duration_seconds from this process's
// registry (the scheduler runs in-process).
func planStats() histogram {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return histogram{}
	}
	for _, f := range families {
		if f.GetName() == "phalanx_gang_plan_duration_seconds" {
			for _, m := range f.GetMetric() {
				return histogram{sum: m.GetHistogram().GetSampleSum(), count: float64(m.GetHistogram().GetSampleCount())}
			}
		}
	}
	return histogram{}
}

// createWorkload creates the pods (and PodGroups) before the scheduler
// starts, so the measurement is scheduling, not pod creation.
func createWorkload(ctx context.Context, c *testcluster.Cluster, w Workload, ns, scheduler string) (int, error) {
	if w.GangSize > 0 {
		for g := 0; g < w.Gangs; g++ {
			pg := testcluster.PodGroup(ns, fmt.Sprintf("gang-%d", g), int32(w.GangSize))
			if w.RequiredLevel != "" {
				pg.Annotations = map[string]string{phalanxv1alpha1.TopologyRequiredAnnotation: w.RequiredLevel}
			}
			if w.Queues > 0 {
				pg.Labels = map[string]string{phalanxv1alpha1.QueueLabel: fmt.Sprintf("queue-%d", g%w.Queues)}
			}
			if err := c.CreatePodGroup(ctx, pg); err != nil {
				return 0, err
			}
		}
		total := w.Gangs * w.GangSize
		return total, parallel(ctx, total, func(i int) error {
			return c.CreatePods(ctx, testcluster.PodSpec{
				Name: fmt.Sprintf("gang-%d-%d", i/w.GangSize, i%w.GangSize), Namespace: ns, SchedulerName: scheduler,
				CPU: w.CPU, GPUs: w.GPUs, PodGroup: fmt.Sprintf("gang-%d", i/w.GangSize),
			})
		})
	}
	return w.Pods, parallel(ctx, w.Pods, func(i int) error {
		return c.CreatePods(ctx, testcluster.PodSpec{Name: fmt.Sprintf("pod-%d", i), Namespace: ns, SchedulerName: scheduler, CPU: w.CPU})
	})
}

// measure polls until all pods are bound and returns pods/s from the
// scheduler's start to the last bind. Start-up (informer sync) is included for
// both schedulers alike; first-to-last bind would flatter gangs, whose members
// bind in one burst once the whole gang is placed.
func measure(ctx context.Context, c *testcluster.Cluster, ns string, total int, start time.Time) (float64, error) {
	deadline := time.Now().Add(15 * time.Minute)
	for time.Now().Before(deadline) {
		list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return 0, err
		}
		bound := 0
		for i := range list.Items {
			if list.Items[i].Spec.NodeName != "" {
				bound++
			}
		}
		if bound == total {
			elapsed := time.Since(start)
			if elapsed <= 0 {
				elapsed = time.Millisecond
			}
			return float64(total) / elapsed.Seconds(), nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return 0, fmt.Errorf("pods not all bound within 15m")
}

// parallel runs f(0..n-1) on 32 workers and returns the first error.
func parallel(ctx context.Context, n int, f func(int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}
