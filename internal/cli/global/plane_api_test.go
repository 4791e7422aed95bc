package global_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/clock"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/cli"
	clglobal "github.com/phalanx-sched/phalanx/internal/cli/global"
	"github.com/phalanx-sched/phalanx/internal/estimator"
	"github.com/phalanx-sched/phalanx/internal/global"
	"github.com/phalanx-sched/phalanx/internal/global/plane"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// queued puts every template in queue team-a; eval depends on next.
type queued struct{}

func (queued) Of(_ context.Context, _, _, _, name string) (*estimator.Template, error) {
	t := &estimator.Template{Labels: map[string]string{phalanxv1alpha1.QueueLabel: "team-a"}}
	if name == "eval" {
		t.Annotations = map[string]string{phalanxv1alpha1.DependsOnAnnotation: "next"}
	}
	return t, nil
}

// onlyBig: member m1 starts job big, and nothing else.
type onlyBig struct{}

func (onlyBig) Sets(_ context.Context, job *global.Job, asks []global.Ask) map[string]global.Answer {
	out := map[string]global.Answer{}
	for _, a := range asks {
		if job.Name == "big" {
			out[a.Member] = global.Answer{Sets: 1}
		} else {
			out[a.Member] = global.Answer{Sets: 0}
		}
	}
	return out
}

func binding(ns, name, kind string, priority int64, scheduler string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
		"metadata": map[string]any{"name": name + "-job", "namespace": ns},
		"spec": map[string]any{"resource": map[string]any{"apiVersion": "batch/v1", "kind": kind, "namespace": ns, "name": name, "resourceVersion": "1"},
			"replicas": int64(2), "replicaRequirements": map[string]any{"resourceRequest": map[string]any{"nvidia.com/gpu": "4"}},
			"schedulerName": scheduler, "schedulePriority": map[string]any{"priority": priority}}}}
}

