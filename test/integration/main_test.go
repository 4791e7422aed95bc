// Package integration runs phalanx against a real kube-apiserver and etcd in
// this process (internal/testcluster), with the real scheduler app or binary.
package integration

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/phalanx-sched/phalanx/internal/testcluster"
	"github.com/phalanx-sched/phalanx/manifests"
)

// schedulerBinary is the phalanx-scheduler built from this tree by TestMain.
var schedulerBinary string

// binDir is TestMain's scratch directory for binaries built by the tests.
var binDir string

func TestMain(m *testing.M) {
	if os.Getenv("PHALANX_TEST_LOG") == "" {
		// The control plane logs a lot; failures are reported by the tests.
		klog.LogToStderr(false)
		klog.SetOutput(io.Discard)
	}
	dir, err := os.MkdirTemp("", "phalanx-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	schedulerBinary = os.Getenv("PHALANX_SCHEDULER_BIN")
	if schedulerBinary == "" {
		schedulerBinary = filepath.Join(dir, "phalanx-scheduler")
		build := exec.Command("go", "build", "-o", schedulerBinary, "./cmd/phalanx-scheduler")
		build.Dir = repoRoot()
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building phalanx-scheduler:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// startCluster starts a control plane with nodes; it is torn down with the test.
func startCluster(t *testing.T, nodes ...testcluster.NodeSpec) *testcluster.Cluster {
	t.Helper()
	c, err := testcluster.Start(t, testcluster.Options{})
	if err != nil {
		t.Fatalf("starting cluster: %v", err)
	}
	if err := c.CreateNodes(context.Background(), nodes...); err != nil {
		t.Fatal(err)
	}
	return c
}

// startScheduler runs the canonical phalanx configuration in-process.
func startScheduler(t *testing.T, c *testcluster.Cluster) *testcluster.Scheduler {
	t.Helper()
	s, err := c.StartScheduler(manifests.SchedulerConfig)
	if err != nil {
		t.Fatalf("starting scheduler: %v", err)
	}
	return s
}

// nodes returns n identical nodes named prefix-0..n-1.
func nodes(prefix string, n int, spec testcluster.NodeSpec) []testcluster.NodeSpec {
	out := make([]testcluster.NodeSpec, n)
	for i := range out {
		s := spec
		s.Name = fmt.Sprintf("%s-%d", prefix, i)
		out[i] = s
	}
	return out
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
