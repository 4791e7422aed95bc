package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/phalanx-sched/phalanx/internal/testcluster"
	"github.com/phalanx-sched/phalanx/manifests"
)

var (
	podGroupsGVR = schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}
	nrtGVR       = func(v string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: "topology.node.k8s.io", Version: v, Resource: "noderesourcetopologies"}
	}
)

// podGroupConditions reads status.conditions of a PodGroup; the
// scheduler-plugins Go type has no such field, phalanx's CRD does.
func podGroupConditions(ctx context.Context, env *Env, ns, name string) ([]metav1.Condition, error) {
	u, err := env.Dynamic.Resource(podGroupsGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return conditionsOf(u)
}

func conditionsOf(u *unstructured.Unstructured) ([]metav1.Condition, error) {
	raw, found, err := unstructured.NestedSlice(u.Object, "status", "conditions")
	if err != nil || !found {
		return nil, err
	}
	var conds []metav1.Condition
	for _, r := range raw {
		var c metav1.Condition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(r.(map[string]any), &c); err != nil {
			return nil, err
		}
		conds = append(conds, c)
	}
	return conds, nil
}

// upstreamCRD reads a CRD as its project ships it, from the Go module cache
// (the module versions of go.mod).
func upstreamCRD(t *testing.T, module, path string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", module, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		cmd := exec.Command("go", "mod", "download", module)
		cmd.Dir = repoRoot()
		if err := cmd.Run(); err != nil {
			t.Fatalf("go mod download %s: %v", module, err)
		}
		out, _ = exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module).Output()
		dir = strings.TrimSpace(string(out))
	}
	raw, err := os.ReadFile(filepath.Join(dir, path))
	if err != nil {
		t.Fatal(err)
	}
	return decodeCRD(t, raw)
}

func decodeCRD(t *testing.T, raw []byte) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	return &crd
}

func phalanxCRD(t *testing.T, file string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	raw, err := manifests.CRDs.ReadFile("crds/" + file)
	if err != nil {
		t.Fatal(err)
	}
	return decodeCRD(t, raw)
}

// TestCRDCoexistence installs phalanx's bundled PodGroup and
// NodeResourceTopology CRDs over scheduler-plugins' and NFD's, and the other
// way round, and checks what a user sees (docs/deploy.md describes it).
func TestCRDCoexistence(t *testing.T) {
	var c *testcluster.Cluster
	if kc := os.Getenv("PHALANX_E2E_KUBECONFIG"); kc != "" {
		if os.Getenv("PHALANX_E2E_CRD_ORDERS") != "1" {
			t.Skip("replaces the cluster's PodGroup and NodeResourceTopology CRDs; set PHALANX_E2E_CRD_ORDERS=1 (hack/e2e-kind.sh does)")
		}
		var err error
		if c, err = testcluster.Connect(t, kc); err != nil {
			t.Fatal(err)
		}
	} else {
		var err error
		if c, err = testcluster.Start(t, testcluster.Options{SkipCRDs: true}); err != nil {
			t.Fatal(err)
		}
	}
	env := &Env{Cluster: c}
	ctx := ctxFor(t, 10*time.Minute)

	spPodGroup := upstreamCRD(t, "sigs.k8s.io/scheduler-plugins", "config/crd/bases/scheduling.x-k8s.io_podgroups.yaml")
	nfdNRT := upstreamCRD(t, "github.com/k8stopologyawareschedwg/noderesourcetopology-api", "manifests/crd.yaml")
	pxPodGroup := phalanxCRD(t, "scheduling.x-k8s.io_podgroups.yaml")
	pxNRT := phalanxCRD(t, "topology.node.k8s.io_noderesourcetopologies.yaml")
	if !served(nfdNRT, "v1alpha1") || !served(nfdNRT, "v1alpha2") {
		t.Fatalf("NFD's NRT CRD serves %v; the test expects v1alpha1 and v1alpha2", versions(nfdNRT))
	}
	ns := "e2e-crds"
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, namespace(ns), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	apply := func(crds ...*apiextensionsv1.CustomResourceDefinition) {
		t.Helper()
		for _, crd := range crds {
			if err := applyCRD(ctx, c, crd.DeepCopy()); err != nil {
				t.Fatalf("applying %s over the installed CRD: %v", crd.Name, err)
			}
		}
	}
	restore := func() {
		// Leave phalanx's CRDs installed, as a phalanx cluster has them.
		apply(pxPodGroup, pxNRT)
	}
	defer restore()

	t.Run("PhalanxOverSchedulerPluginsAndNFD", func(t *testing.T) {
		removeCRDs(ctx, t, c, spPodGroup.Name, nfdNRT.Name)
		apply(spPodGroup, nfdNRT)
		createPodGroup(ctx, t, env, ns, "existing")
		createNRT(ctx, t, env, "v1alpha1", "node-v1alpha1")
		createNRT(ctx, t, env, "v1alpha2", "node-v1alpha2")

		apply(pxPodGroup, pxNRT)

		// Nothing of the existing install is lost: the PodGroup, and NRT
		// objects under both versions NFD serves.
		if _, err := env.Dynamic.Resource(podGroupsGVR).Namespace(ns).Get(ctx, "existing", metav1.GetOptions{}); err != nil {
			t.Errorf("PodGroup existing after phalanx's CRD: %v", err)
		}
		for _, v := range []string{"v1alpha1", "v1alpha2"} {
			for _, name := range []string{"node-v1alpha1", "node-v1alpha2"} {
				if _, err := env.Dynamic.Resource(nrtGVR(v)).Get(ctx, name, metav1.GetOptions{}); err != nil {
					t.Errorf("NRT %s as %s after phalanx's CRD: %v", name, v, err)
				}
			}
		}
		// phalanx's explanations are kept from now on.
		setCondition(ctx, t, env, ns, "existing")
		conds, err := podGroupConditions(ctx, env, ns, "existing")
		if err != nil || meta.FindStatusCondition(conds, "Scheduled") == nil {
			t.Errorf("PodGroup status.conditions after phalanx's CRD: %v (%v), want the Scheduled condition kept", conds, err)
		}
	})

	t.Run("SchedulerPluginsAndNFDOverPhalanx", func(t *testing.T) {
		removeCRDs(ctx, t, c, pxPodGroup.Name, pxNRT.Name)
		apply(pxPodGroup, pxNRT)
		createPodGroup(ctx, t, env, ns, "gang")
		setCondition(ctx, t, env, ns, "gang")
		createNRT(ctx, t, env, "v1alpha2", "node-a")

		// Reinstalling scheduler-plugins or NFD (their CRD over phalanx's).
		apply(spPodGroup, nfdNRT)

		pg, err := env.Dynamic.Resource(podGroupsGVR).Namespace(ns).Get(ctx, "gang", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("PodGroup gang after scheduler-plugins' CRD: %v", err)
		}
		if mm, _, _ := unstructured.NestedInt64(pg.Object, "spec", "minMember"); mm != 2 {
			t.Errorf("PodGroup gang spec.minMember = %d after scheduler-plugins' CRD, want 2", mm)
		}
		for _, v := range []string{"v1alpha1", "v1alpha2"} {
			if _, err := env.Dynamic.Resource(nrtGVR(v)).Get(ctx, "node-a", metav1.GetOptions{}); err != nil {
				t.Errorf("NRT node-a as %s after NFD's CRD: %v", v, err)
			}
		}
		// What users see: scheduler-plugins' schema has no status.conditions,
		// so the API server prunes phalanx's Scheduled condition until
		// phalanx's CRD is applied again (docs/deploy.md). Events still say
		// why a gang waits.
		conds, err := conditionsOf(pg)
		if err != nil {
			t.Fatal(err)
		}
		if len(conds) != 0 {
			t.Errorf("status.conditions survived scheduler-plugins' CRD (%v); update docs/deploy.md, which says they are pruned", conds)
		}
		apply(pxPodGroup, pxNRT)
		setCondition(ctx, t, env, ns, "gang")
		if conds, err := podGroupConditions(ctx, env, ns, "gang"); err != nil || len(conds) == 0 {
			t.Errorf("conditions after re-applying phalanx's CRD: %v (%v)", conds, err)
		}
	})
}

