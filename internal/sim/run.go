package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/phalanx-sched/phalanx/internal/testcluster"
	"github.com/phalanx-sched/phalanx/manifests"
)

// Options tune a run.
type Options struct {
	// SchedulerConfig defaults to the canonical manifests/scheduler-config.yaml.
	SchedulerConfig []byte
	// Log receives the control plane's log (default: discarded).
	Log io.Writer
	// Progress receives a progress line while the run goes (nil: silent).
	Progress io.Writer
}

// JobResult is what happened to one job.
type JobResult struct {
	Job       Job
	Submitted time.Duration
	// QuorumAt is when MinMember (or all, for plain jobs) members were bound.
	QuorumAt time.Duration
	// Spread is the time between the first and the quorum-th bind: how long
	// the gang was partially bound (binds of one Permit land over milliseconds).
	Spread    time.Duration
	MaxBound  int
	Completed int
	Nodes     map[string]int
	// Reason is the scheduler's condition message for a gang that did not run.
	Reason  string
	firstAt time.Duration
	done    map[string]bool
}

// Ran reports whether the job reached its quorum.
func (r *JobResult) Ran() bool { return r.QuorumAt > 0 }

// Wait is the time from submission to quorum.
func (r *JobResult) Wait() time.Duration { return r.QuorumAt - r.Submitted }

// Sample is the cluster at one moment.
type Sample struct {
	At      time.Duration
	GPUUsed int64
	CPUUsed int64 // millicores
}

// Result is a finished run.
type Result struct {
	Scenario *Scenario
	Jobs     []*JobResult
	Elapsed  time.Duration
	GPUs     int64
	CPU      int64 // millicores
	Nodes    int
	Samples  []Sample
}

// Run executes a scenario end to end on a fresh in-process cluster.
func Run(ctx context.Context, sc *Scenario, o Options) (res *Result, err error) {
	logw := o.Log
	if logw == nil {
		logw = io.Discard
	}
	runner := testcluster.NewRunner(sc.Name, logw)
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
		return nil, err
	}
	res = &Result{Scenario: sc}
	for _, g := range sc.Nodes {
		for i := 0; i < g.Count; i++ {
			spec := testcluster.NodeSpec{Name: fmt.Sprintf("%s-%d", g.Prefix, i), CPU: g.CPU, Memory: g.Memory, GPUs: g.GPUs, Labels: g.Labels}
			if g.GPUs > 0 {
				// GPU nodes publish their topology, as NFD does; policy none
				// unless the scenario models NUMA zones.
				spec.NRTPolicy = "none"
			}
			if g.Tainted {
				spec.Taints = []v1.Taint{{Key: "phalanx.dev/reserved", Value: "true", Effect: v1.TaintEffectNoSchedule}}
			}
			if err := c.CreateNodes(ctx, spec); err != nil {
				return nil, err
			}
			if !g.Tainted {
				res.GPUs += g.GPUs
				n := spec.Node()
				res.CPU += n.Status.Allocatable.Cpu().MilliValue()
			}
			res.Nodes++
		}
	}
	config := o.SchedulerConfig
	if config == nil {
		config = manifests.SchedulerConfig
	}
	if _, err := c.StartScheduler(config); err != nil {
		return nil, fmt.Errorf("starting scheduler: %w", err)
	}
	if err := c.StartController(); err != nil {
		return nil, fmt.Errorf("starting controller: %w", err)
	}
	d := &driver{c: c, sc: sc, res: res, progress: o.Progress}
	if err := d.loop(ctx); err != nil {
		return nil, err
	}
	return res, nil
}

type driver struct {
	c        *testcluster.Cluster
	sc       *Scenario
	res      *Result
	progress io.Writer

	start     time.Time
	lastShown string
	submitted map[string]*JobResult
	started   map[string]time.Time // pod key -> Running since
}

