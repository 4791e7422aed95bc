// Package estimatorbench measures the Karmada estimator's latency.
package estimatorbench

// The Karmada estimator's latency: karmada-scheduler asks every member
// cluster's estimator on each scheduling attempt, under a 3 s timeout by
// default, so an answer for a large gang on a large member has to be quick.
// Run measures it end to end: phalanx-scheduler run as users run it
// (--karmada-estimator-address with TLS, --karmada-kubeconfig), a member of
// GPU nodes in IB clusters and leaves, half of its GPUs taken, and Karmada's
// calls timed from the client.

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/bench"
	"github.com/phalanx-sched/phalanx/internal/bench/profiles"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
	"github.com/phalanx-sched/phalanx/internal/testcluster/objects"
)

// Options tune Run.
type Options struct {
	// PhalanxBinary is bin/phalanx-scheduler.
	PhalanxBinary string
	// Nodes of the member (default 5000): 32 CPUs, 256Gi, 8 GPUs each, in IB
	// clusters of IBSize nodes and leaves of LeafSize.
	Nodes int
	// GangSize is the members of one set (default 1024): a master and
	// GangSize-1 GPU workers.
	GangSize int
	// Runs is the timed calls per case (default 20), after one warm-up call.
	Runs int
	// Timeout bounds each call, as karmada-scheduler's
	// --scheduler-estimator-timeout does (default 3 s, its default).
	Timeout time.Duration
	// Profile adds, per case, calls under the scheduler's CPU profiler for
	// at least ProfileSeconds; the top functions are reported.
	Profile        bool
	ProfileSeconds int
	// ProfileDir keeps the raw CPU profiles ("": not kept).
	ProfileDir string
	// Log receives the control plane's log; Progress a line per step.
	Log, Progress io.Writer
}

// The estimator bench's member: every node alike, IB clusters of
// IBSize nodes split in leaves of LeafSize (10 IB clusters
// on 5000 nodes, the last one partial).
const (
	IBSize            = 512
	LeafSize          = 32
	estimatorNodeGPUs = 8
	estimatorNodeCPU  = 32
	estimatorNodeMem  = 256 // Gi
	// Each node runs one pod of fillGPUs(i) GPUs, 2 CPUs and 16Gi per GPU
	// (none when that is 0): half the GPUs of the member are taken, a
	// quarter of its CPUs and memory, unevenly.
	fillCPUPerGPU = 2
	fillMemPerGPU = 16 // Gi
	// The members' requests: a master; workers; the single replica.
	masterCPU, masterMem   = 4, 16 // Gi
	workerCPU, workerMem   = 8, 32 // Gi
	replicaCPU, replicaMem = 1, 4  // Gi
	// estimatorNS holds the workload's template; the calls name it.
	estimatorNS  = "bench"
	templateName = "train"
	// GoalMS is the bound on an answer for a 1024-pod gang
	// on a 5000-node member.
	GoalMS = 100.0
)

// Case is one kind of call, timed Runs times.
type Case struct {
	Name string
	What string
	// Answer is the estimator's answer (sets or replicas); Answers every
	// distinct answer seen, in order (one, on an idle member).
	Answer  int32
	Answers []int32
	// Want describes the sane answer the bench checks.
	Want string
	// ClientMS are the calls' round trips from karmada-scheduler's side;
	// ServerMS the estimator's own phalanx_estimator_duration_seconds for
	// the same calls (nil if /metrics could not be read).
	ClientMS, ServerMS []float64
	// CPUMS is the scheduler process's CPU time over each call (all its
	// goroutines, in clock ticks of 10 ms): what an answer costs whatever
	// else the machine runs.
	CPUMS []float64
	// Timeouts counts the timed calls that got no answer within the
	// timeout (left out of ClientMS and ServerMS).
	Timeouts int
	// CPU summarises the profiled calls' CPU profile (Profile only).
	CPU *profiles.Top
	// Failed says why the case failed (an error or an insane answer).
	Failed string
}

// Gang reports whether the case asks for whole gangs (the goal
// applies to them).
func (c Case) Gang() bool { return c.Name != "replicas" }

// Report is Run's result.
type Report struct {
	Nodes, GangSize, Runs int
	Timeout               time.Duration
	// GPUs of the member and those the fill pods take.
	GPUs, UsedGPUs int
	FillPods       int
	// Setup is from the start to the estimator's first answer; Wall the
	// whole run.
	Setup, Wall time.Duration
	// PeakRSS is the scheduler's peak resident set (bytes).
	PeakRSS float64
	Cases   []Case
}

// fillGPUs is the GPUs the fill pod of node i takes: 0..8, evenly spread.
func fillGPUs(i int) int { return (i * 5) % (estimatorNodeGPUs + 1) }

// workerRoom is how many workers node i takes after its fill pod.
func workerRoom(i int) int {
	g := fillGPUs(i)
	return min((estimatorNodeCPU-fillCPUPerGPU*g)/workerCPU, (estimatorNodeMem-fillMemPerGPU*g)/workerMem, estimatorNodeGPUs-g)
}

// replicaRoom is how many single replicas node i takes after its fill pod.
func replicaRoom(i int) int {
	g, pods := fillGPUs(i), 110
	if g > 0 {
		pods--
	}
	return min((estimatorNodeCPU-fillCPUPerGPU*g)/replicaCPU, (estimatorNodeMem-fillMemPerGPU*g)/replicaMem, estimatorNodeGPUs-g, pods)
}

