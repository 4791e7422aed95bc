package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/cli"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// kubectlPhalanx is the plugin binary: PHALANX_BIN_DIR's, else built once.
func kubectlPhalanx(t *testing.T) string {
	t.Helper()
	if bins.kubectlPhalanx != "" {
		return bins.kubectlPhalanx
	}
	out := filepath.Join(t.TempDir(), "kubectl-phalanx")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/kubectl-phalanx")
	cmd.Dir = repoRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building kubectl-phalanx: %v\n%s", err, b)
	}
	return out
}

// plugin runs kubectl-phalanx as a user does: its exit code, stdout, stderr.
func plugin(t *testing.T, bin, kubeconfig string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("kubectl-phalanx %v: %v", args, err)
	}
	return code, stdout.String(), stderr.String()
}

// testKubectlPlugin: a namespace user (a ServiceAccount with the
// namespace's view role) runs kubectl phalanx. Three gangs wait behind a
// running Job's gang on a 4-GPU node; jobs shows their positions (by
// submission), why explains the one in the middle, and the gangs then start
// in exactly that order as capacity frees. The user is refused other namespaces and the cluster views with a
// message naming the missing permission; an admin sees the queue and the
// node's free GPUs.
func testKubectlPlugin(t *testing.T, env *Env) {
	s := newScenario(t, env, "kubectl")
	// Two leaves: one node of 4 GPUs where the gangs run, one of a single
	// GPU where no 2-GPU member fits (what top shows).
	const leafLabel = "e2e.phalanx.dev/leaf"
	s.nodes(t,
		testcluster.NodeSpec{Name: "n0", CPU: "8", Memory: "16Gi", GPUs: 4, Labels: map[string]string{leafLabel: s.name + "-l1"}},
		testcluster.NodeSpec{Name: "n1", CPU: "8", Memory: "16Gi", GPUs: 1, Labels: map[string]string{leafLabel: s.name + "-l2"}})
	ctx := ctxFor(t, 10*time.Minute)
	bin := kubectlPhalanx(t)
	leafTopology(ctx, t, env, leafLabel)

	q := &phalanxv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: s.name}}
	if _, err := env.Phalanx.SchedulingV1alpha1().Queues().Create(ctx, q, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Phalanx.SchedulingV1alpha1().Queues().Delete(context.Background(), q.Name, metav1.DeleteOptions{})
	})
	inQueue := map[string]string{phalanxv1alpha1.QueueLabel: q.Name}
	wholeNode := testcluster.PodSpec{CPU: "1", Memory: "1Gi", GPUs: 2, Labels: inQueue}

	// The running gang is a Job's (an implicit gang: phalanx makes its
	// PodGroup), run by the Job controller.
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "first", Namespace: s.ns},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](2),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: inQueue, Annotations: map[string]string{phalanxv1alpha1.GangSizeAnnotation: "2"}},
				Spec: corev1.PodSpec{
					SchedulerName:                 "phalanx-scheduler",
					RestartPolicy:                 corev1.RestartPolicyNever,
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					NodeSelector:                  map[string]string{scenarioLabel: s.name},
					Tolerations:                   []corev1.Toleration{{Key: suiteTaint, Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{Name: "train", Image: "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), "nvidia.com/gpu": resource.MustParse("2")},
							Limits:   corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")},
						}}},
				},
			},
		},
	}
	if _, err := env.Client.BatchV1().Jobs(s.ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.BatchV1().Jobs(s.ns).Delete(context.Background(), job.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)})
	})
	jobPods := batchv1.JobNameLabel + "=" + job.Name
	waitBound(t, s, jobPods, 2)
	// Three gangs of one priority, submitted a second apart (creation
	// times have a second's precision): their order is a, b, c.
	want := []string{"a", "b", "c"}
	for _, g := range want {
		nextSecond(ctx, t)
		s.gang(t, g, 2, nil, inQueue, 2, wholeNode)
	}

	// The namespace user: the namespace's view role, into which the chart's
	// phalanx-namespace-viewer aggregates (gangs and positions).
	const user = "researcher"
	if _, err := env.Client.CoreV1().ServiceAccounts(s.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: user}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-view"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: user, Namespace: s.ns}},
	}
	if _, err := env.Client.RbacV1().RoleBindings(s.ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token, err := env.ServiceAccountToken(ctx, s.ns, user)
	if err != nil {
		t.Fatal(err)
	}
	userConfig := filepath.Join(t.TempDir(), "user.kubeconfig")
	if err := env.WriteTokenKubeconfig(userConfig, token); err != nil {
		t.Fatal(err)
	}

	// jobs: the three pending gangs with positions c, a, b.
	var list cli.JobList
	positions := map[string]*phalanxv1alpha1.GangPosition{}
	err = testcluster.Eventually(ctx, 2*time.Minute, func(context.Context) (bool, error) {
		code, stdout, stderr := plugin(t, bin, userConfig, "-n", s.ns, "jobs", "-o", "json")
		if code != 0 {
			t.Logf("jobs: exit %d: %s", code, stderr)
			return false, nil
		}
		list = cli.JobList{}
		if err := json.Unmarshal([]byte(stdout), &list); err != nil {
			return false, err
		}
		positions = map[string]*phalanxv1alpha1.GangPosition{}
		for _, j := range list.Jobs {
			if j.Position != nil {
				positions[j.Gang] = j.Position
			}
		}
		return len(positions) == 3, nil
	})
	if err != nil {
		t.Fatalf("jobs never listed positions for a, b and c: %+v (%v)", list, err)
	}
	for i, g := range want {
		p := positions[g]
		if p.PositionInQueue != int32(i+1) || p.QueueLength != 3 || p.Queue != q.Name {
			t.Errorf("%s: position %d/%d in %s, want %d/3 in %s", g, p.PositionInQueue, p.QueueLength, p.Queue, i+1, q.Name)
		}
	}
	if p := positions["a"]; p.Ahead != nil {
		t.Errorf("a: ahead %+v, want none", p.Ahead)
	}
	if b := positions["b"].Ahead; b == nil || b.Name != "a" || !strings.HasPrefix(b.Reason, "submitted earlier (") || !strings.HasSuffix(b.Reason, ", 1s before)") {
		t.Errorf("b: ahead %+v, want a, submitted 1s earlier", b)
	}
	sawJob := false
	for _, j := range list.Jobs {
		switch j.Gang {
		case "a", "b", "c":
			if j.Bound != 0 || j.Min != 2 || j.Waiting == "" || j.Source != "PodGroup" {
				t.Errorf("%s: %+v, want 0/2 bound, waiting, source PodGroup", j.Gang, j)
			}
		default:
			sawJob = true
			if j.Source != "Job first" || j.State != "Running" || j.Bound != 2 || j.Min != 2 || j.Position != nil {
				t.Errorf("the Job's gang: %+v, want source Job first, Running 2/2, no position", j)
			}
		}
	}
	if !sawJob {
		t.Errorf("jobs lists no gang of Job first: %+v", list.Jobs)
	}
	code, stdout, stderr := plugin(t, bin, userConfig, "-n", s.ns, "jobs")
	if code != 0 || !strings.Contains(stdout, "2/3 in "+q.Name) {
		t.Errorf("jobs table (exit %d, %s):\n%s", code, stderr, stdout)
	}

	// why, from a pod of the middle gang.
	code, stdout, stderr = plugin(t, bin, userConfig, "-n", s.ns, "why", "pod/b-0")
	for _, line := range []string{
		"Gang:       PodGroup " + s.ns + "/b",
		"Members:    0 of minimum 2 bound",
		"Position:   2 of 3 in queue " + q.Name,
		"Ahead:      a, because of submitted earlier (",
		"Waits for:  ",
		"b-0  Pending",
		"Note:       closest placement not shown: permission denied: you may not read nodes",
	} {
		if code != 0 || !strings.Contains(stdout, line) {
			t.Errorf("why pod/b-0 (exit %d, %s): no %q in\n%s", code, stderr, line, stdout)
		}
	}

	// why, from the Job: its gang runs.
	code, stdout, stderr = plugin(t, bin, userConfig, "-n", s.ns, "why", "job/first")
	if code != 0 || !strings.Contains(stdout, "Waits for:  nothing: the gang runs (2 of minimum 2 members bound)") {
		t.Errorf("why job/first (exit %d, %s):\n%s", code, stderr, stdout)
	}

	// Refused, with the permission named: another namespace, the queues.
	code, _, stderr = plugin(t, bin, userConfig, "-n", "kube-system", "jobs")
	if code != 1 || !strings.Contains(stderr, "permission denied: you may not read") || strings.Contains(stderr, "goroutine") {
		t.Errorf("jobs in kube-system as a namespace user: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = plugin(t, bin, userConfig, "queues")
	if code != 1 || !strings.Contains(stderr, "phalanx-cluster-viewer") {
		t.Errorf("queues as a namespace user: exit %d, stderr %q", code, stderr)
	}

	// An admin: the queue with its pending gangs, the node's GPUs all used.
	admin := env.Kubeconfig
	err = testcluster.Eventually(ctx, time.Minute, func(context.Context) (bool, error) {
		code, stdout, _ := plugin(t, bin, admin, "queues", "-o", "json")
		var tree cli.QueueTree
		if code != 0 || json.Unmarshal([]byte(stdout), &tree) != nil {
			return false, nil
		}
		for _, r := range tree.Queues {
			if r.Name == q.Name {
				return r.Pending == 3 && r.Running == 1 && r.Allocated["nvidia.com/gpu"] == "4", nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("queues never showed %s with 3 pending, 1 running, 4 GPUs allocated: %v", q.Name, err)
	}
	// why, as the admin: the closest placement and what must free.
	code, stdout, stderr = plugin(t, bin, admin, "-n", s.ns, "why", "pod/b-0", "-o", "json")
	var w cli.Why
	if code != 0 || json.Unmarshal([]byte(stdout), &w) != nil {
		t.Fatalf("why as admin: exit %d: %s %s", code, stderr, stdout)
	}
	wantFree := map[string]string{"nvidia.com/gpu": "4", "cpu": "2", "memory": "2Gi"}
	if cl := w.Closest; cl == nil || cl.Fit != 0 || cl.Need != 2 || fmt.Sprint(cl.ToFree) != fmt.Sprint(wantFree) {
		t.Errorf("why as admin: closest %+v (%s), want 0 of 2 fit and %v to free", cl, w.ClosestNote, wantFree)
	}
	code, stdout, stderr = plugin(t, bin, admin, "top", "-o", "json")
	var topOut cli.Top
	if code != 0 || json.Unmarshal([]byte(stdout), &topOut) != nil {
		t.Fatalf("top: exit %d: %s %s", code, stderr, stdout)
	}
	wantDomains := map[string]cli.DomainRow{
		"leaf/" + s.name + "-l1": {Nodes: 1, Allocatable: 4, Used: 4},
		"leaf/" + s.name + "-l2": {Nodes: 1, Allocatable: 1, Free: 1, LargestOnNode: 1, FreeNodes: 1},
		"host/" + s.name + "-n0": {Nodes: 1, Allocatable: 4, Used: 4},
		"host/" + s.name + "-n1": {Nodes: 1, Allocatable: 1, Free: 1, LargestOnNode: 1, FreeNodes: 1},
	}
	for _, d := range topOut.Domains {
		key := d.Level + "/" + d.Domain
		w, ok := wantDomains[key]
		if !ok {
			continue
		}
		delete(wantDomains, key)
		w.Level, w.Domain = d.Level, d.Domain
		if d != w {
			t.Errorf("top: %+v, want %+v", d, w)
		}
	}
	if len(wantDomains) > 0 {
		t.Errorf("top: domains missing %v in %+v", wantDomains, topOut.Domains)
	}

	// The positions hold: as each running gang goes, the gang first in
	// line starts. Each waits until the head of the line holds its
	// reservation (after reservationAfterSeconds, 30 s in the canonical
	// profile): before that, a gang behind may take freed room while the
	// ones ahead sit out their backoff (docs/user-guide.md says so).
	if err := env.Client.BatchV1().Jobs(s.ns).Delete(ctx, job.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)}); err != nil {
		t.Fatal(err)
	}
	running := jobPods
	for i, next := range want {
		s.waitCondition(t, next, metav1.ConditionFalse, "Reserving")
		zero := int64(0)
		if err := env.Client.CoreV1().Pods(s.ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero},
			metav1.ListOptions{LabelSelector: running}); err != nil {
			t.Fatal(err)
		}
		waitBound(t, s, gangSelector(next), 2)
		for _, later := range want[i+1:] {
			if pods, err := s.bound(ctx, gangSelector(later)); err != nil || len(pods) != 0 {
				t.Fatalf("%s bound before %s (positions said %v)", later, next, want)
			}
		}
		running = gangSelector(next)
	}
}

// nextSecond waits for the wall clock's next second, so that objects
// created after it have a later creationTimestamp than those before.
func nextSecond(ctx context.Context, t *testing.T) {
	t.Helper()
	now := time.Now()
	select {
	case <-time.After(now.Truncate(time.Second).Add(time.Second).Sub(now)):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
}
