package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	configv1 "github.com/phalanx-sched/phalanx/apis/config/v1"
	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/numa"
	"github.com/phalanx-sched/phalanx/internal/resources"
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
type JobResult struct {
	Job       Job
	key       string // Job.Key()
	Submitted time.Duration
	// QuorumAt is when MinMember (or all, for plain jobs) members were bound.
	QuorumAt time.Duration
	// FinishedAt is when the last pod completed (0: it did not).
	FinishedAt time.Duration
	// Spread is the time between the first and the quorum-th bind: how long
	// the gang was partially bound (binds of one Permit land over milliseconds).
	Spread    time.Duration
	MaxBound  int
	Completed int
	// Evicted counts pods deleted before they completed (reclaim); the
	// simulator resubmits them, as a training operator would.
	Evicted int
	// Nodes counts the job's pods per node, over the whole run.
	Nodes map[string]int
	// Reason is the scheduler's condition message for a job that did not run.
	Reason string
	// MaxLiveDomains is the most domains of the job's required network
	// level its running pods spanned at one sample (0 without a
	// requirement). Unlike Nodes, it does not add up placements a gang had
	// before and after being evicted and resubmitted.
	MaxLiveDomains int
	// MaxSplitSubGroups is, for a job with sub-groups (ranks by label), the
	// most sub-groups whose running pods spanned more than one domain of
	// the sub-groups' level at one sample.
	MaxSplitSubGroups int

	// CompletedGPUSeconds is GPUs × seconds (of the run) held by this
	// job's pods that ran to completion, bound to completed; LostGPUSeconds
	// by its pods deleted before they completed (reclaim, preemption), bound
	// to deleted: work thrown away.
	CompletedGPUSeconds, LostGPUSeconds float64
	// RestartedAt is when the job reached its quorum again after evictions
	// broke it (0: never broken, or not restarted).
	RestartedAt time.Duration
	// WaitedBy is the replay time this job spent waiting by cause
	// (WaitCause), judged at each sample until the next; HeldBy the part
	// judged WaitRoomHeld by the scheduler's last word on its pods.
	WaitedBy, HeldBy map[string]time.Duration

	// lastCause and lastWord are the cause and word judged at the last
	// sample, counted into WaitedBy and HeldBy at the next.
	lastCause, lastWord string
	firstAt             time.Duration
	placed              map[string]bool // pods seen bound, by name
	done                map[string]bool
	boundAt             map[string]time.Duration
	broken              bool // evictions took it below its quorum after it started
}

// Ran reports whether the job reached its quorum.
func (r *JobResult) Ran() bool { return r.QuorumAt > 0 }

// Wait is the time from submission to quorum; for a job whose quorum
// evictions broke, from its first submission to its last start (it is
// resubmitted as a training operator would, and waits again).
func (r *JobResult) Wait() time.Duration {
	if r.RestartedAt > 0 {
		return r.RestartedAt - r.Submitted
	}
	return r.QuorumAt - r.Submitted
}

// WaitUntil is Wait for a job that started, and for one that did not, its
// wait until end.
func (r *JobResult) WaitUntil(end time.Duration) time.Duration {
	if r.Ran() {
		return r.Wait()
	}
	return end - r.Submitted
}

