package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// renderSchedulerConfig renders the chart with extra helm args and returns the
// scheduler's config.yaml from its ConfigMap.
func renderSchedulerConfig(t *testing.T, extra ...string) string {
	t.Helper()
	args := append([]string{"template", "phalanx", filepath.Join(repoRoot(), "charts", "phalanx"), "-n", "phalanx-system"}, extra...)
	out, err := exec.Command(bins.helm, args...).Output()
	if err != nil {
		t.Fatalf("helm %v: %v", args, err)
	}
	objs, err := decodeObjects(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && o.GetName() == "phalanx-scheduler-config" {
			data, _ := o.Object["data"].(map[string]any)
			cfg, _ := data["config.yaml"].(string)
			return cfg
		}
	}
	t.Fatal("no ConfigMap phalanx-scheduler-config in the render")
	return ""
}

// TestChartPluginArgs: plugin args given as chart values reach the
// KubeSchedulerConfiguration, and a bad one stops the binary at start with
// the field named.
func TestChartPluginArgs(t *testing.T) {
	if os.Getenv("PHALANX_E2E_KUBECONFIG") != "" {
		t.Skip("runs the phalanx-scheduler binary locally; covered by make test")
	}
	good := renderSchedulerConfig(t, "--set", "scheduler.pluginArgs.Coscheduling.defaultScheduleTimeoutSeconds=120")
	if !strings.Contains(good, "defaultScheduleTimeoutSeconds: 120") {
		t.Errorf("scheduler.pluginArgs did not reach the config:\n%s", good)
	}
	bad := renderSchedulerConfig(t, "--set", "scheduler.pluginArgs.Coscheduling.defaultScheduleTimeoutSeconds=-1")

	c, err := testcluster.Start(t, testcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bins.scheduler, "--config="+cfg, "--kubeconfig="+c.Kubeconfig,
		"--secure-port=0", "--leader-elect=false").CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("phalanx-scheduler kept running with defaultScheduleTimeoutSeconds=-1:\n%s", tail(string(out), 20))
	}
	if err == nil || !strings.Contains(string(out), "defaultScheduleTimeoutSeconds") {
		t.Fatalf("phalanx-scheduler with defaultScheduleTimeoutSeconds=-1: err %v, want an exit naming the field:\n%s", err, tail(string(out), 20))
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
