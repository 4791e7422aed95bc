package karmada

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/karmada-io/karmada/pkg/util/names"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
	"github.com/phalanx-sched/phalanx/manifests"
)

// globalScheduler is phalanx-global's schedulerName in the policies.
const globalScheduler = "phalanx-global"

// TestKarmadaGlobal runs the global tier, the phalanx-global binary, on the
// Karmada plane with Karmada's real propagation (see doc.go): three members
// of 8 GPUs each (two nodes of 4), each running phalanx-scheduler with its
// estimator, kwok as the nodes' kubelet and the Job controller. Queues
// team-a (weight 2) and team-b (weight 1) exist on the plane and, with the
// same weights, in every member. Jobs are batch/v1 Jobs whose pods form an
// implicit phalanx gang and ask for GPUs.
func TestKarmadaGlobal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four API servers and eight binaries")
	}
	began := time.Now()
	gpuNodes := func(prefix string) []testcluster.NodeSpec { return ibNodes(prefix, map[string]int{prefix + "1": 2}) }
	f := startFleet(t, map[string][]testcluster.NodeSpec{"member-a": gpuNodes("a"), "member-b": gpuNodes("b"), "member-c": gpuNodes("c")})
	queues := []*phalanxv1alpha1.Queue{queueOf("team-a", 2, ""), queueOf("team-b", 1, ""), queueOf("orphan", 1, "no-such-parent")}
	f.installQueues(t, f.Cluster, queues)
	f.installCRD(t, "crds/scheduling.phalanx.dev_queuepositions.yaml")
	// Karmada reflects a Job's ready pods, and fails a lost member's
	// bindings over, as the shipped manifests ask.
	f.applyGlobalManifest(t, "job-status.yaml", schema.GroupVersionResource{Group: "config.karmada.io", Version: "v1alpha1", Resource: "resourceinterpretercustomizations"})
	f.applyGlobalManifest(t, "failover.yaml", schema.GroupVersionResource{Group: "policy.karmada.io", Version: "v1alpha1", Resource: "clustertaintpolicies"})
	for _, m := range f.members {
		f.installQueues(t, m.Cluster, queues[:2])
		if err := m.StartKwok(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("fleet up in %v", time.Since(began).Round(time.Millisecond))
	var global *proc

	step := func(name string, fn func(t *testing.T)) {
		if !t.Run(name, fn) {
			t.FailNow()
		}
	}
	// phalanx-global lives as long as the test, not the step that starts it.
	start := func(extra ...string) *proc { return f.startGlobal(t, extra...) }
	step("propagation", func(t *testing.T) { f.propagationSmoke(t) })
	step("shares", func(t *testing.T) { global = f.globalShares(t, func() *proc { return start() }) })
	step("dependency", func(t *testing.T) { f.globalDependency(t) })
	step("bad-input", func(t *testing.T) { f.globalBadInput(t) })
	step("cli", func(t *testing.T) { f.globalCLI(t) })
	step("restart", func(t *testing.T) {
		dispatched := f.globalBindings(t)
		global.stop()
		global = start()
		job := gpuJob("after-restart", "team-b", 1, 4, "2s")
		f.propagateJob(t, job, globalScheduler, "member-a", "member-b", "member-c")
		f.waitScheduled(t, job)
		for _, rb := range f.globalBindings(t) {
			before, ok := dispatched[rb.Name]
			if !ok || len(before.Spec.Clusters) == 0 {
				continue
			}
			if rb.Generation != before.Generation || targetNames(rb)[0] != targetNames(before)[0] {
				t.Fatalf("binding %s was dispatched again after the restart: %v (generation %d) -> %v (generation %d)",
					rb.Name, targetNames(before), before.Generation, targetNames(rb), rb.Generation)
			}
		}
	})
	step("move", func(t *testing.T) {
		f.globalMove(t, func() {
			global.stop()
			global = start("--move-after=10s")
		})
	})
	step("member-lost", func(t *testing.T) { f.globalMemberLost(t) })
	t.Logf("wall time: %v", time.Since(began).Round(time.Millisecond))
}

func queueOf(name string, weight int32, parent string) *phalanxv1alpha1.Queue {
	return &phalanxv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: phalanxv1alpha1.QueueSpec{Weight: weight, Parent: parent}}
}