// Sample is the cluster at one moment.
type Sample struct {
	At      time.Duration
	GPUUsed int64
	CPUUsed int64 // millicores
	// UsefulGPU is held by pods of jobs that started (gangs with minMember
	// bound, and plain pods); StrandedGPU by members of gangs that did not.
	UsefulGPU, StrandedGPU int64
	// FragGPU counts free GPUs on nodes where no waiting pod fits
	// (FragmentedGPUs); JobsWaiting the submitted jobs not started yet.
	FragGPU     int64
	JobsWaiting int
	// LongestWait is how long the job waiting longest has waited so far.
	LongestWait time.Duration
	// QueueWaitingGPU is the GPUs the queue's unbound pods ask for.
	QueueWaitingGPU map[string]int64
	// QueueUsed is the dominant resource (GPUs, or millicores without GPUs)
	// used per queue; QueueWaiting counts the queue's unbound pods.
	QueueUsed    map[string]int64
	QueueWaiting map[string]int
	// WaitCauses counts the waiting jobs by why they had not started
	// (WaitCause).
	WaitCauses map[string]int
	// HeldBy counts the jobs judged WaitRoomHeld by the scheduler's last
	// word on one of their unbound pods (SchedulerWord).
	HeldBy map[string]int
	// IdleGPU is the free GPUs of the untainted nodes per domain of each
	// network level above the host, keyed "level=domain" (nil without
	// levels): where the idle GPUs were.
	IdleGPU map[string]int
	// SchedulerQueue is the in-process scheduler's pending pods by its
	// queue (scheduler_pending_pods: active, backoff, unschedulable,
	// gated, ...); nil for a scheduler binary.
	SchedulerQueue map[string]int
}

// NodeResult is a node of the simulated cluster.
type NodeResult struct {
	Name    string
	Labels  map[string]string
	GPUs    int64
	CPU     int64 // millicores
	Memory  int64 // bytes
	Tainted bool
	Zones   int
}

// Result is a finished run.
type Result struct {
	Scenario *Scenario
	Jobs     []*JobResult
	Elapsed  time.Duration
	GPUs     int64
	CPU      int64 // millicores
	Nodes    []NodeResult
	Samples  []Sample
	// NUMAViolations lists moments when the pods running on a NUMA node did
	// not fit its zones as the kubelet would assign them.
	NUMAViolations []string
	// SubmitLag is the longest a job's submission started after its
	// arrival: the replay's own delay, not the scheduler's.
	SubmitLag time.Duration
}

// RunSuite runs every scenario of a suite, each on its own cluster.
func RunSuite(ctx context.Context, suite *Suite, o Options) ([]*Result, error) {
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
func Run(ctx context.Context, sc *Scenario, o Options) (res *Result, err error) {
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
	d := &driver{c: c, sc: sc, res: res, progress: o.Progress, numaNodes: map[string]*numa.Node{}, sched: o.Scheduler, liveQuorum: o.LiveQuorum, runTimeLimit: o.RunTimeLimit}
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

type driver struct {
	c        *testcluster.Cluster
	sc       *Scenario
	res      *Result
	progress io.Writer

	start     time.Time
	lastShown string
	// finishing counts pods running with a run time: the run is not over
	// while kwok still has pods to complete.
	finishing  int
	submitted  map[string]*JobResult
	numaNodes  map[string]*numa.Node
	namespaces map[string]bool
	sched      *SchedulerSpec
	liveQuorum bool
	// watch decides gangs' starts from every pod transition (liveQuorum).
	watch *quorumWatch
	pods  *jobPods
	// podRequests: each job's pod requests (its pods are alike), so a
	// sample does not add up every pod's containers again.
	podRequests map[string]resources.List
	// A sample reads every job pod of the replay: what it learnt of a pod
	// once is kept. jobs: each pod's job; finished: pods counted as
	// completed; words: the scheduler's last word on a pending pod.
	jobs     map[types.UID]*JobResult
	finished map[types.UID]*JobResult
	words    map[types.UID]podWord
	// queue: the scheduler's pending pods by queue, read at queueRead.
	queue        map[string]int
	queueRead    time.Time
	runTimeLimit float64
	labels       map[string]map[string]string
}

// setUp creates the nodes (with their NodeResourceTopology objects), the
// network levels and the queues.
func (d *driver) setUp(ctx context.Context) error {
	sc := d.sc
	for _, g := range sc.Nodes {
		for i := 0; i < g.Count; i++ {
			spec := testcluster.NodeSpec{Name: g.nodeName(i), CPU: g.CPU, Memory: g.Memory, GPUs: g.GPUs, Labels: g.Labels}
			if g.Tainted {
				spec.Taints = []v1.Taint{{Key: "phalanx.dev/reserved", Value: "true", Effect: v1.TaintEffectNoSchedule}}
			}
			if err := d.c.CreateNodes(ctx, spec); err != nil {
				return err
			}
			node := spec.Node()
			if err := d.publishTopology(ctx, g, node); err != nil {
				return err
			}
			n := NodeResult{Name: node.Name, Labels: node.Labels, GPUs: g.GPUs, CPU: node.Status.Allocatable.Cpu().MilliValue(), Memory: node.Status.Allocatable.Memory().Value(), Tainted: g.Tainted, Zones: g.NUMAZones}
			if !g.Tainted {
				d.res.GPUs += n.GPUs
				d.res.CPU += n.CPU
			}
			d.res.Nodes = append(d.res.Nodes, n)
		}
	}
	if len(sc.Network) > 0 {
		nt := &phalanxv1alpha1.NetworkTopology{
			ObjectMeta: metav1.ObjectMeta{Name: phalanxv1alpha1.DefaultNetworkTopologyName},
			Spec:       phalanxv1alpha1.NetworkTopologySpec{Levels: sc.levels()},
		}
		if _, err := d.c.Phalanx.SchedulingV1alpha1().NetworkTopologies().Create(ctx, nt, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("network: %w", err)
		}
	}
	for _, q := range sc.Queues {
		obj := &phalanxv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: q.Name}, Spec: q.QueueSpec}
		if _, err := d.c.Phalanx.SchedulingV1alpha1().Queues().Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("queue %s: %w", q.Name, err)
		}
	}
	return nil
}