func mustCreate(t *testing.T, c *testcluster.Cluster, gvr schema.GroupVersionResource, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	ri := c.Dynamic.Resource(gvr).Namespace(u.GetNamespace())
	status, hasStatus := u.Object["status"]
	got, err := ri.Create(context.Background(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hasStatus {
		got.Object["status"] = status
		if got, err = ri.UpdateStatus(context.Background(), got, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

func runCLI(t *testing.T, kubeconfig string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := cli.Run(append([]string{"--kubeconfig", kubeconfig}, args...), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestJobsOnPlane: phalanx-global decides four bindings on an API server
// that serves ResourceBindings (schema-less) with RBAC on; a user who may
// only read the namespace's bindings, positions and events runs kubectl
// phalanx jobs and why there: the dispatched job runs in m1, the next one
// waits with its position, the one depending on it waits behind it; the
// other scheduler's binding is not shown. The user may not read Queues
// (nor Clusters), which the commands do not need.
func TestJobsOnPlane(t *testing.T) {
	c, err := testcluster.Start(t, testcluster.Options{APIServerFlags: []string{"--authorization-mode=RBAC"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), ktesting.NewLogger(t, ktesting.NewConfig())))
	defer cancel()
	// The schema-less Karmada CRDs the plane's own tests use.
	crds, err := os.ReadFile("../../global/plane/testdata/karmada-crds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.InstallCRDYAML(ctx, crds); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Phalanx.SchedulingV1alpha1().Queues().Create(ctx, &phalanxv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Spec: phalanxv1alpha1.QueueSpec{Weight: 1}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"ml", "other"} {
		if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mustCreate(t, c, plane.Clusters, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
		"metadata": map[string]any{"name": "m1"},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "ClusterReady", "message": "", "lastTransitionTime": "2026-12-07T00:00:00Z"}},
			"resourceSummary": map[string]any{"allocatable": map[string]any{"nvidia.com/gpu": "16"}}}}})
	mustCreate(t, c, plane.ResourceBindings, binding("ml", "big", "PyTorchJob", 20, "phalanx-global"))
	mustCreate(t, c, plane.ResourceBindings, binding("ml", "next", "Job", 10, "phalanx-global"))
	mustCreate(t, c, plane.ResourceBindings, binding("ml", "eval", "Job", 5, "phalanx-global"))
	mustCreate(t, c, plane.ResourceBindings, binding("ml", "theirs", "Job", 0, "default-scheduler"))
	mustCreate(t, c, plane.ResourceBindings, binding("other", "solo", "Job", 0, "phalanx-global"))

	p := plane.New(plane.Options{SchedulerName: "phalanx-global", DefaultQueue: "team-a", Interval: 200 * time.Millisecond},
		c.Dynamic, c.Client, queued{}, onlyBig{}, clock.RealClock{})
	go func() { _ = p.Run(ctx) }()
	// until big is dispatched and the positions of ml list next and eval
	if err := testcluster.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		qp, err := c.Phalanx.SchedulingV1alpha1().QueuePositionses("ml").Get(ctx, phalanxv1alpha1.QueuePositionsName, metav1.GetOptions{})
		return err == nil && len(qp.Gangs) == 2, nil
	}); err != nil {
		t.Fatalf("phalanx-global never wrote the positions of ml: %v", err)
	}
	// big runs in m1, as Karmada aggregates it.
	big, err := c.Dynamic.Resource(plane.ResourceBindings).Namespace("ml").Get(ctx, "big-job", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(big.Object, []any{map[string]any{"clusterName": "m1", "applied": true,
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Running", "status": "True"}}}}}, "status", "aggregatedStatus"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Dynamic.Resource(plane.ResourceBindings).Namespace("ml").UpdateStatus(ctx, big, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	userConfig := researcher(ctx, t, c, "ml")
	var table string
	if err := testcluster.Eventually(ctx, 30*time.Second, func(context.Context) (bool, error) {
		code, stdout, stderr := runCLI(t, userConfig, "-n", "ml", "jobs")
		if code != 0 {
			return false, fmt.Errorf("jobs: exit %d: %s", code, stderr)
		}
		table = stdout
		return strings.Contains(stdout, "Running"), nil
	}); err != nil {
		t.Fatalf("jobs never showed big running: %v\n%s", err, table)
	}
	t.Logf("kubectl phalanx -n ml jobs:\n%s", table)
	lines := strings.Split(strings.TrimRight(table, "\n"), "\n")
	wantLines := []string{
		"NAMESPACE  NAME            QUEUE   POSITION                         MEMBER  STATE    WHY",
		"ml         Job/next        team-a  1/3 in team-a (#1 on the plane)  -       Waiting  NoMemberFitsNow: no member can start the whole set now: m1: 0 whole sets fit now",
		"ml         Job/eval        team-a  2/3 in team-a (#2 on the plane)  -       Waiting  DependencyWaiting: depends on ml/next: it waits on the plane",
		"ml         PyTorchJob/big  team-a  -                                m1      Running  Success: dispatched whole to member m1 (m1: 1 whole sets fit now)",
	}
	if strings.Join(lines, "\n") != strings.Join(wantLines, "\n") {
		t.Errorf("jobs:\n%s\nwant:\n%s", table, strings.Join(wantLines, "\n"))
	}

	code, stdout, stderr := runCLI(t, userConfig, "-n", "ml", "why", "eval")
	if code != 0 {
		t.Fatalf("why eval: exit %d: %s", code, stderr)
	}
	t.Logf("kubectl phalanx -n ml why eval:\n%s", stdout)
	for _, want := range []string{
		"Binding:    ResourceBinding ml/eval-job (template Job eval)",
		"Position:   2 of 3 in queue team-a, 2 on the plane",
		"Ahead:      next-job, because of higher priority (10 > 5)",
		"Waits for:  DependencyWaiting: depends on ml/next: it waits on the plane (position 2 in queue team-a)",
		"Normal  DependencyWaiting: depends on ml/next",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("why eval does not say %q:\n%s", want, stdout)
		}
	}
	code, stdout, _ = runCLI(t, userConfig, "-n", "ml", "why", "rb/big-job", "-o", "json")
	var w clglobal.Why
	if err := json.Unmarshal([]byte(stdout), &w); code != 0 || err != nil || w.Binding.State != clglobal.Running || w.Binding.Member != "m1" || w.Binding.Queue != "team-a" {
		t.Errorf("why rb/big-job -o json: exit %d, %v: %+v", code, err, w.Binding)
	}

	// The user reads no Queues, Clusters or other namespace; an admin sees
	// every namespace.
	if code, _, stderr := runCLI(t, userConfig, "queues"); code != 1 || !strings.Contains(stderr, "permission denied") {
		t.Errorf("queues as the namespace user: exit %d, %s; want permission denied", code, stderr)
	}
	if code, _, stderr := runCLI(t, userConfig, "-A", "jobs"); code != 1 || !strings.Contains(stderr, "permission denied: you may not read resourcebindings.work.karmada.io") {
		t.Errorf("jobs -A as the namespace user: exit %d, %s; want permission denied naming resourcebindings", code, stderr)
	}
	code, stdout, stderr = runCLI(t, c.Kubeconfig, "-A", "jobs", "-o", "json")
	var all clglobal.List
	if err := json.Unmarshal([]byte(stdout), &all); code != 0 || err != nil {
		t.Fatalf("jobs -A as admin: exit %d, %v: %s", code, err, stderr)
	}
	var names []string
	for _, r := range all.Jobs {
		names = append(names, r.Namespace+"/"+r.Name)
	}
	if strings.Join(names, ",") != "ml/next,ml/eval,other/solo,ml/big" {
		t.Errorf("jobs -A: %v, want the four bindings of phalanx-global, the waiting ones first in the plane's order (priority)", names)
	}
}

// researcher is a ServiceAccount of ns that may read its bindings,
// positions and events, and nothing else; its kubeconfig.
func researcher(ctx context.Context, t *testing.T, c *testcluster.Cluster, ns string) string {
	t.Helper()
	const user = "researcher"
	if _, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: user}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	read := []string{"get", "list", "watch"}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"work.karmada.io"}, Resources: []string{"resourcebindings"}, Verbs: read},
		{APIGroups: []string{phalanxv1alpha1.GroupName}, Resources: []string{"queuepositions"}, Verbs: read},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: read},
	}}
	if _, err := c.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: user, Namespace: ns}}}
	if _, err := c.Client.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token, err := c.ServiceAccountToken(ctx, ns, user)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "researcher.kubeconfig")
	if err := c.WriteTokenKubeconfig(path, token); err != nil {
		t.Fatal(err)
	}
	return path
}
