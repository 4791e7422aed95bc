package workloads

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/klog/v2"
)

func TestMain(m *testing.M) {
	if os.Getenv("PHALANX_TEST_LOG") == "" {
		// The control plane logs a lot; failures are reported by the tests.
		klog.LogToStderr(false)
		klog.SetOutput(io.Discard)
	}
	os.Exit(m.Run())
}

// operatorCRDs are the CRD files of the operators, by module (versions and
// checksums pinned in this module's go.mod and go.sum).
var operatorCRDs = map[string][]string{
	"sigs.k8s.io/jobset":                          {"config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"},
	"sigs.k8s.io/lws":                             {"config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml"},
	"github.com/ray-project/kuberay/ray-operator": {"config/crd/bases/ray.io_rayclusters.yaml"},
	"github.com/kubeflow/training-operator":       {"manifests/base/crds/kubeflow.org_pytorchjobs.yaml"},
	"github.com/kubeflow/trainer/v2": {
		"manifests/base/crds/trainer.kubeflow.org_trainingruntimes.yaml",
		"manifests/base/crds/trainer.kubeflow.org_clustertrainingruntimes.yaml",
		"manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml",
	},
}

// readCRDs reads the CRD files of the given modules from the module cache
// (`go mod download` fetches them if missing).
func readCRDs(t *testing.T, modules ...string) [][]byte {
	t.Helper()
	var out [][]byte
	for _, mod := range modules {
		files, ok := operatorCRDs[mod]
		if !ok {
			t.Fatalf("no CRDs listed for module %s", mod)
		}
		dir := moduleDir(t, mod)
		for _, f := range files {
			raw, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				t.Fatalf("CRD of %s: %v", mod, err)
			}
			out = append(out, raw)
		}
	}
	return out
}

func moduleDir(t *testing.T, mod string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", mod)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v", mod, err)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil || info.Dir == "" {
		t.Fatalf("go mod download %s: no module directory (%v %s)", mod, err, info.Error)
	}
	return info.Dir
}

func repoRoot() string { return filepath.Join("..", "..") }