// publishTopology writes the node's NodeResourceTopology object as NFD
// topology-updater would: its zones, or one zone holding the whole node on
// GPU nodes without zones (policy none). CPU-only nodes without zones get
// none, like nodes without the updater.
func (d *driver) publishTopology(ctx context.Context, g NodeGroup, node *v1.Node) error {
	zones, policy := g.NUMAZones, g.TopologyPolicy
	if zones == 0 && g.GPUs == 0 && policy == "" {
		return nil
	}
	if zones == 0 {
		zones = 1
	}
	if policy == "" {
		policy = "none"
		if g.NUMAZones > 0 {
			policy = "single-numa-node"
		}
	}
	alloc := node.Status.Allocatable
	specs := make([]testcluster.ZoneSpec, zones)
	for z := range specs {
		specs[z] = testcluster.ZoneSpec{
			Name:   fmt.Sprintf("node-%d", z),
			CPU:    fmt.Sprintf("%dm", alloc.Cpu().MilliValue()/int64(zones)),
			Memory: fmt.Sprint(alloc.Memory().Value() / int64(zones)),
			GPUs:   g.GPUs / int64(zones),
		}
	}
	nrt := testcluster.NRT(node.Name, policy, "", specs...)
	if err := d.c.ApplyNRT(ctx, nrt); err != nil {
		return err
	}
	if g.NUMAZones > 0 {
		n, err := numa.FromNRT(nrt)
		if err != nil {
			return err
		}
		d.numaNodes[node.Name] = n
	}
	return nil
}

