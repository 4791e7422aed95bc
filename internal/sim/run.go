// Package sim runs scenarios on an in-process cluster with the phalanx
// scheduler (or another): it creates nodes, submits jobs (PodGroups and
// pods) at their arrival times, drives the pods' lifecycle, and records
// what happened at every sample.
package sim

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/numa"
	"github.com/phalanx-sched/phalanx/internal/sim/estimates"
	"github.com/phalanx-sched/phalanx/internal/sim/scenario"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
	"github.com/phalanx-sched/phalanx/manifests"
)

// Options tune a run.
type Options struct {
	// SchedulerConfig defaults to the canonical manifests/scheduler-config.yaml.
	SchedulerConfig []byte
	// Log receives the control plane's log (default: discarded).
	Log io.Writer
	// Progress receives a progress bar while the run goes (nil: silent).
	Progress io.Writer
	// Scheduler runs another scheduler instead of phalanx in this process
	// (trace replays compare schedulers on the same trace).
	Scheduler *SchedulerSpec
	// LiveQuorum counts a gang as started only when minMember members are
	// bound and not yet completed at the same moment, judged from every pod
	// transition (a watch), not from samples (trace replays: under a
	// scheduler that binds gangs in part, members that ran alone and
	// completed never made the gang run).
	LiveQuorum bool
	// RunTimeLimit, when above 0, gives each pod with a run time an
	// activeDeadlineSeconds of that many times it (whole seconds, rounded
	// up), as a job with a time limit declares: what phalanx's backfill
	// around reservations goes by.
	RunTimeLimit float64
	// Estimates gives pods an expected-runtime from their job's run time.
	Estimates estimates.Model
}

// SchedulerSpec is a scheduler binary a run uses instead of phalanx.
type SchedulerSpec struct {
	// Name labels the scheduler in reports.
	Name string
	// Binary is the scheduler's executable; Config its
	// KubeSchedulerConfiguration, whose one profile is SchedulerName.
	Binary        string
	Config        []byte
	SchedulerName string
	// Args are extra flags (feature gates).
	Args []string
	// APIServerFlags are extra kube-apiserver flags the scheduler needs.
	APIServerFlags []string
	// UpstreamGang: gangs become scheduling.k8s.io/v1beta1 Workloads and
	// PodGroups, and their pods name their PodGroup in spec.schedulingGroup.
	UpstreamGang bool
}

// JobResult is what happened to one job.

// RunSuite runs every scenario of a suite, each on its own cluster.
func RunSuite(ctx context.Context, suite *scenario.Suite, o Options) ([]*Result, error) {
	var out []*Result
	for _, sc := range suite.Scenarios {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "\n== %s: starting etcd, kube-apiserver, kwok, phalanx-scheduler, phalanx-controller\n", sc.Name)
		}
		res, err := Run(ctx, sc, o)
		if err != nil {
			return out, fmt.Errorf("scenario %s: %w", sc.Name, err)
		}
		out = append(out, res)
	}
	return out, nil
}

// Run executes a scenario end to end on a fresh in-process cluster.
func Run(ctx context.Context, sc *scenario.Scenario, o Options) (res *Result, err error) {
	logw := o.Log
	if logw == nil {
		logw = io.Discard
	}
	runner := testcluster.NewRunner(sc.Name, logw)
	defer runner.Close()
	defer testcluster.RecoverFatal(&err)
	var apiFlags []string
	if o.Scheduler != nil {
		apiFlags = o.Scheduler.APIServerFlags
	}
	c, err := testcluster.Start(runner, testcluster.Options{APIServerFlags: apiFlags})
	if err != nil {
		return nil, err
	}
	res = &Result{Scenario: sc}
	d := &driver{c: c, sc: sc, res: res, progress: o.Progress, numaNodes: map[string]*numa.Node{}, sched: o.Scheduler, liveQuorum: o.LiveQuorum, runTimeLimit: o.RunTimeLimit, estimates: o.Estimates}
	if err := d.setUp(ctx); err != nil {
		return nil, err
	}
	config := o.SchedulerConfig
	if config == nil {
		config = manifests.SchedulerConfig
	}
	if err := c.StartKwok(); err != nil {
		return nil, fmt.Errorf("starting kwok: %w", err)
	}
	if s := o.Scheduler; s != nil {
		// A config file's clientConnection wins over --kubeconfig.
		cfg, err := withKubeconfig(s.Config, c.Kubeconfig)
		if err != nil {
			return nil, err
		}
		child, err := c.StartSchedulerBinary(s.Binary, cfg, s.Args...)
		if err != nil {
			return nil, fmt.Errorf("starting %s: %w", s.Name, err)
		}
		// The child's own log goes into the run's log when the run ends
		// (before the cluster's scratch directory is removed).
		defer func() {
			if raw, rerr := os.ReadFile(child.Log); rerr == nil {
				fmt.Fprintf(logw, "\n==== %s log ====\n%s==== end of %s log ====\n", s.Name, raw, s.Name)
			}
		}()
	} else if _, err := c.StartScheduler(config); err != nil {
		return nil, fmt.Errorf("starting scheduler: %w", err)
	}
	if err := c.StartController(); err != nil {
		return nil, fmt.Errorf("starting controller: %w", err)
	}
	if err := d.loop(ctx); err != nil {
		return nil, err
	}
	return res, nil
}

