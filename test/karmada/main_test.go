package karmada

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/klog/v2"
)

// Binaries and sources the test runs, set by TestMain.
var (
	// phalanxBin is bin/phalanx-scheduler: $PHALANX_SCHEDULER_BIN, or built
	// from ../.. .
	phalanxBin string
	// globalBin is bin/phalanx-global: $PHALANX_GLOBAL_BIN, or built from
	// ../.. .
	globalBin string
	// kubectlPhalanxBin is bin/kubectl-phalanx: $PHALANX_KUBECTL_BIN, or
	// built from ../.. .
	kubectlPhalanxBin string
	// karmadaBin holds Karmada's aggregated-apiserver, controller-manager,
	// scheduler and scheduler-estimator: $KARMADA_BIN_DIR, or built from
	// ./upstream.
	karmadaBin string
	// karmadaSrc is the source of the Karmada module (CRDs).
	karmadaSrc string
)

func TestMain(m *testing.M) {
	if os.Getenv("PHALANX_TEST_LOG") == "" {
		// The in-process API servers log a lot; failures print the
		// components' own logs.
		klog.LogToStderr(false)
		klog.SetOutput(io.Discard)
	}
	dir, err := os.MkdirTemp("", "phalanx-karmada-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	flag.Parse()
	code := func() int {
		if testing.Short() {
			// m.Run skips the test; nothing to build.
			return m.Run()
		}
		if err := buildAll(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// buildAll builds phalanx-scheduler and the Karmada commands in parallel
// (the first build of ./upstream takes minutes; later ones hit the cache).
func buildAll(dir string) error {
	here, err := os.Getwd()
	if err != nil {
		return err
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []string
	)
	run := func(name, wd string, args ...string) {
		defer wg.Done()
		cmd := exec.Command("go", args...)
		cmd.Dir = wd
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			mu.Lock()
			errs = append(errs, fmt.Sprintf("%s: go %s (in %s): %v\n%s", name, strings.Join(args, " "), wd, err, out.String()))
			mu.Unlock()
		}
	}
	kubectlPhalanxBin = os.Getenv("PHALANX_KUBECTL_BIN")
	if kubectlPhalanxBin == "" {
		kubectlPhalanxBin = filepath.Join(dir, "kubectl-phalanx")
		wg.Add(1)
		go run("kubectl-phalanx", filepath.Join(here, "..", ".."), "build", "-o", kubectlPhalanxBin, "./cmd/kubectl-phalanx")
	}
	globalBin = os.Getenv("PHALANX_GLOBAL_BIN")
	if globalBin == "" {
		globalBin = filepath.Join(dir, "phalanx-global")
		wg.Add(1)
		go run("phalanx-global", filepath.Join(here, "..", ".."), "build", "-o", globalBin, "./cmd/phalanx-global")
	}
	phalanxBin = os.Getenv("PHALANX_SCHEDULER_BIN")
	if phalanxBin == "" {
		phalanxBin = filepath.Join(dir, "phalanx-scheduler")
		wg.Add(1)
		go run("phalanx-scheduler", filepath.Join(here, "..", ".."), "build", "-o", phalanxBin, "./cmd/phalanx-scheduler")
	}
	karmadaBin = os.Getenv("KARMADA_BIN_DIR")
	if karmadaBin == "" {
		karmadaBin = filepath.Join(dir, "karmada") + string(filepath.Separator)
		wg.Add(1)
		// The tag is Karmada's own (hack/build.sh): v1.18's estimator
		// protocol still embeds k8s.io/api messages, which are proto
		// messages in k8s.io/api v0.35 only under this tag; without it
		// karmada-scheduler-estimator panics on its first request.
		args := append([]string{"build", "-tags", "kubernetes_protomessage_one_more_release", "-o", karmadaBin}, karmadaPackages()...)
		go run("karmada", filepath.Join(here, "upstream"), args...)
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("building the test's binaries:\n%s", strings.Join(errs, "\n"))
	}
	for _, name := range karmadaCommands {
		if _, err := os.Stat(karmadaCmd(name)); err != nil {
			return fmt.Errorf("Karmada command %s (KARMADA_BIN_DIR=%q must hold %s): %w", name, os.Getenv("KARMADA_BIN_DIR"), strings.Join(karmadaCommands, ", "), err)
		}
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/karmada-io/karmada").Output()
	if err != nil {
		return fmt.Errorf("locating the Karmada module: %w", err)
	}
	karmadaSrc = strings.TrimSpace(string(out))
	return nil
}

// karmadaCommands are the Karmada commands the tests run, built from
// ./upstream (see upstream/tools.go) or found in $KARMADA_BIN_DIR.
var karmadaCommands = []string{"aggregated-apiserver", "controller-manager", "scheduler", "scheduler-estimator"}

func karmadaPackages() []string {
	out := make([]string, 0, len(karmadaCommands))
	for _, name := range karmadaCommands {
		out = append(out, "github.com/karmada-io/karmada/cmd/"+name)
	}
	return out
}

// karmadaCmd is the path of a Karmada command built by buildAll.
func karmadaCmd(name string) string {
	return filepath.Join(karmadaBin, name)
}