func (d *driver) loop(ctx context.Context) error {
	d.start = time.Now()
	if d.liveQuorum {
		d.watch = newQuorumWatch(d.sc.Jobs, func() time.Duration { return time.Since(d.start) })
	}
	d.pods = startJobPods(ctx, d.c.Client, d.watch)
	d.submitted = map[string]*JobResult{}
	d.jobs, d.finished, d.words = map[types.UID]*JobResult{}, map[types.UID]*JobResult{}, map[types.UID]podWord{}
	d.namespaces = map[string]bool{}
	lastChange := time.Now()
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for {
		now := time.Since(d.start)
		for _, j := range d.sc.Jobs {
			if d.submitted[j.Key()] != nil || j.Arrival.Duration > now {
				continue
			}
			d.res.SubmitLag = max(d.res.SubmitLag, time.Since(d.start)-j.Arrival.Duration)
			if err := d.submit(ctx, j); err != nil {
				return err
			}
			r := &JobResult{Job: j, key: j.Key(), Submitted: now, Nodes: map[string]int{}, placed: map[string]bool{}, done: map[string]bool{}, boundAt: map[string]time.Duration{}}
			d.submitted[j.Key()] = r
			d.res.Jobs = append(d.res.Jobs, r)
			lastChange = time.Now()
		}
		changed, err := d.observe(ctx, now)
		if err != nil {
			return err
		}
		if changed {
			lastChange = time.Now()
		}
		d.report(now, false)
		if len(d.submitted) == len(d.sc.Jobs) && d.settled(lastChange) {
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
	d.report(d.res.Elapsed, true)
	return d.collectReasons(ctx)
}

// settled: every job finished its work, or nothing changed for a while after
// the last arrival (what still waits, waits for good).
func (d *driver) settled(lastChange time.Time) bool {
	all := true
	for _, r := range d.res.Jobs {
		if r.Completed < r.Job.Replicas && !(r.Job.Duration.Duration == 0 && r.Ran()) {
			all = false
		}
	}
	return all || (d.finishing == 0 && time.Since(lastChange) > 5*time.Second)
}

func (d *driver) submit(ctx context.Context, j Job) error {
	if !d.namespaces[j.namespace()] {
		_, err := d.c.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: j.namespace()}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		d.namespaces[j.namespace()] = true
	}
	if j.MinMember > 0 {
		pg := testcluster.PodGroup(j.namespace(), j.Name, j.MinMember)
		pg.Annotations = map[string]string{}
		for k, v := range j.Annotations {
			pg.Annotations[k] = v
		}
		if len(j.DependsOn) > 0 {
			pg.Annotations[phalanxv1alpha1.DependsOnAnnotation] = strings.Join(j.DependsOn, ",")
		}
		if j.Queue != "" {
			pg.Labels = map[string]string{phalanxv1alpha1.QueueLabel: j.Queue}
		}
		if err := d.c.CreatePodGroup(ctx, pg); err != nil {
			return err
		}
	}
	if d.sched != nil && d.sched.UpstreamGang && j.MinMember > 0 {
		if err := d.createUpstreamGang(ctx, j); err != nil {
			return err
		}
	}
	// In parallel: one at a time, a burst of 64- and 128-pod jobs kept the
	// replay's loop creating pods for a minute of the 512-node trace, with
	// no samples taken and later jobs submitted late.
	errs := make([]error, j.Replicas)
	workqueue.ParallelizeUntil(ctx, createWorkers, j.Replicas, func(i int) {
		errs[i] = d.createPod(ctx, j, i)
	})
	return errors.Join(errs...)
}

// createWorkers is how many of a job's pods are created at once.
const createWorkers = 16

// createPod creates pod i of job j for the run's scheduler.
func (d *driver) createPod(ctx context.Context, j Job, i int) error {
	spec := podSpec(j, i)
	if d.sched != nil {
		spec.SchedulerName = d.sched.SchedulerName
	}
	pod := spec.Pod()
	if d.runTimeLimit > 0 && j.Duration.Duration > 0 {
		pod.Spec.ActiveDeadlineSeconds = ptr.To(int64(math.Ceil(d.runTimeLimit * j.Duration.Seconds())))
	}
	if d.sched != nil && d.sched.UpstreamGang && j.MinMember > 0 {
		pod.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(d.upstreamGang(j).GroupOf(i))}
	}
	created, err := d.c.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if pod.Spec.SchedulingGroup != nil && created.Spec.SchedulingGroup == nil {
		return fmt.Errorf("the API server dropped spec.schedulingGroup of %s: is the GenericWorkload gate on?", pod.Name)
	}
	return nil
}

func podSpec(j Job, i int) testcluster.PodSpec {
	spec := testcluster.PodSpec{
		Name: fmt.Sprintf("%s-%d", j.Name, i), Namespace: j.namespace(),
		CPU: j.CPU, Memory: j.Memory, GPUs: j.GPUs, Priority: j.Priority, Guaranteed: j.Guaranteed,
		Labels:      map[string]string{jobLabel: j.Name},
		Annotations: map[string]string{},
	}
	if j.MinMember > 0 {
		spec.PodGroup = j.Name
	}
	if j.Queue != "" {
		spec.Labels[phalanxv1alpha1.QueueLabel] = j.Queue
	}
	if j.Ranks {
		spec.Labels[phalanxv1alpha1.RankLabel] = strconv.Itoa(i)
	}
	if j.Duration.Duration > 0 {
		spec.Annotations[testcluster.RunForAnnotation] = j.Duration.String()
	}
	return spec
}