// installCRD installs one of manifests/crds on the plane.
func (f *fleet) installCRD(t *testing.T, file string) {
	t.Helper()
	crd, err := manifests.CRDs.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.InstallCRDYAML(context.Background(), crd); err != nil {
		t.Fatal(err)
	}
}

// installQueues installs phalanx's Queue CRD (the plane has none of
// manifests/crds) and creates the queues.
func (f *fleet) installQueues(t *testing.T, c *testcluster.Cluster, queues []*phalanxv1alpha1.Queue) {
	t.Helper()
	ctx := context.Background()
	crd, err := manifests.CRDs.ReadFile("crds/scheduling.phalanx.dev_queues.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.InstallCRDYAML(ctx, crd); err != nil {
		t.Fatal(err)
	}
	for _, q := range queues {
		if _, err := c.Phalanx.SchedulingV1alpha1().Queues().Create(ctx, q.DeepCopy(), metav1.CreateOptions{}); err != nil {
			t.Fatalf("Queue %s: %v", q.Name, err)
		}
	}
}

// startGlobal runs phalanx-global as its Deployment does: the plane's
// kubeconfig, the estimators found through the same ExternalName Services
// as karmada-scheduler's, with TLS and the client certificate; extra flags
// after those.
func (f *fleet) startGlobal(t *testing.T, extra ...string) *proc {
	t.Helper()
	f.restarts++
	return startProc(t, f.logs, f.dir, fmt.Sprintf("phalanx-global-%d", f.restarts), globalBin, append([]string{
		"--kubeconfig=" + f.Kubeconfig,
		"--leader-elect=false",
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
		"--interval=1s",
		"--estimator-ca-file=" + f.tls.CA,
		"--estimator-cert-file=" + f.tls.ClientCert,
		"--estimator-key-file=" + f.tls.ClientKey,
		"--v=3"}, extra...)...)
}

// gpuJob is a gang of size pods of gpus GPUs each in queue q; kwok ends
// each pod runFor after it starts ("" runs until deleted).
func gpuJob(name, q string, size int32, gpus int64, runFor string) *batchv1.Job {
	job := gangJob(name, size)
	job.Labels = map[string]string{phalanxv1alpha1.QueueLabel: q}
	tmpl := &job.Spec.Template
	tmpl.Labels = map[string]string{phalanxv1alpha1.QueueLabel: q}
	if runFor != "" {
		tmpl.Annotations[testcluster.RunForAnnotation] = runFor
	}
	tmpl.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = *resource.NewQuantity(gpus, resource.DecimalSI)
	tmpl.Spec.Containers[0].Resources.Limits = v1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}
	return job
}