// Bounds are the answers' upper bounds on the bench's member: by
// worker room alone (the master is small and fits beside), over the whole
// member and summed IB cluster by IB cluster; and the exact count of single
// replicas.
func Bounds(nodes, gangSize int) (sets, setsPerIB, replicas int) {
	workers := max(gangSize-1, 1)
	total := 0
	byIB := map[int]int{}
	for i := range nodes {
		total += workerRoom(i)
		byIB[i/IBSize] += workerRoom(i)
		replicas += replicaRoom(i)
	}
	for _, w := range byIB {
		setsPerIB += w / workers
	}
	return total / workers, setsPerIB, replicas
}

func estimatorNode(i int) testcluster.NodeSpec {
	return testcluster.NodeSpec{
		Name: fmt.Sprintf("node-%d", i), CPU: strconv.Itoa(estimatorNodeCPU), Memory: fmt.Sprintf("%dGi", estimatorNodeMem),
		GPUs: estimatorNodeGPUs, Pods: 110, NRTPolicy: "none",
		Labels: map[string]string{bench.IBLabel: fmt.Sprintf("ib-%d", i/IBSize), bench.LeafLabel: fmt.Sprintf("leaf-%d", i/LeafSize)},
	}
}

// fillPod is node i's pod, bound there from its creation (nil: none).
func fillPod(i int) *v1.Pod {
	g := fillGPUs(i)
	if g == 0 {
		return nil
	}
	pod := testcluster.PodSpec{Name: fmt.Sprintf("fill-%d", i), Namespace: "fill",
		CPU: strconv.Itoa(fillCPUPerGPU * g), Memory: fmt.Sprintf("%dGi", fillMemPerGPU*g), GPUs: int64(g)}.Pod()
	pod.Spec.NodeName = estimatorNode(i).Name
	return pod
}

// createTemplate creates the workload's resource template (a suspended Job
// whose pod template requires one ib-cluster) and its ResourceBinding.
func createTemplate(ctx context.Context, c *testcluster.Cluster) error {
	if err := c.InstallCRDYAML(ctx, objects.ResourceBindingCRD); err != nil {
		return err
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: templateName, Namespace: estimatorNS},
		Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: v1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{phalanxv1alpha1.TopologyRequiredAnnotation: "ib-cluster"}},
			Spec:       v1.PodSpec{RestartPolicy: v1.RestartPolicyNever, Containers: []v1.Container{{Name: "c", Image: "x"}}},
		}},
	}
	if _, err := c.Client.BatchV1().Jobs(estimatorNS).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		return err
	}
	rb := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
		"metadata": map[string]any{"name": templateName + "-job", "namespace": estimatorNS},
		"spec":     map[string]any{"resource": map[string]any{"apiVersion": "batch/v1", "kind": "Job", "name": templateName, "namespace": estimatorNS}},
	}}
	gvr := schema.GroupVersionResource{Group: "work.karmada.io", Version: "v1alpha2", Resource: "resourcebindings"}
	_, err := c.Dynamic.Resource(gvr).Namespace(estimatorNS).Create(ctx, rb, metav1.CreateOptions{})
	return err
}

// withDefaults fills in the options left zero.
func (o Options) withDefaults() Options {
	if o.Nodes <= 0 {
		o.Nodes = 5000
	}
	if o.GangSize <= 1 {
		o.GangSize = 1024
	}
	if o.Runs <= 0 {
		o.Runs = 20
	}
	if o.Timeout <= 0 {
		o.Timeout = 3 * time.Second
	}
	if o.ProfileSeconds <= 0 {
		o.ProfileSeconds = 6
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return o
}

// fillFigures are the GPUs the fill pods of a member of nodes take, and
// how many fill pods there are.
func fillFigures(nodes int) (usedGPUs, pods int) {
	for i := range nodes {
		if g := fillGPUs(i); g > 0 {
			usedGPUs += g
			pods++
		}
	}
	return usedGPUs, pods
}

// buildMember creates the member's nodes, its NetworkTopology, the fill
// pods and the workload's template.
func buildMember(ctx context.Context, c *testcluster.Cluster, o Options, rep *Report) error {
	fmt.Fprintf(o.Progress, "estimator: creating %d nodes (%d IB clusters of %d, leaves of %d)\n", o.Nodes, (o.Nodes+IBSize-1)/IBSize, IBSize, LeafSize)
	if err := bench.Parallel(ctx, o.Nodes, func(i int) error { return c.CreateNodes(ctx, estimatorNode(i)) }); err != nil {
		return err
	}
	if _, err := c.Phalanx.SchedulingV1alpha1().NetworkTopologies().Create(ctx, bench.NetworkTopology(), metav1.CreateOptions{}); err != nil {
		return err
	}
	for _, ns := range []string{"fill", estimatorNS} {
		if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	rep.UsedGPUs, rep.FillPods = fillFigures(o.Nodes)
	fmt.Fprintf(o.Progress, "estimator: binding %d pods to take %d of %d GPUs\n", rep.FillPods, rep.UsedGPUs, rep.GPUs)
	if err := bench.Parallel(ctx, o.Nodes, func(i int) error {
		pod := fillPod(i)
		if pod == nil {
			return nil
		}
		_, err := c.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}
	return createTemplate(ctx, c)
}