const jobLabel = "sim.phalanx.dev/job"

// observe reads every pod once and updates the job results and the sample.
// kwok plays the kubelet: it starts bound pods and completes them after their
// run time. Pods deleted before completing (reclaim) are resubmitted.
func (d *driver) observe(ctx context.Context, now time.Duration) (bool, error) {
	pods, err := d.pods.list()
	if err != nil {
		return false, err
	}
	changed := false
	bound := map[string]int{}
	running := map[string][]*v1.Pod{}
	d.finishing = 0
	sample := Sample{At: now, QueueUsed: map[string]int64{}, QueueWaiting: map[string]int{}, QueueWaitingGPU: map[string]int64{}}
	live := map[string]int{}              // per job: bound, not completed
	liveNodes := map[string][]string{}    // per job: nodes of its running pods
	liveRanks := map[string][]rankedPod{} // per job with sub-groups: its running pods' ranks and nodes
	jobGPU := map[string]int64{}          // per job: GPUs of its running pods
	nodeUsed := map[string]Room{}         // per node: requests of its running pods
	waitingShapes := map[Shape]bool{}     // shapes of the unbound pods
	jobShape := map[string]Shape{}        // per job: the shape of its unbound pods
	jobWord := map[string]string{}        // per job: the scheduler's last word on an unbound pod
	jobWordPod := map[string]string{}     // per job: the pod jobWord is from
	for _, p := range pods {
		if r := d.finished[p.UID]; r != nil {
			// Counted when it completed; most pods of a long replay are.
			bound[r.key]++
			continue
		}
		r := d.jobOf(p)
		if r == nil {
			continue
		}
		queue := r.Job.Queue
		if queue == "" {
			queue = configv1.DefaultQueueName
		}
		if p.Spec.NodeName == "" {
			sample.QueueWaiting[queue]++
			req := d.requests(r.Job, p)
			sample.QueueWaitingGPU[queue] += req[testcluster.GPU]
			shape := Shape{CPU: req[v1.ResourceCPU], Memory: req[v1.ResourceMemory], GPUs: req[testcluster.GPU]}
			waitingShapes[shape] = true
			jobShape[r.key] = shape
			// A word other than not-tried wins; among alike, the first pod
			// by name (the list comes in map order).
			w := d.schedulerWord(p)
			tried := func(w string) bool { return w != "" && w != WordNotTried }
			if cur, ok := jobWord[r.key]; !ok || tried(w) && !tried(cur) || tried(w) == tried(cur) && p.Name < jobWordPod[r.key] {
				jobWord[r.key], jobWordPod[r.key] = w, p.Name
			}
			continue
		}
		if !r.placed[p.Name] {
			r.placed[p.Name] = true
			r.boundAt[p.Name] = now
			r.Nodes[p.Spec.NodeName]++
			changed = true
		}
		if p.Status.Phase == v1.PodSucceeded {
			if !r.done[p.Name] {
				r.done[p.Name] = true
				r.CompletedGPUSeconds += float64(r.Job.GPUs) * (now - r.boundAt[p.Name]).Seconds()
				r.Completed++
				d.finished[p.UID] = r
				changed = true
				if r.Completed == r.Job.Replicas {
					r.FinishedAt = now
				}
			}
		} else if p.DeletionTimestamp == nil {
			req := d.requests(r.Job, p)
			gpus, cpu := req[testcluster.GPU], req[v1.ResourceCPU]
			sample.GPUUsed += gpus
			sample.CPUUsed += cpu
			if d.res.GPUs > 0 {
				sample.QueueUsed[queue] += gpus
			} else {
				sample.QueueUsed[queue] += cpu
			}
			running[p.Spec.NodeName] = append(running[p.Spec.NodeName], p)
			live[r.key]++
			liveNodes[r.key] = append(liveNodes[r.key], p.Spec.NodeName)
			if rank, err := strconv.Atoi(p.Labels[phalanxv1alpha1.RankLabel]); err == nil {
				liveRanks[r.key] = append(liveRanks[r.key], rankedPod{rank, p.Spec.NodeName})
			}
			jobGPU[r.key] += gpus
			u := nodeUsed[p.Spec.NodeName]
			u.CPU += cpu
			u.Memory += req[v1.ResourceMemory]
			u.GPUs += gpus
			nodeUsed[p.Spec.NodeName] = u
			if r.Job.Duration.Duration > 0 {
				d.finishing++
			}
		}
		bound[r.key]++
	}
	evicted := d.pods.takeEvicted()
	for _, key := range slices.Sorted(maps.Keys(evicted)) { // namespace/name
		p := evicted[key]
		// Deleted before it completed (reclaim, preemption,
		// consolidation): resubmit it, as a training operator would.
		r := d.submitted[p.Namespace+"/"+p.Labels[jobLabel]]
		i, err := strconv.Atoi(strings.TrimPrefix(p.Name, p.Labels[jobLabel]+"-"))
		if r == nil || err != nil || r.done[p.Name] {
			continue
		}
		if at, ok := r.boundAt[p.Name]; ok {
			r.LostGPUSeconds += float64(r.Job.GPUs) * (now - at).Seconds()
			delete(r.boundAt, p.Name)
		}
		delete(r.placed, p.Name)
		r.Evicted++
		changed = true
		if err := d.createPod(ctx, r.Job, i); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, err
		}
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
		if d.watch != nil && r.Job.MinMember > 0 {
			continue // the watch decides (below)
		}
		if r.QuorumAt == 0 && n >= need {
			r.QuorumAt = now
			r.Spread = now - r.firstAt
		}
	}
	for _, r := range d.res.Jobs {
		need := int(r.Job.MinMember)
		if need > 0 && d.watch != nil {
			first, quorum, restarted := d.watch.times(r.Job.Key())
			if r.QuorumAt == 0 && quorum > 0 {
				r.QuorumAt, r.Spread = quorum, quorum-first
			}
			r.RestartedAt = restarted
			continue
		}
		if need == 0 || r.QuorumAt == 0 || r.Completed > 0 {
			continue
		}
		switch n := bound[r.Job.Key()]; {
		case r.Evicted > 0 && n < need && !r.broken:
			r.broken = true
		case r.broken && n >= need:
			r.broken, r.RestartedAt = false, now
		}
	}
	for _, r := range d.res.Jobs {
		if level := d.sc.level(r.Job.requiredLevel()); level != nil && len(liveNodes[r.Job.Key()]) > 0 {
			domains := map[string]bool{}
			for _, n := range liveNodes[r.Job.Key()] {
				domains[d.nodeLabels()[n][level.NodeLabel]] = true
			}
			r.MaxLiveDomains = max(r.MaxLiveDomains, len(domains))
		}
		if size, name := r.Job.subGroups(); size > 0 && len(liveRanks[r.Job.Key()]) > 0 {
			if level := d.sc.level(name); level != nil {
				r.MaxSplitSubGroups = max(r.MaxSplitSubGroups, splitSubGroups(liveRanks[r.Job.Key()], size, func(node string) string {
					return d.nodeLabels()[node][level.NodeLabel]
				}))
			}
		}
		if !r.Ran() {
			sample.JobsWaiting++
			sample.LongestWait = max(sample.LongestWait, now-r.Submitted)
		}
		if r.Ran() || r.Job.MinMember == 0 {
			sample.UsefulGPU += jobGPU[r.Job.Key()]
		} else {
			sample.StrandedGPU += jobGPU[r.Job.Key()]
		}
	}
	shapes := make([]Shape, 0, len(waitingShapes))
	for s := range waitingShapes {
		shapes = append(shapes, s)
	}
	rooms := make([]Room, 0, len(d.res.Nodes))
	nodes := d.untainted()
	for _, n := range nodes {
		u := nodeUsed[n.Name]
		rooms = append(rooms, Room{CPU: n.CPU - u.CPU, Memory: n.Memory - u.Memory, GPUs: n.GPUs - u.GPUs})
	}
	sample.FragGPU = FragmentedGPUs(rooms, shapes)
	var since time.Duration
	if n := len(d.res.Samples); n > 0 {
		since = now - d.res.Samples[n-1].At
	}
	sample.WaitCauses, sample.HeldBy = d.waitCauses(nodes, rooms, jobShape, jobWord, live, since)
	sample.IdleGPU = d.idleByDomain(nodes, rooms)
	if d.sched == nil {
		// Gathering every metric costs more than a sample; once a second
		// is enough for a mean over minutes.
		if d.queueRead.IsZero() || time.Since(d.queueRead) >= time.Second {
			d.queue, d.queueRead = schedulerQueue(), time.Now()
		}
		sample.SchedulerQueue = d.queue
	}
	d.checkNUMA(now, running)
	d.res.Samples = append(d.res.Samples, sample)
	return changed, nil
}