// globalBindings are the plane's bindings of phalanx-global, by name.
func (f *fleet) globalBindings(t *testing.T) map[string]*workv1alpha2.ResourceBinding {
	t.Helper()
	list, err := f.karmada.WorkV1alpha2().ResourceBindings(namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*workv1alpha2.ResourceBinding{}
	for i := range list.Items {
		if rb := &list.Items[i]; rb.Spec.SchedulerName == globalScheduler {
			out[rb.Name] = rb
		}
	}
	return out
}

// memberJobStatus: some member's Job status, aggregated on the binding,
// satisfies ok.
func memberJobStatus(rb *workv1alpha2.ResourceBinding, ok func(*batchv1.JobStatus) bool) bool {
	for _, item := range rb.Status.AggregatedStatus {
		if item.Status == nil {
			continue
		}
		var st batchv1.JobStatus
		if json.Unmarshal(item.Status.Raw, &st) == nil && rb.Spec.Replicas > 0 && ok(&st) {
			return true
		}
	}
	return false
}

// jobDone: the member's Job status has every completion.
func jobDone(rb *workv1alpha2.ResourceBinding) bool {
	return memberJobStatus(rb, func(st *batchv1.JobStatus) bool { return st.Succeeded >= rb.Spec.Replicas })
}

// jobRuns: the member's Job status has every replica ready or done.
func jobRuns(rb *workv1alpha2.ResourceBinding) bool {
	return memberJobStatus(rb, func(st *batchv1.JobStatus) bool {
		return st.Ready != nil && *st.Ready+st.Succeeded >= rb.Spec.Replicas
	})
}

// globalShares: six 4-GPU jobs of each team wait on the plane (24 GPUs in
// all) when phalanx-global starts. While both teams wait, team-a never
// holds more than 16 GPUs and team-b never more than 8 (weights 2:1 over
// the sum of the members); both hold exactly that at some point; every job
// ends, each whole in one member. It returns the running phalanx-global.
func (f *fleet) globalShares(t *testing.T, startGlobal func() *proc) *proc {
	var jobs []*batchv1.Job
	for i := range 6 {
		jobs = append(jobs, gpuJob(fmt.Sprintf("a-%d", i), "team-a", 2, 2, "6s"), gpuJob(fmt.Sprintf("b-%d", i), "team-b", 2, 2, "6s"))
	}
	for _, job := range jobs {
		f.propagateJob(t, job, globalScheduler, "member-a", "member-b", "member-c")
	}
	// The backlog is whole before the tier decides: shares divide the
	// demand the tier sees, and a team whose jobs reach the plane later
	// catches up only as others end (the tier does not preempt).
	if err := testcluster.Eventually(context.Background(), propagate, func(ctx context.Context) (bool, error) {
		return len(f.globalBindings(t)) == len(jobs), nil
	}); err != nil {
		t.Fatalf("the detector made %d of %d bindings: %v", len(f.globalBindings(t)), len(jobs), err)
	}
	global := startGlobal()
	fullAtWeights := false
	var samples []string
	err := testcluster.Eventually(context.Background(), 4*time.Minute, func(ctx context.Context) (bool, error) {
		f.checkAlive(t)
		// What each team holds is what runs in the members (the bindings'
		// aggregated status lags); what waits is on the plane.
		held, err := f.gpusRunning(ctx)
		if err != nil {
			return false, err
		}
		waiting := map[string]int{}
		done := 0
		for _, job := range jobs {
			rb, err := f.karmada.WorkV1alpha2().ResourceBindings(namespace).Get(ctx, names.GenerateBindingName("Job", job.Name), metav1.GetOptions{})
			if err != nil {
				return false, nil // the detector has not made it yet
			}
			switch {
			case jobDone(rb):
				done++
			case len(rb.Spec.Clusters) == 0:
				waiting[job.Labels[phalanxv1alpha1.QueueLabel]]++
			case len(rb.Spec.Clusters) != 1 || rb.Spec.Clusters[0].Replicas != 2:
				t.Fatalf("binding %s divided or resized: %v", rb.Name, rb.Spec.Clusters)
			}
		}
		sample := fmt.Sprintf("a=%d b=%d waiting a=%d b=%d done=%d", held["team-a"], held["team-b"], waiting["team-a"], waiting["team-b"], done)
		if len(samples) == 0 || samples[len(samples)-1] != sample {
			samples = append(samples, sample)
		}
		if waiting["team-a"] > 0 && held["team-b"] > 8 || waiting["team-b"] > 0 && held["team-a"] > 16 {
			t.Fatalf("a team above its global share while the other waits: %s (samples %v)", sample, samples)
		}
		if held["team-a"] == 16 && held["team-b"] == 8 {
			fullAtWeights = true
		}
		return done == len(jobs), nil
	})
	if err != nil {
		t.Fatalf("not every job ended (samples %v): %v", samples, err)
	}
	if !fullAtWeights {
		t.Fatalf("the members were never full at 16:8 GPUs (samples %v)", samples)
	}
	t.Logf("GPUs held by team-a / team-b as the stream ran: %s", strings.Join(samples, " | "))
	for _, job := range jobs {
		f.assertWhole(t, job)
	}
	return global
}

// assertWhole: the Job exists in exactly one member, the one its binding
// names.
func (f *fleet) assertWhole(t *testing.T, job *batchv1.Job) {
	t.Helper()
	rb, err := f.karmada.WorkV1alpha2().ResourceBindings(namespace).Get(context.Background(), names.GenerateBindingName("Job", job.Name), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var in []string
	for name, m := range f.members {
		if _, err := m.Client.BatchV1().Jobs(namespace).Get(context.Background(), job.Name, metav1.GetOptions{}); err == nil {
			in = append(in, name)
		}
	}
	if len(in) != 1 || in[0] != targetNames(rb)[0] {
		t.Fatalf("Job %s is in members %v, its binding names %v", job.Name, in, targetNames(rb))
	}
}

// globalDependency: finetune depends on pretrain. Submitted first, it
// waits, saying pretrain does not exist (DependencyMissing); pretrain is
// dispatched, and finetune is dispatched only once pretrain's pods run in
// their member, which may be another.
func (f *fleet) globalDependency(t *testing.T) {
	finetune := gpuJob("finetune", "team-b", 1, 4, "2s")
	finetune.Annotations = map[string]string{phalanxv1alpha1.DependsOnAnnotation: "pretrain"}
	f.propagateJob(t, finetune, globalScheduler, "member-a", "member-b", "member-c")
	f.waitGlobalCondition(t, finetune, "DependencyMissing", "depends on training/pretrain")
	pretrain := gpuJob("pretrain", "team-a", 2, 4, "")
	f.propagateJob(t, pretrain, globalScheduler, "member-a", "member-b", "member-c")
	pre := f.waitScheduled(t, pretrain)
	err := testcluster.Eventually(context.Background(), propagate, func(ctx context.Context) (bool, error) {
		rb, err := f.karmada.WorkV1alpha2().ResourceBindings(namespace).Get(ctx, names.GenerateBindingName("Job", finetune.Name), metav1.GetOptions{})
		if err != nil || len(rb.Spec.Clusters) == 0 {
			return false, err
		}
		p, err := f.karmada.WorkV1alpha2().ResourceBindings(namespace).Get(ctx, pre.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ready := int32(0)
		for _, item := range p.Status.AggregatedStatus {
			var st batchv1.JobStatus
			if item.Status != nil && json.Unmarshal(item.Status.Raw, &st) == nil && st.Ready != nil {
				ready = *st.Ready
			}
		}
		if ready < 2 {
			t.Fatalf("finetune was dispatched to %v while pretrain had %d of 2 pods ready", targetNames(rb), ready)
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("finetune never dispatched after pretrain ran: %v", err)
	}
}

// globalBadInput: each is refused with a condition and an event that say
// what is wrong, and nothing of it is dispatched.
func (f *fleet) globalBadInput(t *testing.T) {
	huge := gpuJob("huge", "team-a", 3, 4, "") // 12 GPUs; a member holds 8
	f.propagateJob(t, huge, globalScheduler, "member-a", "member-b", "member-c")
	orphan := gpuJob("orphan-job", "orphan", 1, 1, "")
	f.propagateJob(t, orphan, globalScheduler, "member-a", "member-b", "member-c")
	nodep := gpuJob("nodep", "team-b", 1, 1, "")
	nodep.Annotations = map[string]string{phalanxv1alpha1.DependsOnAnnotation: "never-submitted"}
	f.propagateJob(t, nodep, globalScheduler, "member-a", "member-b", "member-c")
	spread := gpuJob("spread", "team-b", 2, 1, "")
	f.propagate(t, spread, globalScheduler, policyv1alpha1.Placement{
		SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: 2, MaxGroups: 3}},
		ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided,
			ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceAggregated},
	})
	for _, tc := range []struct {
		job          *batchv1.Job
		reason, says string
	}{
		{huge, "NoMemberCanHold", "nvidia.com/gpu=12"},
		{orphan, "QueueRefused", "orphan"},
		{nodep, "DependencyMissing", "training/never-submitted"},
		{spread, "WouldDivide", "at least 2 groups by cluster"},
	} {
		rb := f.waitGlobalCondition(t, tc.job, tc.reason, tc.says)
		if len(rb.Spec.Clusters) != 0 {
			t.Fatalf("%s was dispatched to %v", tc.job.Name, targetNames(rb))
		}
		f.waitEvent(t, rb, tc.reason)
	}
}

// waitGlobalCondition waits until the job's binding says Scheduled=False
// with reason, its message containing says.
func (f *fleet) waitGlobalCondition(t *testing.T, job *batchv1.Job, reason, says string) *workv1alpha2.ResourceBinding {
	t.Helper()
	var rb *workv1alpha2.ResourceBinding
	var last *metav1.Condition
	err := testcluster.Eventually(context.Background(), propagate, func(ctx context.Context) (bool, error) {
		f.checkAlive(t)
		var err error
		rb, err = f.karmada.WorkV1alpha2().ResourceBindings(namespace).Get(ctx, names.GenerateBindingName("Job", job.Name), metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = meta.FindStatusCondition(rb.Status.Conditions, workv1alpha2.Scheduled)
		return last != nil && last.Status == metav1.ConditionFalse && last.Reason == reason && strings.Contains(last.Message, says), nil
	})
	if err != nil {
		t.Fatalf("%s: Scheduled never False %s with %q (last %+v): %v", job.Name, reason, says, last, err)
	}
	return rb
}

func (f *fleet) waitEvent(t *testing.T, rb *workv1alpha2.ResourceBinding, reason string) {
	t.Helper()
	err := testcluster.Eventually(context.Background(), 30*time.Second, func(ctx context.Context) (bool, error) {
		evs, err := f.Client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + rb.Name})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == reason && e.InvolvedObject.Kind == "ResourceBinding" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no event %s on ResourceBinding %s: %v", reason, rb.Name, err)
	}
}

// gpusRunning sums, by queue, the GPUs of the pods bound and not finished
// nor being deleted in the members.
func (f *fleet) gpusRunning(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	for _, m := range f.members {
		pods, err := holdingGPUs(ctx, m)
		if err != nil {
			return nil, err
		}
		for _, p := range pods {
			if p.Namespace == namespace && p.DeletionTimestamp == nil {
				out[p.Labels[phalanxv1alpha1.QueueLabel]] += podGPUs(&p)
			}
		}
	}
	return out, nil
}

// applyGlobalManifest applies one of manifests/global on the plane.
func (f *fleet) applyGlobalManifest(t *testing.T, file string, gvr schema.GroupVersionResource) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "manifests", "global", file))
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &obj.Object); err != nil {
		t.Fatalf("manifests/global/%s: %v", file, err)
	}
	if _, err := f.Dynamic.Resource(gvr).Namespace(obj.GetNamespace()).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("applying manifests/global/%s: %v", file, err)
	}
}