func (d *driver) loop(ctx context.Context) error {
	d.start = time.Now()
	d.submitted = map[string]*JobResult{}
	d.started = map[string]time.Time{}
	namespaces := map[string]bool{}
	lastChange := time.Now()
	lastArrival := time.Duration(0)
	for _, j := range d.sc.Jobs {
		if j.Arrival.Duration > lastArrival {
			lastArrival = j.Arrival.Duration
		}
	}
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for {
		now := time.Since(d.start)
		for _, j := range d.sc.Jobs {
			if d.submitted[j.Key()] != nil || j.Arrival.Duration > now {
				continue
			}
			if !namespaces[j.namespace()] {
				if err := d.ensureNamespace(ctx, j.namespace()); err != nil {
					return err
				}
				namespaces[j.namespace()] = true
			}
			if err := d.submit(ctx, j); err != nil {
				return err
			}
			d.submitted[j.Key()] = &JobResult{Job: j, Submitted: now, Nodes: map[string]int{}, done: map[string]bool{}}
			d.res.Jobs = append(d.res.Jobs, d.submitted[j.Key()])
			lastChange = time.Now()
		}
		changed, err := d.observe(ctx, now)
		if err != nil {
			return err
		}
		if changed {
			lastChange = time.Now()
		}
		d.report(now)
		if len(d.submitted) == len(d.sc.Jobs) && d.settled(now, lastChange) {
			break
		}
		if now > d.sc.Timeout.Duration {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
	}
	d.res.Elapsed = time.Since(d.start)
	return d.collectReasons(ctx)
}

// settled: every job finished its work, or nothing changed for a while after
// the last arrival (what still waits, waits for good).
func (d *driver) settled(now time.Duration, lastChange time.Time) bool {
	all := true
	for _, r := range d.res.Jobs {
		if r.Completed < r.Job.Replicas && !(r.Job.Duration.Duration == 0 && r.Ran()) {
			all = false
		}
	}
	return all || time.Since(lastChange) > 5*time.Second
}

func (d *driver) ensureNamespace(ctx context.Context, ns string) error {
	_, err := d.c.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func (d *driver) submit(ctx context.Context, j Job) error {
	if j.MinMember > 0 {
		pg := testcluster.PodGroup(j.namespace(), j.Name, j.MinMember)
		pg.Annotations = map[string]string{}
		for k, v := range j.Annotations {
			pg.Annotations[k] = v
		}
		if len(j.DependsOn) > 0 {
			pg.Annotations["scheduling.phalanx.dev/depends-on"] = strings.Join(j.DependsOn, ",")
		}
		if err := d.c.CreatePodGroup(ctx, pg); err != nil {
			return err
		}
	}
	for i := 0; i < j.Replicas; i++ {
		spec := testcluster.PodSpec{
			Name: fmt.Sprintf("%s-%d", j.Name, i), Namespace: j.namespace(),
			CPU: j.CPU, Memory: j.Memory, GPUs: j.GPUs, Priority: j.Priority,
			Labels: map[string]string{"sim.phalanx.dev/job": j.Name},
		}
		if j.MinMember > 0 {
			spec.PodGroup = j.Name
		}
		if err := d.c.CreatePods(ctx, spec); err != nil {
			return err
		}
	}
	return nil
}

// observe reads every pod once, moves bound pods to Running and finished ones
// to Succeeded (there are no kubelets), and updates the job results.
func (d *driver) observe(ctx context.Context, now time.Duration) (bool, error) {
	pods, err := d.c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: "sim.phalanx.dev/job"})
	if err != nil {
		return false, err
	}
	changed := false
	bound := map[string]int{}
	var sample Sample
	sample.At = now
	for i := range pods.Items {
		p := &pods.Items[i]
		r := d.submitted[p.Namespace+"/"+p.Labels["sim.phalanx.dev/job"]]
		if r == nil || p.Spec.NodeName == "" {
			continue
		}
		key := p.Namespace + "/" + p.Name
		switch p.Status.Phase {
		case v1.PodPending, "":
			if err := d.setPhase(ctx, p, v1.PodRunning); err != nil {
				return false, err
			}
			d.started[key] = time.Now()
			r.Nodes[p.Spec.NodeName]++
			changed = true
		case v1.PodRunning:
			if dur := r.Job.Duration.Duration; dur > 0 && time.Since(d.started[key]) >= dur {
				if err := d.setPhase(ctx, p, v1.PodSucceeded); err != nil {
					return false, err
				}
				changed = true
			}
		}
		if p.Status.Phase == v1.PodSucceeded {
			if !r.done[key] {
				r.done[key] = true
				r.Completed++
			}
		} else {
			sample.GPUUsed += r.Job.GPUs
			sample.CPUUsed += podCPU(p)
		}
		bound[r.Job.Key()]++
	}
	for key, n := range bound {
		r := d.submitted[key]
		if n > r.MaxBound {
			r.MaxBound = n
		}
		if r.firstAt == 0 && n > 0 {
			r.firstAt = now
		}
		need := int(r.Job.MinMember)
		if need == 0 {
			need = r.Job.Replicas
		}
		if r.QuorumAt == 0 && n >= need {
			r.QuorumAt = now
			r.Spread = now - r.firstAt
		}
	}
	d.res.Samples = append(d.res.Samples, sample)
	return changed, nil
}

func podCPU(p *v1.Pod) int64 {
	var m int64
	for _, c := range p.Spec.Containers {
		m += c.Resources.Requests.Cpu().MilliValue()
	}
	return m
}

func (d *driver) setPhase(ctx context.Context, p *v1.Pod, phase v1.PodPhase) error {
	p = p.DeepCopy()
	p.Status.Phase = phase
	if phase == v1.PodRunning {
		now := metav1.Now()
		p.Status.StartTime = &now
	}
	_, err := d.c.Client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (d *driver) report(now time.Duration) {
	if d.progress == nil {
		return
	}
	ran := 0
	for _, r := range d.res.Jobs {
		if r.Ran() {
			ran++
		}
	}
	const width = 30
	filled := 0
	if total := len(d.sc.Jobs); total > 0 {
		filled = ran * width / total
	}
	line := fmt.Sprintf("[%s%s] %d/%d jobs started", strings.Repeat("#", filled), strings.Repeat(".", width-filled), ran, len(d.sc.Jobs))
	if line == d.lastShown {
		return
	}
	d.lastShown = line
	fmt.Fprintf(d.progress, "%s  at %5.1fs\n", line, now.Seconds())
}

// collectReasons reads the scheduler's Scheduled condition of gangs that did
// not run, so the report can say why.
func (d *driver) collectReasons(ctx context.Context) error {
	for _, r := range d.res.Jobs {
		if r.Ran() || r.Job.MinMember == 0 {
			continue
		}
		raw, err := d.c.PodGroups.SchedulingV1alpha1().RESTClient().Get().Namespace(r.Job.namespace()).Resource("podgroups").Name(r.Job.Name).DoRaw(ctx)
		if err != nil {
			return err
		}
		var pg struct {
			Status struct {
				Conditions []metav1.Condition `json:"conditions"`
			} `json:"status"`
		}
		if err := json.Unmarshal(raw, &pg); err != nil {
			return err
		}
		for _, c := range pg.Status.Conditions {
			if c.Type == "Scheduled" {
				r.Reason = c.Reason + ": " + c.Message
			}
		}
	}
	sort.SliceStable(d.res.Jobs, func(i, j int) bool { return d.res.Jobs[i].Submitted < d.res.Jobs[j].Submitted })
	return nil
}