// untainted lists the nodes pods may be scheduled to.
func (d *driver) untainted() []NodeResult {
	var out []NodeResult
	for _, n := range d.res.Nodes {
		if !n.Tainted {
			out = append(out, n)
		}
	}
	return out
}

// idleByDomain sums the free GPUs of rooms (those of nodes, the untainted
// nodes) per domain of each network level above the host.
func (d *driver) idleByDomain(nodes []NodeResult, rooms []Room) map[string]int {
	if len(d.sc.Network) == 0 {
		return nil
	}
	out := map[string]int{}
	for i, n := range nodes {
		for _, l := range d.sc.Network {
			out[DomainKey(l.Name, n.Labels[l.NodeLabel])] += int(rooms[i].GPUs)
		}
	}
	return out
}

// waitCauses counts the jobs waiting at a sample by why (WaitCause), and
// those judged WaitRoomHeld by the scheduler's word on them: rooms are the
// free room of nodes (the untainted ones), jobShape the shape of each job's unbound pods,
// word the scheduler's last word on one of them, live each job's bound pods
// not yet completed. Each job's cause at the last sample is counted into its
// WaitedBy for since, the time from that sample to this one.
func (d *driver) waitCauses(nodes []NodeResult, rooms []Room, jobShape map[string]Shape, word map[string]string, live map[string]int, since time.Duration) (causes, heldBy map[string]int) {
	out, held := map[string]int{}, map[string]int{}
	// Each node's domain per level, made once per sample, not per job.
	domainsOf := map[string][]string{}
	for _, r := range d.res.Jobs {
		r.countWait(since)
		shape, unbound := jobShape[r.Job.Key()]
		if r.Ran() || !unbound {
			continue
		}
		need := 1
		if r.Job.MinMember > 0 {
			need = max(int(r.Job.MinMember)-live[r.Job.Key()], 1)
		}
		var domains []string
		if level := d.sc.level(r.Job.requiredLevel()); level != nil {
			if domains = domainsOf[level.Name]; domains == nil {
				domains = make([]string, len(nodes))
				for i, n := range nodes {
					domains[i] = n.Labels[level.NodeLabel]
				}
				domainsOf[level.Name] = domains
			}
		}
		cause := WaitCause(rooms, domains, shape, need)
		out[cause]++
		r.lastCause = cause
		if cause == WaitRoomHeld {
			held[word[r.Job.Key()]]++
			r.lastWord = word[r.Job.Key()]
		}
	}
	return out, held
}

