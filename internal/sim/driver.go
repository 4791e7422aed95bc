package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/numa"
	"github.com/phalanx-sched/phalanx/internal/resources"
	"github.com/phalanx-sched/phalanx/internal/sim/estimates"
	"github.com/phalanx-sched/phalanx/internal/sim/scenario"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

type driver struct {
	c        *testcluster.Cluster
	sc       *scenario.Scenario
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
	estimates    estimates.Model
	labels       map[string]map[string]string
}

// setUp creates the nodes (with their NodeResourceTopology objects), the
// network levels and the queues.
func (d *driver) setUp(ctx context.Context) error {
	sc := d.sc
	for _, g := range sc.Nodes {
		for i := 0; i < g.Count; i++ {
			spec := testcluster.NodeSpec{Name: g.NodeName(i), CPU: g.CPU, Memory: g.Memory, GPUs: g.GPUs, Labels: g.Labels}
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
			Spec:       phalanxv1alpha1.NetworkTopologySpec{Levels: sc.Levels()},
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
func (d *driver) publishTopology(ctx context.Context, g scenario.NodeGroup, node *v1.Node) error {
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

func (d *driver) submit(ctx context.Context, j scenario.Job) error {
	if !d.namespaces[j.EffectiveNamespace()] {
		_, err := d.c.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: j.EffectiveNamespace()}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		d.namespaces[j.EffectiveNamespace()] = true
	}
	if j.MinMember > 0 {
		pg := testcluster.PodGroup(j.EffectiveNamespace(), j.Name, j.MinMember)
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
func (d *driver) createPod(ctx context.Context, j scenario.Job, i int) error {
	spec := podSpec(j, i)
	if d.sched != nil {
		spec.SchedulerName = d.sched.SchedulerName
	}
	pod := spec.Pod()
	if d.runTimeLimit > 0 && j.Duration.Duration > 0 {
		pod.Spec.ActiveDeadlineSeconds = ptr.To(int64(math.Ceil(d.runTimeLimit * j.Duration.Seconds())))
	}
	d.estimates.Annotate(pod, j)
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

func podSpec(j scenario.Job, i int) testcluster.PodSpec {
	spec := testcluster.PodSpec{
		Name: fmt.Sprintf("%s-%d", j.Name, i), Namespace: j.EffectiveNamespace(),
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
