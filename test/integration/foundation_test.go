package integration

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
	"github.com/phalanx-sched/phalanx/manifests"
)

func waitBound(t *testing.T, c *testcluster.Cluster, ns, name string) {
	t.Helper()
	ctx := ctxFor(t)
	err := testcluster.Eventually(ctx, 60*time.Second, func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && p.Spec.NodeName != "", err
	})
	if err != nil {
		t.Fatalf("pod %s/%s not bound: %v", ns, name, err)
	}
}

// TestBinarySecondScheduler runs the built binary with the canonical config:
// it binds pods that ask for phalanx-scheduler and leaves default-scheduler
// pods to the stock scheduler.
func TestBinarySecondScheduler(t *testing.T) {
	c := startCluster(t, nodes("n", 2, testcluster.NodeSpec{CPU: "4", Memory: "8Gi"})...)
	s, err := c.StartSchedulerBinary(schedulerBinary, manifests.SchedulerConfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	if err := c.CreatePods(ctx,
		testcluster.PodSpec{Name: "mine", CPU: "1"},
		testcluster.PodSpec{Name: "not-mine", CPU: "1", SchedulerName: "default-scheduler"},
	); err != nil {
		t.Fatal(err)
	}
	waitBound(t, c, "default", "mine")
	// The phalanx pod was bound after the other was created, so the binary has
	// seen both; the default-scheduler pod must still be pending.
	p, err := c.Client.CoreV1().Pods("default").Get(ctx, "not-mine", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName != "" {
		t.Fatalf("second-scheduler mode bound a default-scheduler pod to %s", p.Spec.NodeName)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
}

// TestBinaryReplacesDefaultScheduler runs the replace-mode config: one binary
// serves both the default-scheduler and the phalanx-scheduler profiles.
func TestBinaryReplacesDefaultScheduler(t *testing.T) {
	config, err := os.ReadFile(filepath.Join(repoRoot(), "manifests", "replace", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, nodes("n", 2, testcluster.NodeSpec{CPU: "4", Memory: "8Gi"})...)
	if _, err := c.StartSchedulerBinary(schedulerBinary, config, "--leader-elect=false"); err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	if err := c.CreatePods(ctx,
		testcluster.PodSpec{Name: "phalanx", CPU: "1"},
		testcluster.PodSpec{Name: "stock", CPU: "1", SchedulerName: "default-scheduler"},
		testcluster.PodSpec{Name: "other", CPU: "1", SchedulerName: "someone-else"},
	); err != nil {
		t.Fatal(err)
	}
	waitBound(t, c, "default", "phalanx")
	waitBound(t, c, "default", "stock")
	p, err := c.Client.CoreV1().Pods("default").Get(ctx, "other", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName != "" {
		t.Fatalf("a pod for an unknown scheduler was bound to %s", p.Spec.NodeName)
	}
}

// TestInvalidObjectsRejectedByAPIServer checks the CRDs' validation: the API
// server refuses bad Queues and NetworkTopologies and names the field.
func TestInvalidObjectsRejectedByAPIServer(t *testing.T) {
	c := startCluster(t)
	ctx := ctxFor(t)
	queues := c.Phalanx.SchedulingV1alpha1().Queues()
	tests := []struct {
		name    string
		queue   *phalanxv1alpha1.Queue
		wantMsg []string
	}{
		{
			name:    "negative weight",
			queue:   &phalanxv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "q1"}, Spec: phalanxv1alpha1.QueueSpec{Weight: -1}},
			wantMsg: []string{"spec.weight"},
		},
		{
			name:    "own parent",
			queue:   &phalanxv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "q2"}, Spec: phalanxv1alpha1.QueueSpec{Parent: "q2"}},
			wantMsg: []string{"own parent"},
		},
		{
			name:    "unknown state",
			queue:   &phalanxv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "q3"}, Spec: phalanxv1alpha1.QueueSpec{State: "Paused"}},
			wantMsg: []string{"spec.state"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := queues.Create(ctx, tc.queue, metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want Invalid, got %v", err)
			}
			for _, m := range tc.wantMsg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
		})
	}
	t.Run("valid queue is accepted with defaults", func(t *testing.T) {
		q, err := queues.Create(ctx, &phalanxv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "ok"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if q.Spec.Weight != 1 || q.Spec.State != "Open" || q.Spec.Reclaimable == nil || !*q.Spec.Reclaimable {
			t.Fatalf("defaults not applied: %+v", q.Spec)
		}
	})
	t.Run("duplicate topology levels", func(t *testing.T) {
		nt := &phalanxv1alpha1.NetworkTopology{
			ObjectMeta: metav1.ObjectMeta{Name: "default"},
			Spec: phalanxv1alpha1.NetworkTopologySpec{Levels: []phalanxv1alpha1.TopologyLevel{
				{Name: "leaf", NodeLabel: "example.com/leaf"},
				{Name: "leaf", NodeLabel: "example.com/spine"},
			}},
		}
		_, err := c.Phalanx.SchedulingV1alpha1().NetworkTopologies().Create(ctx, nt, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.levels") {
			t.Fatalf("want Invalid naming spec.levels, got %v", err)
		}
	})
}

// TestBadPluginArgsStopTheScheduler: the binary refuses to start and names the
// offending field.
func TestBadPluginArgsStopTheScheduler(t *testing.T) {
	c := startCluster(t)
	tests := []struct {
		name, from, to, want string
	}{
		{
			name: "timeout out of range",
			from: "defaultScheduleTimeoutSeconds: 60", to: "defaultScheduleTimeoutSeconds: 0",
			want: "pluginConfig[Coscheduling].args.defaultScheduleTimeoutSeconds",
		},
		{
			name: "unknown scoring strategy",
			from: "scoringStrategy: LeastNUMANodes", to: "scoringStrategy: Fastest",
			want: "pluginConfig[NUMATopology].args.scoringStrategy",
		},
		{
			name: "invalid queue name",
			from: "defaultQueue: default", to: "defaultQueue: Not_A_Name",
			want: "pluginConfig[CapacityQueue].args.defaultQueue",
		},
		{
			name: "unknown field",
			from: "topologyName: default", to: "topologyNme: default",
			want: "topologyNme",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			config := strings.Replace(string(manifests.SchedulerConfig), tc.from, tc.to, 1)
			if config == string(manifests.SchedulerConfig) {
				t.Fatalf("canonical config has no %q", tc.from)
			}
			out, err := c.RunSchedulerBinary(schedulerBinary, []byte(config), time.Minute)
			var exit *exec.ExitError
			if err == nil || !errors.As(err, &exit) {
				t.Fatalf("scheduler did not fail at start (err %v); output:\n%s", err, out)
			}
			if !strings.Contains(out, tc.want) {
				t.Fatalf("output does not name %q:\n%s", tc.want, tail(out, 2000))
			}
		})
	}
}

func TestVersion(t *testing.T) {
	out, err := exec.Command(schedulerBinary, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("--version: %v\n%s", err, out)
	}
	if !strings.HasPrefix(string(out), "phalanx-scheduler ") || !strings.Contains(string(out), "(Kubernetes v1.37.") {
		t.Fatalf("--version printed %q", out)
	}
	help, err := exec.Command(schedulerBinary, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("--help: %v", err)
	}
	for _, flag := range []string{"--config", "--kubeconfig", "--leader-elect", "--secure-port"} {
		if !strings.Contains(string(help), flag) {
			t.Errorf("--help lacks %s", flag)
		}
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
