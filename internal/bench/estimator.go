package bench

// The Karmada estimator's latency: karmada-scheduler asks every member
// cluster's estimator on each scheduling attempt, under a 3 s timeout by
// default, so an answer for a large gang on a large member has to be quick.
// RunEstimator measures it end to end: phalanx-scheduler run as users run it
// (--karmada-estimator-address with TLS, --karmada-kubeconfig), a member of
// GPU nodes in IB clusters and leaves, half of its GPUs taken, and Karmada's
// calls timed from the client.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/estimator/estimatortest"
	"github.com/phalanx-sched/phalanx/internal/estimator/karmadapb"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
	"github.com/phalanx-sched/phalanx/manifests"
)

// EstimatorOptions tune RunEstimator.
type EstimatorOptions struct {
	// PhalanxBinary is bin/phalanx-scheduler.
	PhalanxBinary string
	// Nodes of the member (default 5000): 32 CPUs, 256Gi, 8 GPUs each, in IB
	// clusters of EstimatorIBSize nodes and leaves of EstimatorLeafSize.
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
// EstimatorIBSize nodes split in leaves of EstimatorLeafSize (10 IB clusters
// on 5000 nodes, the last one partial).
const (
	EstimatorIBSize   = 512
	EstimatorLeafSize = 32
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
	// EstimatorGoalMS is the bound on an answer for a 1024-pod gang
	// on a 5000-node member.
	EstimatorGoalMS = 100.0
)

// EstimatorCase is one kind of call, timed Runs times.
type EstimatorCase struct {
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
	CPU *Top
	// Failed says why the case failed (an error or an insane answer).
	Failed string
}

// Gang reports whether the case asks for whole gangs (the goal
// applies to them).
func (c EstimatorCase) Gang() bool { return c.Name != "replicas" }

// EstimatorReport is RunEstimator's result.
type EstimatorReport struct {
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
	Cases   []EstimatorCase
}

// Latency is the median, range and 95th percentile of call durations (ms).
type Latency struct{ Median, Min, Max, P95 float64 }

// LatencyOf summarises durations; the 95th percentile is the nearest rank.
func LatencyOf(ms []float64) Latency {
	if len(ms) == 0 {
		return Latency{math.NaN(), math.NaN(), math.NaN(), math.NaN()}
	}
	s := SpreadOf(ms)
	v := append([]float64(nil), ms...)
	sort.Float64s(v)
	rank := int(math.Ceil(0.95*float64(len(v)))) - 1
	return Latency{Median: s.Median, Min: s.Min, Max: s.Max, P95: v[max(rank, 0)]}
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

// EstimatorBounds are the answers' upper bounds on the bench's member: by
// worker room alone (the master is small and fits beside), over the whole
// member and summed IB cluster by IB cluster; and the exact count of single
// replicas.
func EstimatorBounds(nodes, gangSize int) (sets, setsPerIB, replicas int) {
	workers := max(gangSize-1, 1)
	total := 0
	byIB := map[int]int{}
	for i := range nodes {
		total += workerRoom(i)
		byIB[i/EstimatorIBSize] += workerRoom(i)
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
		Labels: map[string]string{IBLabel: fmt.Sprintf("ib-%d", i/EstimatorIBSize), LeafLabel: fmt.Sprintf("leaf-%d", i/EstimatorLeafSize)},
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

// resourceBindingCRD is the part of Karmada's ResourceBinding the estimator
// reads (spec.resource): the member's API server stands in for Karmada's,
// as in test/integration's TestKarmadaEstimator.
var resourceBindingCRD = []byte(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: resourcebindings.work.karmada.io}
spec:
  group: work.karmada.io
  names: {kind: ResourceBinding, listKind: ResourceBindingList, plural: resourcebindings, singular: resourcebinding}
  scope: Namespaced
  versions:
  - name: v1alpha2
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`)

// RunEstimator builds the member, starts phalanx-scheduler with its Karmada
// estimator and times each case's calls.
func RunEstimator(ctx context.Context, o EstimatorOptions) (rep EstimatorReport, err error) {
	start := time.Now()
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
	rep = EstimatorReport{Nodes: o.Nodes, GangSize: o.GangSize, Runs: o.Runs, Timeout: o.Timeout, GPUs: o.Nodes * estimatorNodeGPUs}
	defer func() { rep.Wall = time.Since(start) }()

	runner := testcluster.NewRunner("estimator", o.Log)
	defer runner.Close()
	defer testcluster.RecoverFatal(&err)
	c, err := testcluster.Start(runner, testcluster.Options{})
	if err != nil {
		return rep, err
	}
	fmt.Fprintf(o.Progress, "estimator: creating %d nodes (%d IB clusters of %d, leaves of %d)\n", o.Nodes, (o.Nodes+EstimatorIBSize-1)/EstimatorIBSize, EstimatorIBSize, EstimatorLeafSize)
	if err := parallel(ctx, o.Nodes, func(i int) error { return c.CreateNodes(ctx, estimatorNode(i)) }); err != nil {
		return rep, err
	}
	if _, err := c.Phalanx.SchedulingV1alpha1().NetworkTopologies().Create(ctx, NetworkTopology(), metav1.CreateOptions{}); err != nil {
		return rep, err
	}
	for _, ns := range []string{"fill", estimatorNS} {
		if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return rep, err
		}
	}
	for i := range o.Nodes {
		if g := fillGPUs(i); g > 0 {
			rep.UsedGPUs += g
			rep.FillPods++
		}
	}
	fmt.Fprintf(o.Progress, "estimator: binding %d pods to take %d of %d GPUs\n", rep.FillPods, rep.UsedGPUs, rep.GPUs)
	if err := parallel(ctx, o.Nodes, func(i int) error {
		pod := fillPod(i)
		if pod == nil {
			return nil
		}
		_, err := c.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		return err
	}); err != nil {
		return rep, err
	}
	if err := createTemplate(ctx, c); err != nil {
		return rep, err
	}

	certs, err := estimatortest.WriteTLS(c.Dir)
	if err != nil {
		return rep, err
	}
	addr, err := estimatortest.FreeAddress()
	if err != nil {
		return rep, err
	}
	fmt.Fprintf(o.Progress, "estimator: starting %s with --karmada-estimator-address=%s\n", o.PhalanxBinary, addr)
	sched, err := startEstimatorScheduler(c, o.PhalanxBinary,
		"--karmada-estimator-address="+addr, "--karmada-cluster-name=member", "--karmada-kubeconfig="+c.Kubeconfig,
		"--karmada-estimator-cert-file="+certs.ServerCert, "--karmada-estimator-key-file="+certs.ServerKey,
		"--karmada-estimator-client-ca-file="+certs.CA)
	if err != nil {
		return rep, err
	}
	defer sched.stop()
	if _, err := sched.waitReady(ctx, 2*time.Minute); err != nil {
		return rep, err
	}
	est, conn, err := estimatortest.Dial(addr, certs, true)
	if err != nil {
		return rep, err
	}
	defer conn.Close()

	res := func(cpu, mem, gpus int) v1.ResourceList {
		l := v1.ResourceList{v1.ResourceCPU: *resource.NewQuantity(int64(cpu), resource.DecimalSI),
			v1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dGi", mem))}
		if gpus > 0 {
			l[testcluster.GPU] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
		}
		return l
	}
	set := []*karmadapb.Component{
		estimatortest.Component("master", 1, res(masterCPU, masterMem, 0), nil),
		estimatortest.Component("worker", int32(o.GangSize-1), res(workerCPU, workerMem, 1), nil),
	}
	sets := func(ctx context.Context) (int32, error) {
		resp, err := est.MaxAvailableComponentSets(ctx, &karmadapb.MaxAvailableComponentSetsRequest{Cluster: "member", Namespace: estimatorNS, Components: set})
		return resp.GetMaxSets(), err
	}
	replica := estimatortest.Replicas(estimatorNS, res(replicaCPU, replicaMem, 1))
	replicas := func(ctx context.Context) (int32, error) {
		resp, err := est.MaxAvailableReplicas(ctx, &karmadapb.MaxAvailableReplicasRequest{Cluster: "member", ReplicaRequirements: replica})
		return resp.GetMaxReplicas(), err
	}
	boundSets, boundIB, wantReplicas := EstimatorBounds(o.Nodes, o.GangSize)

	// The first answer waits for the estimator to serve (informers
	// synced); the count of single replicas is exact once the planner's
	// snapshot holds every node and fill pod.
	fmt.Fprintf(o.Progress, "estimator: waiting for the estimator to see the whole member (%d single replicas)\n", wantReplicas)
	var got int32
	var callErr error
	err = testcluster.Eventually(ctx, 3*time.Minute, func(ctx context.Context) (bool, error) {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		got, callErr = replicas(cctx)
		return callErr == nil && int(got) == wantReplicas, nil
	})
	if err != nil {
		return rep, fmt.Errorf("the estimator's count of single replicas is %d (%v), want %d: %w; scheduler log: %s", got, callErr, wantReplicas, err, sched.logTail())
	}
	rep.Setup = time.Since(start)

	cases := []struct {
		c    EstimatorCase
		call func(context.Context) (int32, error)
		sane func(int32) bool
	}{
		{EstimatorCase{Name: "sets", What: fmt.Sprintf("MaxAvailableComponentSets: 1 master (%d CPU) + %d workers (%d CPU, 1 GPU), no topology", masterCPU, o.GangSize-1, workerCPU),
			Want: fmt.Sprintf("1..%d", boundSets)}, sets, func(n int32) bool { return n > 0 && int(n) <= boundSets }},
		{EstimatorCase{Name: "sets-ib", What: "the same, the template (Job via its ResourceBinding) requiring one ib-cluster",
			Want: fmt.Sprintf("1..%d", boundIB)}, func(ctx context.Context) (int32, error) {
			return sets(estimatortest.WithObject(ctx, "Job", estimatorNS, templateName))
		}, func(n int32) bool { return n > 0 && int(n) <= boundIB }},
		{EstimatorCase{Name: "replicas", What: fmt.Sprintf("MaxAvailableReplicas: one replica of %d CPU, 1 GPU (every node's room)", replicaCPU),
			Want: strconv.Itoa(wantReplicas)}, replicas, func(n int32) bool { return int(n) == wantReplicas }},
	}
	var failed []error
	for _, k := range cases {
		ec := k.c
		fmt.Fprintf(o.Progress, "estimator: %-8s warm-up and %d calls: ", ec.Name, o.Runs)
		err := timeCase(ctx, &ec, k.call, o.Runs, o.Timeout, sched)
		if err == nil && !k.sane(ec.Answer) {
			err = fmt.Errorf("answer %d, want %s", ec.Answer, ec.Want)
		}
		if err == nil && ec.Timeouts > 0 {
			err = fmt.Errorf("%d of %d calls timed out (%v); answer %d", ec.Timeouts, o.Runs, o.Timeout, ec.Answer)
		}
		if err == nil && len(ec.Answers) > 1 {
			err = fmt.Errorf("answers changed from call to call on an idle member: %v", ec.Answers)
		}
		if err != nil {
			ec.Failed = err.Error()
			failed = append(failed, fmt.Errorf("%s: %w", ec.Name, err))
			fmt.Fprintf(o.Progress, "FAILED: %v\n", err)
		} else {
			l := LatencyOf(ec.ClientMS)
			fmt.Fprintf(o.Progress, "answer %d, median %.1f ms, p95 %.1f ms (load %s)\n", ec.Answer, l.Median, l.P95, LoadAverage())
		}
		if o.Profile && err == nil {
			top, perr := profileCase(ctx, ec.Name, k.call, o, sched)
			if perr != nil {
				return rep, fmt.Errorf("%s: profiling: %w", ec.Name, perr)
			}
			ec.CPU = top
		}
		rep.Cases = append(rep.Cases, ec)
	}
	rep.PeakRSS, _ = procPeakRSS(sched.cmd.Process.Pid)
	return rep, errors.Join(failed...)
}

// createTemplate creates the workload's resource template (a suspended Job
// whose pod template requires one ib-cluster) and its ResourceBinding.
func createTemplate(ctx context.Context, c *testcluster.Cluster) error {
	if err := c.InstallCRDYAML(ctx, resourceBindingCRD); err != nil {
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

// timeCase makes one warm-up call, then runs timed calls, each under
// timeout; the estimator's own duration of each call is read from its
// /metrics between calls.
func timeCase(ctx context.Context, ec *EstimatorCase, call func(context.Context) (int32, error), runs int, timeout time.Duration, sched *childScheduler) error {
	pid := sched.cmd.Process.Pid
	cpu := func() float64 {
		s, err := procCPUSeconds(pid)
		if err != nil {
			return math.NaN()
		}
		return s
	}
	var cpuMS float64
	one := func(timeout time.Duration) (int32, time.Duration, error) {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		c0, t0 := cpu(), time.Now()
		n, err := call(cctx)
		d := time.Since(t0)
		cpuMS = (cpu() - c0) * 1000
		return n, d, err
	}
	// The warm-up call may take its time (first template read, caches).
	if _, _, err := one(max(timeout, 30*time.Second)); err != nil {
		return fmt.Errorf("warm-up call: %w", err)
	}
	before, serverOK := estimatorSeconds(ctx, sched)
	for range runs {
		n, d, err := one(timeout)
		if status.Code(err) == codes.DeadlineExceeded && ctx.Err() == nil {
			// Karmada gets no answer from this cluster on this attempt.
			ec.Timeouts++
			// The estimator goes on with the call; wait for it to end
			// (its duration shows in /metrics) before the next one.
			after, ok := waitEstimatorSeconds(ctx, sched, before)
			serverOK = serverOK && ok
			before = after
			continue
		}
		if err != nil {
			return fmt.Errorf("after %d calls: %w", len(ec.ClientMS)+ec.Timeouts, err)
		}
		if len(ec.Answers) == 0 || ec.Answers[len(ec.Answers)-1] != n {
			ec.Answers = append(ec.Answers, n)
		}
		ec.Answer = n
		ec.ClientMS = append(ec.ClientMS, float64(d.Microseconds())/1000)
		ec.CPUMS = append(ec.CPUMS, cpuMS)
		after, ok := estimatorSeconds(ctx, sched)
		serverOK = serverOK && ok
		if serverOK {
			// Only this client calls: the sum's growth is this call.
			ec.ServerMS = append(ec.ServerMS, (after-before)*1000)
		}
		before = after
	}
	if !serverOK {
		ec.ServerMS = nil
	}
	return nil
}

// waitEstimatorSeconds waits (up to a minute) until the estimator's sum of
// answer times has grown past before: a timed-out call has ended there.
func waitEstimatorSeconds(ctx context.Context, sched *childScheduler, before float64) (float64, bool) {
	deadline := time.Now().Add(time.Minute)
	for {
		after, ok := estimatorSeconds(ctx, sched)
		if !ok || after > before || time.Now().After(deadline) || ctx.Err() != nil {
			return after, ok
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// estimatorMetric is the estimator's histogram of answer times.
const estimatorMetric = "phalanx_estimator_duration_seconds"

// estimatorSeconds is the sum of the estimator's answer times so far, all
// methods together.
func estimatorSeconds(ctx context.Context, sched *childScheduler) (float64, bool) {
	raw, err := get(ctx, sched.client, sched.base+"/metrics")
	if err != nil {
		return 0, false
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return 0, false
	}
	f, ok := families[estimatorMetric]
	if !ok {
		return 0, false
	}
	sum := 0.0
	for _, m := range f.GetMetric() {
		sum += m.GetHistogram().GetSampleSum()
	}
	return sum, true
}

// profileCase calls the estimator back to back for at least o.ProfileSeconds
// under the scheduler's CPU profiler.
func profileCase(ctx context.Context, name string, call func(context.Context) (int32, error), o EstimatorOptions, sched *childScheduler) (*Top, error) {
	cp := startCPUProfile(ctx, sched.client, sched.base)
	deadline := time.Now().Add(time.Duration(o.ProfileSeconds) * time.Second)
	calls := 0
	for time.Now().Before(deadline) || calls < o.Runs {
		cctx, cancel := context.WithTimeout(ctx, o.Timeout)
		_, err := call(cctx)
		cancel()
		if err != nil {
			_, _, _ = cp.stop()
			return nil, err
		}
		calls++
	}
	_, prof, err := cp.stop()
	if err != nil {
		return nil, err
	}
	top := summarise(prof, "cpu", len(prof.SampleType)-1, 20, nil)
	top.Note = fmt.Sprintf("%d calls", calls)
	if lost := cp.lost(); lost != "" {
		top.Note += "; " + lost
	}
	if o.ProfileDir != "" {
		if err := os.MkdirAll(o.ProfileDir, 0o755); err != nil {
			return nil, err
		}
		path := filepath.Join(o.ProfileDir, "estimator-"+name+".cpu.pb.gz")
		if err := writeProfile(prof, path); err != nil {
			return nil, err
		}
		top.Path = path
	}
	return &top, nil
}

// startEstimatorScheduler runs phalanx-scheduler with the canonical
// configuration, serving /metrics and pprof on a local port, with extra
// flags.
func startEstimatorScheduler(c *testcluster.Cluster, binary string, extra ...string) (*childScheduler, error) {
	return startChildScheduler(c, binary, manifests.SchedulerConfig, Phalanx.SchedulerName(), false, "estimator-scheduler", extra...)
}

// WriteEstimatorReport prints the cases' answers and latencies, with the
// command line that produced them.
func WriteEstimatorReport(out io.Writer, rep EstimatorReport, machine, command string) {
	fmt.Fprintf(out, "\nKarmada estimator latency: %s\n", command)
	fmt.Fprintf(out, "Machine: %s. Member: %d nodes (32 CPU, 256Gi, 8 GPUs; %d IB clusters of %d nodes, leaves of %d; NodeResourceTopology policy none),\n",
		machine, rep.Nodes, (rep.Nodes+EstimatorIBSize-1)/EstimatorIBSize, EstimatorIBSize, EstimatorLeafSize)
	fmt.Fprintf(out, "%d pods bound taking %d of %d GPUs (%.0f%%). Set: 1 master + %d workers. %d timed calls per case after one warm-up, each under a %v timeout;\n",
		rep.FillPods, rep.UsedGPUs, rep.GPUs, 100*float64(rep.UsedGPUs)/math.Max(float64(rep.GPUs), 1), rep.GangSize-1, rep.Runs, rep.Timeout)
	fmt.Fprintf(out, "client: gRPC round trip over TLS as karmada-scheduler sees it; server: the estimator's phalanx_estimator_duration_seconds;\n")
	fmt.Fprintf(out, "CPU: the scheduler process's CPU time over the call (10 ms ticks; all goroutines: probes in parallel, GC).\n\n")
	fmt.Fprintf(out, "%-9s %-8s %-8s %-26s %-8s %-26s %-8s %-10s %-9s %s\n", "CASE", "ANSWER", "SANE", "client ms median (min–max)", "p95", "server ms median (min–max)", "p95", "CPU ms", "timeouts", "goal")
	for _, c := range rep.Cases {
		cl, sv := LatencyOf(c.ClientMS), LatencyOf(c.ServerMS)
		goal := "-"
		if c.Gang() {
			goal = fmt.Sprintf("p95 ≤ %.0f ms: met", EstimatorGoalMS)
			if !(cl.P95 <= EstimatorGoalMS) || c.Timeouts > 0 {
				goal = fmt.Sprintf("p95 ≤ %.0f ms: NOT met", EstimatorGoalMS)
			}
		}
		answer := "-"
		if len(c.Answers) > 0 {
			answer = strconv.Itoa(int(c.Answer))
		}
		fmt.Fprintf(out, "%-9s %-8s %-8s %-26s %-8s %-26s %-8s %-10s %-9s %s\n", c.Name, answer, c.Want,
			msSpread(cl), msFmt(cl.P95), msSpread(sv), msFmt(sv.P95), msFmt(LatencyOf(c.CPUMS).Median), fmt.Sprintf("%d/%d", c.Timeouts, rep.Runs), goal)
	}
	for _, c := range rep.Cases {
		if c.Failed != "" {
			fmt.Fprintf(out, "  %s FAILED: %s\n", c.Name, c.Failed)
		}
	}
	fmt.Fprintln(out)
	for _, c := range rep.Cases {
		fmt.Fprintf(out, "  %-9s %s\n", c.Name, c.What)
	}
	fmt.Fprintf(out, "\nSetup (cluster, nodes, pods, scheduler, first full answer) %s; whole run %s; scheduler peak RSS %.0f MiB.\n",
		rep.Setup.Round(time.Second), rep.Wall.Round(time.Second), rep.PeakRSS/(1<<20))
	for _, c := range rep.Cases {
		if c.CPU == nil {
			continue
		}
		top := c.CPU
		fmt.Fprintf(out, "\nCPU profile of the scheduler, case %s: %.2f s in total (%s)", c.Name, top.Total/1e9, top.Note)
		if top.Path != "" {
			fmt.Fprintf(out, "; go tool pprof %s", top.Path)
		}
		fmt.Fprintln(out)
		fmt.Fprintf(out, "  %-6s %-6s %s\n", "flat%", "cum%", "top functions by flat")
		for _, f := range head(top.Flat, 12) {
			fmt.Fprintf(out, "  %5.1f%% %5.1f%% %s\n", f.Flat*100, f.Cum*100, shortFunc(f.Func))
		}
		fmt.Fprintf(out, "  %-6s %-6s %s\n", "flat%", "cum%", "phalanx functions by cum")
		for _, f := range top.Own {
			fmt.Fprintf(out, "  %5.1f%% %5.1f%% %s\n", f.Flat*100, f.Cum*100, shortFunc(f.Func))
		}
	}
}

func msSpread(l Latency) string {
	if math.IsNaN(l.Median) {
		return "-"
	}
	return fmt.Sprintf("%.1f (%.1f–%.1f)", l.Median, l.Min, l.Max)
}

func msFmt(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.1f", v)
}
