// Package side is the side-by-side engine of the benchmarks: each workload
// on its own in-process API server, its nodes once, then timed passes of
// stock kube-scheduler, upstream's in-tree gang scheduling, phalanx and a
// raw-bind baseline, each scheduler a child process on fresh pods, with
// pods/s, CPU, peak RSS, metrics and profiles per pass.
package side

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/google/pprof/profile"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/phalanx-sched/phalanx/internal/bench"
	"github.com/phalanx-sched/phalanx/internal/bench/host"
	"github.com/phalanx-sched/phalanx/internal/bench/profiles"
	"github.com/phalanx-sched/phalanx/internal/bench/schedproc"
	"github.com/phalanx-sched/phalanx/internal/bench/scrape"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
	"github.com/phalanx-sched/phalanx/manifests"
)

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
	Schedulers []bench.Scheduler
	// Log receives the control plane's log; Progress a line per step.
	Log, Progress io.Writer
	// Done, if set, is called with each workload's result as it completes.
	Done func(Result)
}

// Pass is one scheduler's pass over a workload.
type Pass struct {
	Scheduler bench.Scheduler
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
	Metrics scrape.Scrape
	// CPU, Block and Heap summarise the profiled pass's profiles (heap: in-use
	// bytes at the end of the pass; PeakHeap: at the largest of the heap
	// profiles taken every CPU window); StartupCPU from process start to
	// readiness.
	CPU, Block, Heap, PeakHeap, StartupCPU *profiles.Top
	// Failed says why the pass did not finish (e.g. pods still unbound at
	// the pass deadline); its figures are then left out.
	Failed string
	// Placement is where the pass's gangs and sub-groups landed, for
	// workloads with a required level (nil otherwise).
	Placement *bench.Placement
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
	Workload bench.Workload
	Passes   []Pass
}

// Timed returns the timed passes of scheduler s, in order.
func (r Result) Timed(s bench.Scheduler) []Pass {
	var out []Pass
	for _, p := range r.Passes {
		if p.Scheduler == s && p.Index >= 0 {
			out = append(out, p)
		}
	}
	return out
}

