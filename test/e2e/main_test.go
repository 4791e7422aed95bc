// Package e2e is phalanx's end-to-end suite: gangs, queues, topology, NUMA,
// metrics, events and conditions, seen the way a user sees them, through the
// API of a cluster where phalanx is installed from its Helm chart.
//
// The scenarios are the same everywhere; only the bootstrap differs:
//
//   - PHALANX_E2E_KUBECONFIG set: an existing cluster (hack/e2e-kind.sh
//     installs the chart with helm into kind); PHALANX_E2E_MODE names the
//     mode installed (second-scheduler, the default, or replace) and
//     PHALANX_E2E_NAMESPACE the release namespace (phalanx-system).
//   - otherwise (make test): for each mode, an in-process kube-apiserver with
//     --authorization-mode=Node,RBAC, the chart rendered with helm (Helm's Go
//     module, bin/tools/helm) and applied, and the scheduler and controller
//     binaries started as their pod specs say, each inside bubblewrap with a
//     read-only root and its ServiceAccount token as the only credential.
//     Second-scheduler mode runs a stock kube-scheduler (built from
//     k8s.io/kubernetes) beside phalanx; replace mode runs phalanx alone as
//     the static pod of values-replace.yaml.
package e2e

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"k8s.io/klog/v2"
)

// binaries built (or found) by TestMain for the in-process bootstrap.
var bins struct {
	scheduler, controller, kubeScheduler, helm, kubectlPhalanx, global string
}

func TestMain(m *testing.M) {
	if os.Getenv("PHALANX_TEST_LOG") == "" {
		klog.LogToStderr(false)
		klog.SetOutput(io.Discard)
	}
	if os.Getenv("PHALANX_E2E_KUBECONFIG") == "" {
		dir, err := os.MkdirTemp("", "phalanx-e2e-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		err = buildBinaries(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			_ = os.RemoveAll(dir)
			os.Exit(1)
		}
		code := m.Run()
		_ = os.RemoveAll(dir)
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// buildBinaries uses PHALANX_BIN_DIR's phalanx-scheduler and
// phalanx-controller when set (make test passes bin/), builds them otherwise,
// and always builds the stock kube-scheduler from the k8s.io/kubernetes
// module of go.mod. helm is bin/tools/helm (hack/tools.sh) or PHALANX_HELM.
func buildBinaries(dir string) error {
	root := repoRoot()
	build := func(out, pkg string) error {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Dir = root
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("building %s: %w", pkg, err)
		}
		return nil
	}
	if d := os.Getenv("PHALANX_BIN_DIR"); d != "" {
		bins.scheduler = filepath.Join(d, "phalanx-scheduler")
		bins.controller = filepath.Join(d, "phalanx-controller")
		bins.kubectlPhalanx = filepath.Join(d, "kubectl-phalanx")
		bins.global = filepath.Join(d, "phalanx-global")
	} else {
		bins.scheduler = filepath.Join(dir, "phalanx-scheduler")
		bins.controller = filepath.Join(dir, "phalanx-controller")
		bins.global = filepath.Join(dir, "phalanx-global")
		if err := build(bins.global, "./cmd/phalanx-global"); err != nil {
			return err
		}
		if err := build(bins.scheduler, "./cmd/phalanx-scheduler"); err != nil {
			return err
		}
		if err := build(bins.controller, "./cmd/phalanx-controller"); err != nil {
			return err
		}
	}
	bins.kubeScheduler = filepath.Join(dir, "kube-scheduler")
	if err := build(bins.kubeScheduler, "k8s.io/kubernetes/cmd/kube-scheduler"); err != nil {
		return err
	}
	bins.helm = os.Getenv("PHALANX_HELM")
	if bins.helm == "" {
		bins.helm = filepath.Join(root, "bin", "tools", "helm")
	}
	for _, b := range []string{bins.scheduler, bins.controller, bins.helm} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("%w (make build and hack/tools.sh provide it)", err)
		}
	}
	return nil
}
