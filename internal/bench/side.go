package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/pprof/profile"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/phalanx-sched/phalanx/internal/testcluster"
	"github.com/phalanx-sched/phalanx/manifests"
)

// StockConfig is kube-scheduler's default profile with the same client limits
// as the canonical phalanx config, so the comparison is about scheduling.
// The profile's schedulerName is filled in per run.
var StockConfig = []byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  qps: 2000
  burst: 4000
profiles:
- schedulerName: stock-scheduler
`)

// Binaries are the scheduler binaries the side-by-side engine runs.
type Binaries struct {
	// KubeScheduler is upstream's kube-scheduler (k8s.io/kubernetes/cmd/kube-scheduler
	// at the go.mod version), for Stock and UpstreamGang.
	KubeScheduler string
	// Phalanx is bin/phalanx-scheduler.
	Phalanx string
}

// Options tune Run.
type Options struct {
	// Runs is how many timed passes each scheduler makes over a workload.
	Runs int
	// Profile adds one pass per scheduler with CPU and block (contention)
	// profiling on; its times are reported apart, not in the medians.
	Profile bool
	// ProfileDir keeps the raw profiles ("" : not kept).
	ProfileDir string
	Binaries   Binaries
	// Schedulers, if set, limits the passes to these schedulers (a failed
	// pass is re-run alone, without the others' minutes).
	Schedulers []Scheduler
	// Log receives the control plane's log; Progress a line per step.
	Log, Progress io.Writer
	// Done, if set, is called with each workload's result as it completes.
	Done func(Result)
}

// Pass is one scheduler's pass over a workload.
type Pass struct {
	Scheduler Scheduler
	// Index counts timed passes from 0; -1 is the profiled pass.
	Index int
	Pods  int
	// Seconds is from the scheduler's readiness (informers synced), or its
	// first bind if that came earlier, to the last bind; Startup from process
	// start to readiness; EndToEnd from process start to the last bind.
	Seconds, Startup, EndToEnd float64
	// CPUSeconds is the scheduler process's CPU time over Seconds.
	CPUSeconds float64
	// PeakRSS is the process's peak resident set (VmHWM), bytes.
	PeakRSS float64
	// Metrics is the scheduler's histograms over Seconds.
	Metrics Scrape
	// CPU, Block and Heap summarise the profiled pass's profiles (heap: in-use
	// bytes at the end of the pass; PeakHeap: at the largest of the heap
	// profiles taken every CPU window); StartupCPU from process start to
	// readiness.
	CPU, Block, Heap, PeakHeap, StartupCPU *Top
	// Failed says why the pass did not finish (e.g. pods still unbound at
	// the pass deadline); its figures are then left out.
	Failed string
	// Placement is where the pass's gangs and sub-groups landed, for
	// workloads with a required level (nil otherwise).
	Placement *Placement
}

// PodsPerS is the pass's throughput.
func (p Pass) PodsPerS() float64 {
	if p.Failed != "" {
		return math.NaN()
	}
	if p.Seconds <= 0 {
		return 0
	}
	return float64(p.Pods) / p.Seconds
}

// CPUPerPod is scheduler CPU milliseconds per pod.
func (p Pass) CPUPerPod() float64 {
	if p.Pods == 0 || p.Failed != "" {
		return math.NaN()
	}
	return p.CPUSeconds * 1000 / float64(p.Pods)
}

// Result is one workload through every scheduler.
type Result struct {
	Workload Workload
	Passes   []Pass
}

// Timed returns the timed passes of scheduler s, in order.
func (r Result) Timed(s Scheduler) []Pass {
	var out []Pass
	for _, p := range r.Passes {
		if p.Scheduler == s && p.Index >= 0 {
			out = append(out, p)
		}
	}
	return out
}

// Profiled returns the profiled pass of scheduler s, if any.
func (r Result) Profiled(s Scheduler) *Pass {
	for i := range r.Passes {
		if r.Passes[i].Scheduler == s && r.Passes[i].Index < 0 {
			return &r.Passes[i]
		}
	}
	return nil
}

// Run runs each workload on its own control plane: nodes once, then Runs
// timed passes of every scheduler (order rotated from pass to pass), each on
// fresh pods in a namespace of its own, against the same API server.
func Run(ctx context.Context, workloads []Workload, o Options) ([]Result, error) {
	if o.Runs < 1 {
		o.Runs = 1
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	var out []Result
	for _, w := range workloads {
		r, err := runWorkload(ctx, w, o)
		out = append(out, r)
		if err == nil && o.Done != nil {
			o.Done(r)
		}
		if err != nil {
			return out, fmt.Errorf("%s: %w", w.Name, err)
		}
	}
	return out, nil
}

func runWorkload(ctx context.Context, w Workload, o Options) (res Result, err error) {
	res.Workload = w
	runner := testcluster.NewRunner(w.Name, o.Log)
	defer runner.Close()
	defer testcluster.RecoverFatal(&err)
	runtimeConfig := "scheduling.k8s.io/v1beta1=true"
	if w.SubGroupSize > 0 {
		// CompositePodGroups, for the upstream gang scheduler's sub-groups.
		runtimeConfig += ",scheduling.k8s.io/v1alpha3=true"
	}
	c, err := testcluster.Start(runner, testcluster.Options{APIServerFlags: []string{
		"--feature-gates=" + gateList(w.upstreamGates()),
		"--runtime-config=" + runtimeConfig,
	}})
	if err != nil {
		return res, err
	}
	fmt.Fprintf(o.Progress, "%s: creating %d nodes\n", w.Name, w.Nodes)
	if err := parallel(ctx, w.Nodes, func(i int) error { return c.CreateNodes(ctx, w.Node(i)) }); err != nil {
		return res, err
	}
	if w.Topology || w.Cliques {
		nt := NetworkTopology()
		if w.Cliques {
			nt = CliqueNetworkTopology()
		}
		if _, err := c.Phalanx.SchedulingV1alpha1().NetworkTopologies().Create(ctx, nt, metav1.CreateOptions{}); err != nil {
			return res, err
		}
	}
	for q := 0; q < w.Queues; q++ {
		if _, err := c.Phalanx.SchedulingV1alpha1().Queues().Create(ctx, Queue(q), metav1.CreateOptions{}); err != nil {
			return res, err
		}
	}
	if w.Devices > 0 {
		// Pods' claims come from their template through
		// kube-controller-manager's resourceclaim controller, as in a
		// cluster; it also frees and deletes them when the pods go.
		if err := c.StartResourceClaimController(); err != nil {
			return res, err
		}
		if _, err := c.Client.ResourceV1().DeviceClasses().Create(ctx, DeviceClass(), metav1.CreateOptions{}); err != nil {
			return res, err
		}
		fmt.Fprintf(o.Progress, "%s: publishing %d ResourceSlices of %d devices\n", w.Name, w.Nodes, w.Devices)
		if err := parallel(ctx, w.Nodes, func(i int) error {
			_, err := c.Client.ResourceV1().ResourceSlices().Create(ctx, w.ResourceSlice(i), metav1.CreateOptions{})
			return err
		}); err != nil {
			return res, err
		}
	}
	scheds := slices.DeleteFunc(w.Passes(), func(s Scheduler) bool { return !o.runs(s) })
	for i := 0; i < o.Runs; i++ {
		for j := range scheds {
			s := scheds[(i+j)%len(scheds)]
			p, err := runPass(ctx, c, w, s, i, o)
			if stopsWorkload(err) {
				return res, fmt.Errorf("%s pass %d: %w", s, i+1, err)
			}
			res.Passes = append(res.Passes, p)
			if p.Failed != "" {
				fmt.Fprintf(o.Progress, "%s: %-13s pass %d: FAILED: %s (load %s)\n", w.Name, s, i+1, p.Failed, LoadAverage())
				continue
			}
			if s == RawBind {
				fmt.Fprintf(o.Progress, "%s: %-13s pass %d: %6.0f pods/s (load %s)\n", w.Name, s, i+1, p.PodsPerS(), LoadAverage())
				continue
			}
			placement := ""
			if p.Placement != nil {
				placement = "; " + p.Placement.String()
			}
			fmt.Fprintf(o.Progress, "%s: %-13s pass %d: %6.0f pods/s, %5.2f CPU ms/pod, peak RSS %4.0f MiB, %.2f attempts/pod, %.1f API requests/pod%s (load %s)\n",
				w.Name, s, i+1, p.PodsPerS(), p.CPUPerPod(), p.PeakRSS/(1<<20), p.AttemptsPerPod(), p.RequestsPerPod(), placement, LoadAverage())
		}
	}
	if o.Profile {
		for _, s := range slices.DeleteFunc(w.Schedulers(), func(s Scheduler) bool { return !o.runs(s) }) {
			p, err := runPass(ctx, c, w, s, -1, o)
			if stopsWorkload(err) {
				return res, fmt.Errorf("%s profiled pass: %w", s, err)
			}
			res.Passes = append(res.Passes, p)
			fmt.Fprintf(o.Progress, "%s: %-13s profiled: %6.0f pods/s\n", w.Name, s, p.PodsPerS())
		}
	}
	return res, nil
}

func gateList(gates []string) string {
	parts := make([]string, len(gates))
	for i, g := range gates {
		parts[i] = g + "=true"
	}
	return strings.Join(parts, ",")
}

// PassTimeout bounds one scheduler's pass over a workload.
var PassTimeout = 10 * time.Minute

var errPassTimeout = errors.New("pass timed out")

// errCleanup: a pass's objects could not be deleted; later passes would
// run on a cluster still holding them.
var errCleanup = errors.New("cleaning up")

// stopsWorkload: a pass's error ends its workload, unless the pass only
// timed out (it is reported as failed) and cleaned up after itself.
func stopsWorkload(err error) bool {
	return err != nil && (!errors.Is(err, errPassTimeout) || errors.Is(err, errCleanup))
}

// runs says whether the options run scheduler s's passes.
func (o Options) runs(s Scheduler) bool {
	return len(o.Schedulers) == 0 || slices.Contains(o.Schedulers, s)
}

// EndToEndPodsPerS is pods per second from process start to the last bind.
func (p Pass) EndToEndPodsPerS() float64 {
	if p.Failed != "" || p.EndToEnd <= 0 {
		return math.NaN()
	}
	return float64(p.Pods) / p.EndToEnd
}

// AttemptsPerPod is scheduling attempts (all results) per pod of the pass.
func (p Pass) AttemptsPerPod() float64 {
	total := 0.0
	for _, n := range p.Metrics.Attempts() {
		total += n
	}
	if p.Pods == 0 {
		return math.NaN()
	}
	return total / float64(p.Pods)
}

// RequestsPerPod is the scheduler's API requests per pod of the pass (NaN
// when the binary does not export client-go's request metrics).
func (p Pass) RequestsPerPod() float64 {
	total := 0.0
	byMethod := p.Metrics.Requests()
	for _, n := range byMethod {
		total += n
	}
	if p.Pods == 0 || len(byMethod) == 0 {
		return math.NaN()
	}
	return total / float64(p.Pods)
}

// metricsFlush outlasts the flush interval of the scheduler's asynchronous
// metrics recorder (one second in v1.36).
const metricsFlush = 1500 * time.Millisecond

// runPass creates the workload's objects for s, runs the scheduler binary
// until every pod is bound, and cleans up.
func runPass(ctx context.Context, c *testcluster.Cluster, w Workload, s Scheduler, index int, o Options) (_ Pass, err error) {
	pass := Pass{Scheduler: s, Index: index, Pods: w.Total()}
	suffix := strconv.Itoa(index)
	if index < 0 {
		suffix = "profiled"
	}
	ns := fmt.Sprintf("%s-%s-%s", w.Name, s, suffix)
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return pass, err
	}
	if err := createObjects(ctx, c, w, s, ns); err != nil {
		return pass, err
	}
	defer func() {
		// A pass that leaves pods behind would make the next one start on
		// full nodes: the workload stops instead.
		if cerr := deleteObjects(context.Background(), c, w, s, ns, o.Progress); cerr != nil {
			err = errors.Join(err, fmt.Errorf("%w %s: %w", errCleanup, ns, cerr))
		}
	}()

	watch, err := watchBinds(ctx, c, ns, pass.Pods)
	if err != nil {
		return pass, err
	}
	defer watch.stop()
	if s == RawBind {
		return rawBind(ctx, c, w, ns, watch, pass)
	}

	profiling := index < 0
	sched, err := startScheduler(c, w, s, profiling, o.Binaries)
	if err != nil {
		return pass, err
	}
	defer sched.stop()
	var cpuProf *cpuProfiler
	if profiling {
		cpuProf = startCPUProfile(ctx, sched.client, sched.base)
		defer cpuProf.cancel()
	}
	ready, err := sched.waitReady(ctx, 2*time.Minute)
	if err != nil {
		return pass, err
	}
	if profiling {
		cpuProf.markReady(ready)
	}
	pass.Startup = ready.Sub(sched.started).Seconds()
	before, err := sched.scrape(ctx)
	if err != nil {
		return pass, err
	}
	cpuBefore, err := procCPUSeconds(sched.cmd.Process.Pid)
	if err != nil {
		return pass, err
	}

	select {
	case <-watch.done:
	case <-sched.exited:
		return pass, fmt.Errorf("%s exited early: %s", s, sched.logTail())
	case <-time.After(PassTimeout):
		pass.Failed = fmt.Sprintf("%d of %d pods bound after %v", watch.bound.Load(), pass.Pods, PassTimeout)
		if err := describeUnbound(ctx, c, ns, o.Progress); err != nil {
			fmt.Fprintf(o.Progress, "listing the unbound pods of %s: %v\n", ns, err)
		}
		dir := o.ProfileDir
		if dir == "" {
			dir = os.TempDir()
		}
		if path, err := keepStuck(ctx, sched, ns, dir); err == nil {
			fmt.Fprintf(o.Progress, "%s's goroutines and log: %s\n", s, path)
		} else {
			fmt.Fprintf(o.Progress, "keeping %s's goroutines and log: %v\n", s, err)
		}
		if w.Devices > 0 {
			if err := checkDevices(ctx, c, ns, -1); err != nil {
				return pass, err
			}
		}
		if after, err := sched.scrape(ctx); err == nil {
			pass.Metrics = after.Sub(before).withPlans(after)
		}
		pass.PeakRSS, _ = procPeakRSS(sched.cmd.Process.Pid)
		if profiling {
			_ = collectProfiles(ctx, &pass, sched, cpuProf, w, o.ProfileDir)
		}
		return pass, errPassTimeout
	case <-ctx.Done():
		return pass, ctx.Err()
	}
	cpuAfter, err := procCPUSeconds(sched.cmd.Process.Pid)
	if err != nil {
		return pass, err
	}
	pass.CPUSeconds = cpuAfter - cpuBefore
	first, last := watch.span()
	start := ready
	if first.Before(start) {
		start = first
	}
	pass.Seconds = last.Sub(start).Seconds()
	pass.EndToEnd = last.Sub(sched.started).Seconds()
	if w.Devices > 0 {
		if err := checkDevices(ctx, c, ns, pass.Pods); err != nil {
			return pass, err
		}
	}
	if w.RequiredLevel != "" {
		if pass.Placement, err = checkPlacement(ctx, c, w, ns); err != nil {
			return pass, err
		}
	}
	// The framework records plugin and extension point durations through an
	// asynchronous recorder that flushes every second.
	time.Sleep(metricsFlush)
	after, err := sched.scrape(ctx)
	if err != nil {
		return pass, err
	}
	pass.Metrics = after.Sub(before).withPlans(after)
	if pass.PeakRSS, err = procPeakRSS(sched.cmd.Process.Pid); err != nil {
		return pass, err
	}
	if profiling {
		if err := collectProfiles(ctx, &pass, sched, cpuProf, w, o.ProfileDir); err != nil {
			return pass, err
		}
	}
	return pass, nil
}

// rawBind binds the pass's pods, RawBindWorkers at a time, round robin over
// the workload's nodes, and times it from the first request to the last
// bind the watch sees.
func rawBind(ctx context.Context, c *testcluster.Cluster, w Workload, ns string, watch *bindWatch, pass Pass) (Pass, error) {
	start := time.Now()
	next := atomic.Int64{}
	errs := make(chan error, RawBindWorkers)
	for range RawBindWorkers {
		go func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= pass.Pods {
					errs <- nil
					return
				}
				binding := &v1.Binding{
					ObjectMeta: metav1.ObjectMeta{Name: w.PodName(i), Namespace: ns},
					Target:     v1.ObjectReference{Kind: "Node", Name: w.Node(i % w.Nodes).Name},
				}
				if err := c.Client.CoreV1().Pods(ns).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("binding %s: %w", binding.Name, err)
					return
				}
			}
		}()
	}
	for range RawBindWorkers {
		if err := <-errs; err != nil {
			return pass, err
		}
	}
	select {
	case <-watch.done:
	case <-time.After(PassTimeout):
		pass.Failed = fmt.Sprintf("%d of %d binds seen after %v", watch.bound.Load(), pass.Pods, PassTimeout)
		return pass, errPassTimeout
	case <-ctx.Done():
		return pass, ctx.Err()
	}
	_, last := watch.span()
	pass.Seconds = last.Sub(start).Seconds()
	pass.EndToEnd = pass.Seconds
	return pass, nil
}

func collectProfiles(ctx context.Context, pass *Pass, sched *childScheduler, cpuProf *cpuProfiler, w Workload, dir string) error {
	startup, cpu, err := cpuProf.stop()
	if err != nil {
		return fmt.Errorf("CPU profile: %w", err)
	}
	top := summarise(cpu, "cpu", len(cpu.SampleType)-1, 15, nil)
	top.Note = cpuProf.lost()
	pass.CPU = &top
	raw, err := get(ctx, sched.client, sched.base+"/debug/pprof/block")
	if err != nil {
		return fmt.Errorf("block profile: %w", err)
	}
	block, err := profile.ParseData(raw)
	if err != nil {
		return fmt.Errorf("block profile: %w", err)
	}
	btop := summarise(block, "lock", len(block.SampleType)-1, 15, waitsOnLock)
	pass.Block = &btop
	raw, err = get(ctx, sched.client, sched.base+"/debug/pprof/heap")
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	heap, err := profile.ParseData(raw)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	htop := summarise(heap, "heap", len(heap.SampleType)-1, 15, nil)
	pass.Heap = &htop
	type kept struct {
		prof *profile.Profile
		top  *Top
	}
	profiles := []kept{{cpu, pass.CPU}, {block, pass.Block}, {heap, pass.Heap}}
	// The startup and the heap's peak, when the profiler saw them.
	for _, opt := range []struct {
		prof *profile.Profile
		kind string
		top  **Top
	}{{startup, "startup", &pass.StartupCPU}, {cpuProf.peak(), "heap-peak", &pass.PeakHeap}} {
		if opt.prof == nil {
			continue
		}
		top := summarise(opt.prof, opt.kind, len(opt.prof.SampleType)-1, 15, nil)
		*opt.top = &top
		profiles = append(profiles, kept{opt.prof, &top})
	}
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, p := range profiles {
		path := filepath.Join(dir, fmt.Sprintf("%s-%s.%s.pb.gz", w.Name, pass.Scheduler, map[string]string{"cpu": "cpu", "lock": "block", "heap": "heap", "heap-peak": "heap-peak", "startup": "startup-cpu"}[p.top.Kind]))
		if err := writeProfile(p.prof, path); err != nil {
			return err
		}
		p.top.Path = path
	}
	return nil
}

// createObjects creates the gang objects of s and the pods, before the
// scheduler starts, so the measurement is scheduling, not pod creation.
func createObjects(ctx context.Context, c *testcluster.Cluster, w Workload, s Scheduler, ns string) error {
	if w.NumGangs() > 0 {
		for g := 0; g < w.NumGangs(); g++ {
			switch s {
			case Phalanx, PhalanxFlat:
				if err := c.CreatePodGroup(ctx, w.PodGroupFor(s, ns, g)); err != nil {
					return err
				}
			case UpstreamGang:
				if _, err := c.Client.SchedulingV1beta1().Workloads(ns).Create(ctx, w.UpstreamWorkload(ns, g), metav1.CreateOptions{}); err != nil {
					return fmt.Errorf("creating upstream Workload: %w", err)
				}
				if w.SubGroupSize > 0 {
					if err := createUpstreamComposite(ctx, c, w, ns, g); err != nil {
						return err
					}
					continue
				}
				if _, err := c.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, w.UpstreamPodGroup(ns, g), metav1.CreateOptions{}); err != nil {
					return fmt.Errorf("creating upstream PodGroup: %w", err)
				}
			}
		}
	}
	if w.Devices > 0 {
		if _, err := c.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, ClaimTemplate(ns), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating the claim template: %w", err)
		}
	}
	if err := parallel(ctx, w.Total(), func(i int) error {
		pod := w.Pod(s, ns, i)
		created, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating pod %s: %w", pod.Name, err)
		}
		if pod.Spec.SchedulingGroup != nil && created.Spec.SchedulingGroup == nil {
			return fmt.Errorf("the API server dropped spec.schedulingGroup of %s: is the GenericWorkload gate on?", pod.Name)
		}
		return nil
	}); err != nil {
		return err
	}
	if w.Devices == 0 {
		return nil
	}
	// Every pod's claim is made (and named in its status) before the
	// scheduler starts, as the pods are.
	return wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if len(p.Status.ResourceClaimStatuses) == 0 {
				return false, nil
			}
		}
		return len(pods.Items) == w.Total(), nil
	})
}

// createUpstreamComposite creates gang g of a workload with sub-groups as
// upstream's CompositePodGroup and its sub-groups' PodGroups.
func createUpstreamComposite(ctx context.Context, c *testcluster.Cluster, w Workload, ns string, g int) error {
	if _, err := c.Client.SchedulingV1alpha3().CompositePodGroups(ns).Create(ctx, w.UpstreamCompositePodGroup(ns, g), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating upstream CompositePodGroup (is scheduling.k8s.io/v1alpha3 served?): %w", err)
	}
	for _, pg := range w.UpstreamSubGroups(ns, g) {
		created, err := c.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating upstream PodGroup %s: %w", pg.Name, err)
		}
		if created.Spec.ParentCompositePodGroupName == nil {
			return fmt.Errorf("the API server dropped parentCompositePodGroupName of %s: is the %s gate on?", pg.Name, CompositeGate)
		}
	}
	return nil
}

// checkDevices lists every claim of the cluster and fails when a device is
// allocated to two claims or, with want ≥ 0, when ns has not exactly want
// allocated claims (every bound pod's one claim).
func checkDevices(ctx context.Context, c *testcluster.Cluster, ns string, want int) error {
	claims, err := c.Client.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	owner := map[string]string{}
	allocated := 0
	for _, cl := range claims.Items {
		if cl.Status.Allocation == nil {
			continue
		}
		if cl.Namespace == ns {
			allocated++
		}
		for _, r := range cl.Status.Allocation.Devices.Results {
			id := r.Driver + "/" + r.Pool + "/" + r.Device
			if other, dup := owner[id]; dup {
				return fmt.Errorf("DEVICE ALLOCATED TWICE: %s to claims %s and %s/%s", id, other, cl.Namespace, cl.Name)
			}
			owner[id] = cl.Namespace + "/" + cl.Name
		}
	}
	if want >= 0 && allocated != want {
		return fmt.Errorf("%d claims of %s allocated, want one per bound pod (%d)", allocated, ns, want)
	}
	return nil
}

// CleanupTimeout bounds the deletion of a pass's objects.
var CleanupTimeout = 10 * time.Minute

// deleteObjects deletes a pass's pods (and its gangs' and claims' objects)
// and waits until they are gone. One DeleteCollection of tens of thousands
// of pods outlasts the API server's request timeout and stops part way, so
// it is repeated until the namespace is empty; the next pass would
// otherwise start on nodes still full of this one's pods.
func deleteObjects(ctx context.Context, c *testcluster.Cluster, w Workload, s Scheduler, ns string, progress io.Writer) error {
	now := metav1.DeleteOptions{GracePeriodSeconds: new(int64)}
	if err := deleteUntilGone(ctx, progress, ns+"'s pods", func(ctx context.Context) error {
		return c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, now, metav1.ListOptions{})
	}, func(ctx context.Context) (int, error) {
		list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return 0, err
		}
		return len(list.Items), nil
	}); err != nil {
		return err
	}
	if w.NumGangs() > 0 {
		var errs []error
		switch s {
		case Phalanx, PhalanxFlat:
			errs = append(errs, c.PodGroups.SchedulingV1alpha1().PodGroups(ns).DeleteCollection(ctx, now, metav1.ListOptions{}))
		case UpstreamGang:
			errs = append(errs, c.Client.SchedulingV1beta1().PodGroups(ns).DeleteCollection(ctx, now, metav1.ListOptions{}))
			if w.SubGroupSize > 0 {
				errs = append(errs, c.Client.SchedulingV1alpha3().CompositePodGroups(ns).DeleteCollection(ctx, now, metav1.ListOptions{}))
			}
			errs = append(errs, c.Client.SchedulingV1beta1().Workloads(ns).DeleteCollection(ctx, now, metav1.ListOptions{}))
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	if w.Devices > 0 {
		// The resourceclaim controller deallocates the claims of the
		// deleted pods and lifts their finalizers (without a garbage
		// collector, nothing else deletes them); the next pass needs the
		// devices and no stale claims.
		return deleteUntilGone(ctx, progress, ns+"'s resource claims", func(ctx context.Context) error {
			return c.Client.ResourceV1().ResourceClaims(ns).DeleteCollection(ctx, now, metav1.ListOptions{})
		}, func(ctx context.Context) (int, error) {
			list, err := c.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{Limit: 1})
			if err != nil {
				return 0, err
			}
			return len(list.Items), nil
		})
	}
	return nil
}

// deleteUntilGone calls del until left says nothing is left, within
// CleanupTimeout; a call that fails part way (a timeout) is repeated.
func deleteUntilGone(ctx context.Context, progress io.Writer, what string, del func(context.Context) error, left func(context.Context) (int, error)) error {
	ctx, cancel := context.WithTimeout(ctx, CleanupTimeout)
	defer cancel()
	var last error
	for calls := 1; ; calls++ {
		if last = del(ctx); last != nil {
			fmt.Fprintf(progress, "deleting %s, call %d: %v; deleting again\n", what, calls, last)
		}
		// Deletion of objects with finalizers ends after the call.
		err := testcluster.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
			n, err := left(ctx)
			return n == 0, err
		})
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s still there after %v (last delete: %v)", what, CleanupTimeout, last)
		}
	}
}

// bindWatch counts binds of a namespace's pods through an informer, which
// costs the shared API server far less than polling lists.
type bindWatch struct {
	bound  atomic.Int64
	done   chan struct{}
	stopCh chan struct{}
	mu     sync.Mutex
	seen   map[types.UID]bool
	lastAt time.Time
	// firstAt is the first bind: a scheduler may bind before /readyz says
	// it is ready.
	firstAt time.Time
}

func watchBinds(ctx context.Context, c *testcluster.Cluster, ns string, total int) (*bindWatch, error) {
	bw := &bindWatch{done: make(chan struct{}), stopCh: make(chan struct{}), seen: map[types.UID]bool{}}
	factory := informers.NewSharedInformerFactoryWithOptions(c.Client, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	observe := func(obj any) {
		pod, ok := obj.(*v1.Pod)
		if !ok || pod.Spec.NodeName == "" {
			return
		}
		bw.mu.Lock()
		defer bw.mu.Unlock()
		if bw.seen[pod.UID] {
			return
		}
		bw.seen[pod.UID] = true
		bw.lastAt = time.Now()
		if bw.firstAt.IsZero() {
			bw.firstAt = bw.lastAt
		}
		if int(bw.bound.Add(1)) == total {
			close(bw.done)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, n any) { observe(n) },
	}); err != nil {
		return nil, err
	}
	factory.Start(bw.stopCh)
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
		close(bw.stopCh)
		return nil, fmt.Errorf("pod informer of %s did not sync", ns)
	}
	return bw, nil
}

func (bw *bindWatch) span() (first, last time.Time) {
	bw.mu.Lock()
	defer bw.mu.Unlock()
	return bw.firstAt, bw.lastAt
}

func (bw *bindWatch) stop() { close(bw.stopCh) }

// childScheduler is a scheduler binary run as its own process, serving
// /metrics and pprof on a local port.
type childScheduler struct {
	cmd     *exec.Cmd
	started time.Time
	exited  chan struct{}
	log     string
	base    string
	client  *http.Client
	once    sync.Once
}

func startScheduler(c *testcluster.Cluster, w Workload, s Scheduler, profiling bool, bins Binaries) (*childScheduler, error) {
	config, binary := StockConfig, bins.KubeScheduler
	if s.IsPhalanx() {
		config, binary = manifests.SchedulerConfig, bins.Phalanx
	}
	var extra []string
	if s == UpstreamGang {
		extra = append(extra, "--feature-gates="+gateList(w.upstreamGates()))
	}
	return startChildScheduler(c, binary, config, s.SchedulerName(), profiling, fmt.Sprintf("%s-%s", w.Name, s), extra...)
}

// startChildScheduler runs a scheduler binary with config (its one profile
// named schedulerName), serving /metrics and pprof on a local port, with
// extra flags; its output goes to a log named after logName.
func startChildScheduler(c *testcluster.Cluster, binary string, config []byte, schedulerName string, profiling bool, logName string, extra ...string) (*childScheduler, error) {
	config, err := schedulerConfig(config, schedulerName, profiling)
	if err != nil {
		return nil, err
	}
	path, err := c.WriteSchedulerConfig(config, true)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	certDir, err := os.MkdirTemp(c.Dir, "certs-")
	if err != nil {
		return nil, err
	}
	args := append([]string{
		"--config=" + path,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + certDir,
		// Requests for metrics and profiles are authenticated with the
		// cluster's admin credentials and need no authorization.
		"--authentication-kubeconfig=" + c.Kubeconfig,
		"--authorization-kubeconfig=" + c.Kubeconfig,
		"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics,/debug/pprof/*",
	}, extra...)
	logFile, err := os.CreateTemp(c.Dir, logName+"-*.log")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cs := &childScheduler{cmd: cmd, exited: make(chan struct{}), log: logFile.Name(), base: fmt.Sprintf("https://127.0.0.1:%d", port)}
	if cs.client, err = schedulerClient(c.Config); err != nil {
		logFile.Close()
		return nil, err
	}
	cs.started = time.Now()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(cs.exited)
	}()
	return cs, nil
}

// schedulerConfig sets the profile's schedulerName and, for profiled
// passes, contention profiling (block profile rate 1, which costs time).
func schedulerConfig(config []byte, schedulerName string, profiling bool) ([]byte, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(config, &doc); err != nil {
		return nil, err
	}
	profiles, _ := doc["profiles"].([]any)
	if len(profiles) != 1 {
		return nil, fmt.Errorf("want one profile in the bench's scheduler config, got %d", len(profiles))
	}
	p, _ := profiles[0].(map[string]any)
	if p == nil {
		return nil, fmt.Errorf("profile is not a map")
	}
	p["schedulerName"] = schedulerName
	doc["enableProfiling"] = true
	doc["enableContentionProfiling"] = profiling
	return yaml.Marshal(doc)
}

// schedulerClient talks to a child scheduler's secure port with the admin
// credentials; the scheduler's serving certificate is self-signed.
func schedulerClient(admin *rest.Config) (*http.Client, error) {
	cfg := &rest.Config{
		BearerToken: admin.BearerToken,
		TLSClientConfig: rest.TLSClientConfig{
			Insecure: true,
			CertData: admin.CertData,
			KeyData:  admin.KeyData,
		},
		Timeout: 2 * time.Minute,
	}
	return rest.HTTPClientFor(cfg)
}

func (cs *childScheduler) waitReady(ctx context.Context, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := get(rctx, cs.client, cs.base+"/readyz")
		cancel()
		if err == nil {
			return time.Now(), nil
		}
		select {
		case <-cs.exited:
			return time.Time{}, fmt.Errorf("scheduler exited at start: %s", cs.logTail())
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return time.Time{}, fmt.Errorf("scheduler not ready after %v: %s", timeout, cs.logTail())
}

func (cs *childScheduler) scrape(ctx context.Context) (Scrape, error) {
	raw, err := get(ctx, cs.client, cs.base+"/metrics")
	if err != nil {
		return nil, err
	}
	return ParseScrape(bytes.NewReader(raw))
}

func (cs *childScheduler) stop() {
	cs.once.Do(func() {
		_ = cs.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-cs.exited:
		case <-time.After(20 * time.Second):
			_ = cs.cmd.Process.Kill()
			<-cs.exited
		}
	})
}

func (cs *childScheduler) logTail() string {
	raw, _ := os.ReadFile(cs.log)
	if len(raw) > 2000 {
		raw = raw[len(raw)-2000:]
	}
	return string(raw)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
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