// countWait adds since to the cause (and word) judged at the last sample,
// and forgets them: the next sample judges again.
func (r *JobResult) countWait(since time.Duration) {
	if r.lastCause != "" && since > 0 {
		if r.WaitedBy == nil {
			r.WaitedBy = map[string]time.Duration{}
		}
		r.WaitedBy[r.lastCause] += since
		if r.lastCause == WaitRoomHeld {
			if r.HeldBy == nil {
				r.HeldBy = map[string]time.Duration{}
			}
			r.HeldBy[r.lastWord] += since
		}
	}
	r.lastCause, r.lastWord = "", ""
}

// rankedPod is a running pod's rank and node.
type rankedPod struct {
	rank int
	node string
}

// splitSubGroups counts the sub-groups (ranks k×size … (k+1)×size−1) whose
// pods are in more than one domain (domain of a node).
func splitSubGroups(pods []rankedPod, size int, domain func(node string) string) int {
	domains := map[int]map[string]bool{}
	for _, p := range pods {
		k := p.rank / size
		if domains[k] == nil {
			domains[k] = map[string]bool{}
		}
		domains[k][domain(p.node)] = true
	}
	split := 0
	for _, d := range domains {
		if len(d) > 1 {
			split++
		}
	}
	return split
}

// nodeLabels maps node names to their labels.
func (d *driver) nodeLabels() map[string]map[string]string {
	if d.labels == nil {
		d.labels = map[string]map[string]string{}
		for _, n := range d.res.Nodes {
			d.labels[n.Name] = n.Labels
		}
	}
	return d.labels
}