// globalCLI: kubectl phalanx pointed at the plane lists phalanx-global's
// jobs of the namespace: the waiting ones with their queue, position and
// why, the dispatched ones with their member.
func (f *fleet) globalCLI(t *testing.T) {
	out, err := exec.Command(kubectlPhalanxBin, "jobs", "-n", namespace, "--kubeconfig", f.Kubeconfig).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl phalanx jobs on the plane: %v\n%s", err, out)
	}
	t.Logf("kubectl phalanx jobs -n %s (the Karmada plane):\n%s", namespace, out)
	rows := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if fields := strings.Fields(line); len(fields) > 1 {
			rows[fields[1]] = line
		}
	}
	pretrain := f.waitScheduled(t, gpuJob("pretrain", "team-a", 2, 4, ""))
	for name, want := range map[string][]string{
		"Job/huge":       {"team-a", "Waiting", "NoMemberCanHold"},
		"Job/orphan-job": {"orphan", "QueueRefused"},
		"Job/nodep":      {"team-b", "DependencyMissing"},
		"Job/spread":     {"WouldDivide"},
		"Job/pretrain":   {"team-a", targetNames(pretrain)[0], "Running"},
	} {
		row, ok := rows[name]
		if !ok {
			t.Fatalf("no row for %s in:\n%s", name, out)
		}
		for _, w := range want {
			if !strings.Contains(row, w) {
				t.Errorf("row %q lacks %q", row, w)
			}
		}
	}
	if !strings.Contains(rows["Job/huge"], " in team-a") {
		t.Errorf("the waiting job's row shows no position in its queue: %q", rows["Job/huge"])
	}
}