func served(crd *apiextensionsv1.CustomResourceDefinition, version string) bool {
	for _, v := range crd.Spec.Versions {
		if v.Name == version {
			return v.Served
		}
	}
	return false
}

func versions(crd *apiextensionsv1.CustomResourceDefinition) []string {
	var out []string
	for _, v := range crd.Spec.Versions {
		out = append(out, v.Name)
	}
	return out
}

func removeCRDs(ctx context.Context, t *testing.T, c *testcluster.Cluster, names ...string) {
	t.Helper()
	client, err := apiextensionsClient(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		err := client.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		err = testcluster.Eventually(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
			_, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Fatalf("CRD %s not removed: %v", name, err)
		}
	}
}

func createPodGroup(ctx context.Context, t *testing.T, env *Env, ns, name string) {
	t.Helper()
	pg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"minMember": int64(2)},
	}}
	err := testcluster.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		_, err := env.Dynamic.Resource(podGroupsGVR).Namespace(ns).Create(ctx, pg, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err), err
	})
	if err != nil {
		t.Fatalf("PodGroup %s: %v", name, err)
	}
}

// setCondition writes the Scheduled condition as phalanx's scheduler does.
func setCondition(ctx context.Context, t *testing.T, env *Env, ns, name string) {
	t.Helper()
	err := testcluster.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		u, err := env.Dynamic.Resource(podGroupsGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond := map[string]any{"type": "Scheduled", "status": "False", "reason": "Unschedulable",
			"message": "no node fits", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
		if err := unstructured.SetNestedSlice(u.Object, []any{cond}, "status", "conditions"); err != nil {
			return false, err
		}
		_, err = env.Dynamic.Resource(podGroupsGVR).Namespace(ns).UpdateStatus(ctx, u, metav1.UpdateOptions{})
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("writing the Scheduled condition of %s: %v", name, err)
	}
}

func createNRT(ctx context.Context, t *testing.T, env *Env, version, name string) {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "topology.node.k8s.io/" + version, "kind": "NodeResourceTopology",
		"metadata":         map[string]any{"name": name},
		"topologyPolicies": []any{"SingleNUMANodeContainerLevel"},
		"zones": []any{map[string]any{"name": "node-0", "type": "Node", "resources": []any{
			map[string]any{"name": "cpu", "capacity": "4", "allocatable": "4", "available": "4"}}}},
	}}
	err := testcluster.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		_, err := env.Dynamic.Resource(nrtGVR(version)).Create(ctx, obj, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err), err
	})
	if err != nil {
		t.Fatalf("NRT %s (%s): %v", name, version, err)
	}
}