// checkNUMA replays, on every NUMA node, the kubelet's admission of the pods
// running there in the order they started: each must get its zones.
func (d *driver) checkNUMA(now time.Duration, running map[string][]*v1.Pod) {
	// By node name: only the first violations are kept.
	for _, node := range slices.Sorted(maps.Keys(running)) {
		pods := running[node]
		n := d.numaNodes[node]
		if n == nil {
			continue
		}
		sort.Slice(pods, func(i, j int) bool {
			a, b := pods[i].Status.StartTime, pods[j].Status.StartTime
			if a == nil || b == nil || a.Equal(b) {
				return pods[i].Name < pods[j].Name
			}
			return a.Before(b)
		})
		charged := map[string]resources.List{}
		for _, p := range pods {
			assignment, ok, reason := n.Fit(p, charged)
			if !ok {
				msg := fmt.Sprintf("at %.1fs %s/%s on %s: %s", now.Seconds(), p.Namespace, p.Name, node, reason)
				if len(d.res.NUMAViolations) < 20 {
					d.res.NUMAViolations = append(d.res.NUMAViolations, msg)
				}
				break
			}
			for zone, l := range numa.Usage(assignment) {
				if charged[zone] == nil {
					charged[zone] = resources.List{}
				}
				charged[zone].Add(l)
			}
		}
	}
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
		raw, err := d.c.PodGroups.SchedulingV1alpha1().RESTClient().Get().Namespace(r.Job.namespace()).Resource("podgroups").Name(r.Job.Name).DoRaw(ctx)
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
	pods, err := d.c.Client.CoreV1().Pods(r.Job.namespace()).List(ctx, metav1.ListOptions{LabelSelector: jobLabel + "=" + r.Job.Name})
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
func (d *driver) requests(j Job, p *v1.Pod) resources.List {
	if req, ok := d.podRequests[j.Key()]; ok {
		return req
	}
	req := resources.PodRequests(p)
	if d.podRequests == nil {
		d.podRequests = map[string]resources.List{}
	}
	d.podRequests[j.Key()] = req
	return req
}

// jobOf returns the pod's job (nil: not the replay's).
func (d *driver) jobOf(p *v1.Pod) *JobResult {
	if r, ok := d.jobs[p.UID]; ok {
		return r
	}
	r := d.submitted[p.Namespace+"/"+p.Labels[jobLabel]]
	if r != nil {
		d.jobs[p.UID] = r
	}
	return r
}

// podWord is SchedulerWord of one version of a pod.
type podWord struct {
	resourceVersion, word string
}

// schedulerWord is SchedulerWord, computed once per version of the pod.
func (d *driver) schedulerWord(p *v1.Pod) string {
	if w, ok := d.words[p.UID]; ok && w.resourceVersion == p.ResourceVersion {
		return w.word
	}
	w := SchedulerWord(p)
	d.words[p.UID] = podWord{p.ResourceVersion, w}
	return w
}