// Profiled returns the profiled pass of scheduler s, if any.
func (r Result) Profiled(s bench.Scheduler) *Pass {
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
func Run(ctx context.Context, workloads []bench.Workload, o Options) ([]Result, error) {
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

func runWorkload(ctx context.Context, w bench.Workload, o Options) (res Result, err error) {
	res.Workload = w
	runner := testcluster.NewRunner(w.Name, o.Log)
	defer runner.Close()
	defer testcluster.RecoverFatal(&err)
	c, err := testcluster.Start(runner, testcluster.Options{APIServerFlags: w.APIServerFlags()})
	if err != nil {
		return res, err
	}
	if err := w.SetUp(ctx, c, o.Progress); err != nil {
		return res, err
	}
	scheds := slices.DeleteFunc(w.Passes(), func(s bench.Scheduler) bool { return !o.runs(s) })
	for i := 0; i < o.Runs; i++ {
		for j := range scheds {
			s := scheds[(i+j)%len(scheds)]
			p, err := runPass(ctx, c, w, s, i, o)
			if stopsWorkload(err) {
				return res, fmt.Errorf("%s pass %d: %w", s, i+1, err)
			}
			res.Passes = append(res.Passes, p)
			if p.Failed != "" {
				fmt.Fprintf(o.Progress, "%s: %-13s pass %d: FAILED: %s (load %s)\n", w.Name, s, i+1, p.Failed, host.LoadAverage())
				continue
			}
			if s == bench.RawBind {
				fmt.Fprintf(o.Progress, "%s: %-13s pass %d: %6.0f pods/s (load %s)\n", w.Name, s, i+1, p.PodsPerS(), host.LoadAverage())
				continue
			}
			placement := ""
			if p.Placement != nil {
				placement = "; " + p.Placement.String()
			}
			fmt.Fprintf(o.Progress, "%s: %-13s pass %d: %6.0f pods/s, %5.2f CPU ms/pod, peak RSS %4.0f MiB, %.2f attempts/pod, %.1f API requests/pod%s (load %s)\n",
				w.Name, s, i+1, p.PodsPerS(), p.CPUPerPod(), p.PeakRSS/(1<<20), p.AttemptsPerPod(), p.RequestsPerPod(), placement, host.LoadAverage())
		}
	}
	if o.Profile {
		for _, s := range slices.DeleteFunc(w.Schedulers(), func(s bench.Scheduler) bool { return !o.runs(s) }) {
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
func (o Options) runs(s bench.Scheduler) bool {
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
func runPass(ctx context.Context, c *testcluster.Cluster, w bench.Workload, s bench.Scheduler, index int, o Options) (_ Pass, err error) {
	pass := Pass{Scheduler: s, Index: index, Pods: w.Total()}
	suffix := strconv.Itoa(index)
	if index < 0 {
		suffix = "profiled"
	}
	ns := fmt.Sprintf("%s-%s-%s", w.Name, s, suffix)
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return pass, err
	}
	if err := bench.CreateObjects(ctx, c, w, s, ns); err != nil {
		return pass, err
	}
	defer func() {
		// A pass that leaves pods behind would make the next one start on
		// full nodes: the workload stops instead.
		if cerr := bench.DeleteObjects(context.Background(), c, w, s, ns, o.Progress); cerr != nil {
			err = errors.Join(err, fmt.Errorf("%w %s: %w", errCleanup, ns, cerr))
		}
	}()

	watch, err := watchBinds(ctx, c, ns, pass.Pods)
	if err != nil {
		return pass, err
	}
	defer watch.stop()
	if s == bench.RawBind {
		return rawBind(ctx, c, w, ns, watch, pass)
	}

	return schedulerPass(ctx, c, w, ns, watch, pass, o)
}

// schedulerRun is one scheduler process over a pass's pods.
type schedulerRun struct {
	c         *testcluster.Cluster
	w         bench.Workload
	ns        string
	o         Options
	watch     *bindWatch
	sched     *schedproc.Process
	profiling bool
	cpuProf   *profiles.CPUProfiler
	// before is the scheduler's metrics at readiness.
	before scrape.Scrape
}

// schedulerPass runs the scheduler binary of the pass until the watch has
// seen every pod bound, and takes the pass's figures.
func schedulerPass(ctx context.Context, c *testcluster.Cluster, w bench.Workload, ns string, watch *bindWatch, pass Pass, o Options) (Pass, error) {
	s := pass.Scheduler
	r := schedulerRun{c: c, w: w, ns: ns, o: o, watch: watch, profiling: pass.Index < 0}
	sched, err := startScheduler(c, w, s, r.profiling, o.Binaries)
	if err != nil {
		return pass, err
	}
	r.sched = sched
	defer sched.Stop()
	if r.profiling {
		r.cpuProf = profiles.StartCPUProfile(ctx, sched.Get)
		defer r.cpuProf.Cancel()
	}
	ready, err := sched.WaitReady(ctx, 2*time.Minute)
	if err != nil {
		return pass, err
	}
	if r.profiling {
		r.cpuProf.MarkReady(ready)
	}
	pass.Startup = ready.Sub(sched.Started()).Seconds()
	if r.before, err = sched.Scrape(ctx); err != nil {
		return pass, err
	}
	cpuBefore, err := host.CPUSeconds(sched.PID())
	if err != nil {
		return pass, err
	}

	select {
	case <-watch.done:
	case <-sched.Exited():
		return pass, fmt.Errorf("%s exited early: %s", s, sched.LogTail())
	case <-time.After(PassTimeout):
		return r.timedOut(ctx, pass)
	case <-ctx.Done():
		return pass, ctx.Err()
	}
	return r.finish(ctx, pass, ready, cpuBefore)
}

// timedOut reports why a pass's pods are still unbound at PassTimeout,
// keeps the scheduler's goroutines and log, and takes what figures it can.
func (r *schedulerRun) timedOut(ctx context.Context, pass Pass) (Pass, error) {
	c, w, ns, o, s, sched := r.c, r.w, r.ns, r.o, pass.Scheduler, r.sched
	pass.Failed = fmt.Sprintf("%d of %d pods bound after %v", r.watch.bound.Load(), pass.Pods, PassTimeout)
	if err := bench.DescribeUnbound(ctx, c, ns, o.Progress); err != nil {
		fmt.Fprintf(o.Progress, "listing the unbound pods of %s: %v\n", ns, err)
	}
	dir := o.ProfileDir
	if dir == "" {
		dir = os.TempDir()
	}
	if path, err := sched.KeepStuck(ctx, ns, dir); err == nil {
		fmt.Fprintf(o.Progress, "%s's goroutines and log: %s\n", s, path)
	} else {
		fmt.Fprintf(o.Progress, "keeping %s's goroutines and log: %v\n", s, err)
	}
	if w.Devices > 0 {
		if err := bench.CheckDevices(ctx, c, ns, -1); err != nil {
			return pass, err
		}
	}
	if after, err := sched.Scrape(ctx); err == nil {
		pass.Metrics = after.Sub(r.before).WithPlans(after)
	}
	pass.PeakRSS, _ = host.PeakRSS(sched.PID())
	if r.profiling {
		_ = collectProfiles(ctx, &pass, sched, r.cpuProf, w, o.ProfileDir)
	}
	return pass, errPassTimeout
}

// finish takes the figures of a pass whose pods are all bound: CPU, times,
// devices and placement checked, metrics, peak RSS and profiles.
func (r *schedulerRun) finish(ctx context.Context, pass Pass, ready time.Time, cpuBefore float64) (Pass, error) {
	c, w, ns, sched := r.c, r.w, r.ns, r.sched
	cpuAfter, err := host.CPUSeconds(sched.PID())
	if err != nil {
		return pass, err
	}
	pass.CPUSeconds = cpuAfter - cpuBefore
	first, last := r.watch.span()
	start := ready
	if first.Before(start) {
		start = first
	}
	pass.Seconds = last.Sub(start).Seconds()
	pass.EndToEnd = last.Sub(sched.Started()).Seconds()
	if w.Devices > 0 {
		if err := bench.CheckDevices(ctx, c, ns, pass.Pods); err != nil {
			return pass, err
		}
	}
	if w.RequiredLevel != "" {
		if pass.Placement, err = bench.CheckPlacement(ctx, c, w, ns); err != nil {
			return pass, err
		}
	}
	// The framework records plugin and extension point durations through an
	// asynchronous recorder that flushes every second.
	time.Sleep(metricsFlush)
	after, err := sched.Scrape(ctx)
	if err != nil {
		return pass, err
	}
	pass.Metrics = after.Sub(r.before).WithPlans(after)
	if pass.PeakRSS, err = host.PeakRSS(sched.PID()); err != nil {
		return pass, err
	}
	if r.profiling {
		if err := collectProfiles(ctx, &pass, sched, r.cpuProf, w, r.o.ProfileDir); err != nil {
			return pass, err
		}
	}
	return pass, nil
}

func collectProfiles(ctx context.Context, pass *Pass, sched *schedproc.Process, cpuProf *profiles.CPUProfiler, w bench.Workload, dir string) error {
	startup, cpu, err := cpuProf.Stop()
	if err != nil {
		return fmt.Errorf("CPU profile: %w", err)
	}
	top := profiles.Summarise(cpu, "cpu", len(cpu.SampleType)-1, 15, nil)
	top.Note = cpuProf.Lost()
	pass.CPU = &top
	raw, err := sched.Get(ctx, "/debug/pprof/block")
	if err != nil {
		return fmt.Errorf("block profile: %w", err)
	}
	block, err := profile.ParseData(raw)
	if err != nil {
		return fmt.Errorf("block profile: %w", err)
	}
	btop := profiles.Summarise(block, "lock", len(block.SampleType)-1, 15, profiles.WaitsOnLock)
	pass.Block = &btop
	raw, err = sched.Get(ctx, "/debug/pprof/heap")
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	heap, err := profile.ParseData(raw)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	htop := profiles.Summarise(heap, "heap", len(heap.SampleType)-1, 15, nil)
	pass.Heap = &htop
	type kept struct {
		prof *profile.Profile
		top  *profiles.Top
	}
	keep := []kept{{cpu, pass.CPU}, {block, pass.Block}, {heap, pass.Heap}}
	// The startup and the heap's peak, when the profiler saw them.
	for _, opt := range []struct {
		prof *profile.Profile
		kind string
		top  **profiles.Top
	}{{startup, "startup", &pass.StartupCPU}, {cpuProf.Peak(), "heap-peak", &pass.PeakHeap}} {
		if opt.prof == nil {
			continue
		}
		top := profiles.Summarise(opt.prof, opt.kind, len(opt.prof.SampleType)-1, 15, nil)
		*opt.top = &top
		keep = append(keep, kept{opt.prof, &top})
	}
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, p := range keep {
		path := filepath.Join(dir, fmt.Sprintf("%s-%s.%s.pb.gz", w.Name, pass.Scheduler, map[string]string{"cpu": "cpu", "lock": "block", "heap": "heap", "heap-peak": "heap-peak", "startup": "startup-cpu"}[p.top.Kind]))
		if err := profiles.Write(p.prof, path); err != nil {
			return err
		}
		p.top.Path = path
	}
	return nil
}

func startScheduler(c *testcluster.Cluster, w bench.Workload, s bench.Scheduler, profiling bool, bins Binaries) (*schedproc.Process, error) {
	config, binary := bench.StockConfig, bins.KubeScheduler
	if s.IsPhalanx() {
		config, binary = manifests.SchedulerConfig, bins.Phalanx
	}
	var extra []string
	if s == bench.UpstreamGang {
		extra = append(extra, w.GateFlag())
	}
	return schedproc.Start(c, binary, config, s.SchedulerName(), profiling, fmt.Sprintf("%s-%s", w.Name, s), extra...)
}