// report draws the progress bar: jobs started and finished, GPUs in use.
func (d *driver) report(now time.Duration, final bool) {
	if d.progress == nil {
		return
	}
	started, finished := 0, 0
	for _, r := range d.res.Jobs {
		if r.Ran() {
			started++
		}
		if r.FinishedAt > 0 {
			finished++
		}
	}
	const width = 30
	total := len(d.sc.Jobs)
	filled := 0
	if total > 0 {
		filled = (started + finished) * width / (2 * total)
	}
	use := ""
	if n := len(d.res.Samples); n > 0 && d.res.GPUs > 0 {
		use = fmt.Sprintf(", GPUs %3.0f%% busy", 100*float64(d.res.Samples[n-1].GPUUsed)/float64(d.res.GPUs))
	}
	line := fmt.Sprintf("  [%s%s] %d/%d jobs started, %d finished%s", strings.Repeat("#", filled), strings.Repeat(".", width-filled), started, total, finished, use)
	if line == d.lastShown && !final {
		return
	}
	d.lastShown = line
	fmt.Fprintf(d.progress, "%s  %5.1fs\n", line, now.Seconds())
}

// collectReasons reads why jobs that did not run are waiting: the PodGroup's
// Scheduled condition for gangs, the PodScheduled condition for plain pods.
func (d *driver) collectReasons(ctx context.Context) error {
	for _, r := range d.res.Jobs {
		if r.Ran() {
			continue
		}
		if r.Job.MinMember == 0 {
			if err := d.podReason(ctx, r); err != nil {
				return err
			}
			continue
		}
		raw, err := d.c.PodGroups.SchedulingV1alpha1().RESTClient().Get().Namespace(r.Job.EffectiveNamespace()).Resource("podgroups").Name(r.Job.Name).DoRaw(ctx)
		if err != nil {
			return err
		}
		conds, err := gangspec.ReadConditions(raw)
		if err != nil {
			return err
		}
		for _, c := range conds {
			if c.Type == "Scheduled" {
				r.Reason = c.Reason + ": " + c.Message
			}
		}
	}
	sort.SliceStable(d.res.Jobs, func(i, j int) bool { return d.res.Jobs[i].Submitted < d.res.Jobs[j].Submitted })
	return nil
}

func (d *driver) podReason(ctx context.Context, r *JobResult) error {
	pods, err := d.c.Client.CoreV1().Pods(r.Job.EffectiveNamespace()).List(ctx, metav1.ListOptions{LabelSelector: jobLabel + "=" + r.Job.Name})
	if err != nil {
		return err
	}
	for _, p := range pods.Items {
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse {
				r.Reason = c.Reason + ": " + c.Message
				return nil
			}
		}
	}
	return nil
}

// withKubeconfig sets a KubeSchedulerConfiguration's clientConnection.kubeconfig.
func withKubeconfig(config []byte, kubeconfig string) ([]byte, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(config, &doc); err != nil {
		return nil, fmt.Errorf("scheduler config: %w", err)
	}
	conn, _ := doc["clientConnection"].(map[string]any)
	if conn == nil {
		conn = map[string]any{}
	}
	conn["kubeconfig"] = kubeconfig
	doc["clientConnection"] = conn
	return yaml.Marshal(doc)
}

// requests returns the requests of a pod of job j (all its pods are alike).
