package workloads

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
	"github.com/phalanx-sched/phalanx/internal/workload"
)

// exampleKinds must each appear in examples/workloads: one example per
// operator, validated against that operator's CRD.
var exampleKinds = []string{
	"Job", "PyTorchJob", "TrainingRuntime", "TrainJob", "JobSet", "RayCluster", "LeaderWorkerSet",
	"Workload", "PodGroup", "Queue", "NetworkTopology",
}

// referenced kinds are created for real after their dry run: the API server
// admits a PodGroup only if its Workload exists.
var referenced = map[string]bool{"Workload": true}

// TestExamplesValidate creates every object of examples/workloads,
// examples/dra and examples/subgroups with server-side dry run and strict
// field validation on an API server with the operators' CRDs (from their Go
// modules), phalanx's CRDs and the Workload API: an unknown or mistyped field fails, and so does a field the server
// drops (a feature gate the example needs). A misspelt field added to each
// object must fail, which shows each schema is strict.
func TestExamplesValidate(t *testing.T) {
	c, err := testcluster.Start(t, testcluster.Options{APIServerFlags: []string{
		"--runtime-config=scheduling.k8s.io/v1beta1=true",
		"--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true",
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	modules := make([]string, 0, len(operatorCRDs))
	for m := range operatorCRDs {
		modules = append(modules, m)
	}
	sort.Strings(modules)
	if err := c.InstallCRDYAML(ctx, readCRDs(t, modules...)...); err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Client.Discovery()))

	files, err := filepath.Glob(filepath.Join(repoRoot(), "examples", "workloads", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	// The DRA examples (docs/dra.md), after the namespaces and queues.
	dra, err := filepath.Glob(filepath.Join(repoRoot(), "examples", "dra", "*.yaml"))
	if err != nil || len(dra) == 0 {
		t.Fatalf("no DRA examples: %v", err)
	}
	files = append(files, dra...)
	// The sub-group examples (examples/subgroups: gangs of tensor-parallel
	// groups on NVLink cliques).
	subgroups, err := filepath.Glob(filepath.Join(repoRoot(), "examples", "subgroups", "*.yaml"))
	if err != nil || len(subgroups) == 0 {
		t.Fatalf("no sub-group examples: %v", err)
	}
	files = append(files, subgroups...)
	seen := map[string]bool{}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(raw, []byte("\n---")) {
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			name := fmt.Sprintf("%s/%s#%d", filepath.Base(filepath.Dir(file)), filepath.Base(file), i)
			obj := &unstructured.Unstructured{}
			if err := yaml.UnmarshalStrict(doc, &obj.Object); err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			seen[obj.GetKind()] = true
			if obj.GetKind() == "Namespace" {
				if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: obj.GetName()}}, metav1.CreateOptions{}); err != nil && !errors.IsAlreadyExists(err) {
					t.Fatal(err)
				}
				continue
			}
			t.Run(name+"/"+obj.GetKind(), func(t *testing.T) {
				checkExampleContract(t, file, obj)
				mapping, err := mapper.RESTMapping(obj.GroupVersionKind().GroupKind(), obj.GroupVersionKind().Version)
				if err != nil {
					t.Fatalf("%s is not served: %v", obj.GroupVersionKind(), err)
				}
				resource := c.Dynamic.Resource(mapping.Resource)
				create := func(o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
					opts := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict}
					if o.GetNamespace() != "" {
						return resource.Namespace(o.GetNamespace()).Create(ctx, o, opts)
					}
					return resource.Create(ctx, o, opts)
				}
				got, err := create(obj.DeepCopy())
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				if path := missing(obj.Object, got.Object, ""); path != "" {
					t.Fatalf("the API server dropped %s (a disabled feature gate or an unknown field the schema prunes)", path)
				}
				typo := obj.DeepCopy()
				if err := unstructured.SetNestedField(typo.Object, "x", "spec", "phalanxTypo"); err != nil {
					t.Fatal(err)
				}
				if _, err := create(typo); err == nil || !strings.Contains(err.Error(), "phalanxTypo") {
					t.Fatalf("a misspelt field was not refused by name (schema not strict?): %v", err)
				}
				if referenced[obj.GetKind()] {
					if _, err := resource.Namespace(obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}); err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	}
	for _, kind := range exampleKinds {
		if !seen[kind] {
			t.Errorf("no example of kind %s in examples/workloads", kind)
		}
	}
}

// missing returns the path of the first field of want that got lacks or
// holds another value in ("" if none).
func missing(want, got any, path string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return path
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			gv, ok := g[k]
			if !ok {
				return path + "." + k
			}
			if p := missing(w[k], gv, path+"."+k); p != "" {
				return p
			}
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return path
		}
		for i := range w {
			if p := missing(w[i], g[i], fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
		return ""
	default:
		if fmt.Sprint(want) != fmt.Sprint(got) && !reflect.DeepEqual(want, got) {
			return path
		}
		return ""
	}
}

// checkExampleContract: every pod template of a workload example asks for
// phalanx-scheduler, names a queue and a topology level, and its gang and
// sub-group annotations (if any) are valid; a Workload API PodGroup carries
// a topology constraint.
func checkExampleContract(t *testing.T, file string, obj *unstructured.Unstructured) {
	t.Helper()
	if prerequisite(file) {
		return
	}
	switch obj.GetKind() {
	case "Workload", "PodGroup", "TrainJob":
		if obj.GetLabels()[phalanxv1alpha1.QueueLabel] == "" && obj.GetKind() != "TrainJob" {
			t.Errorf("%s has no label %s", obj.GetKind(), phalanxv1alpha1.QueueLabel)
		}
		return
	}
	templates := podTemplates(obj.Object)
	if len(templates) == 0 {
		t.Fatalf("no pod template in %s", obj.GetKind())
	}
	for _, tmpl := range templates {
		var pt v1.PodTemplateSpec
		if err := runtimeFromMap(tmpl, &pt); err != nil {
			t.Fatal(err)
		}
		if pt.Spec.SchedulerName != "phalanx-scheduler" {
			t.Errorf("pod template with schedulerName %q, want phalanx-scheduler", pt.Spec.SchedulerName)
		}
		if pt.Labels[phalanxv1alpha1.QueueLabel] == "" {
			t.Errorf("pod template without label %s", phalanxv1alpha1.QueueLabel)
		}
		if pt.Annotations[phalanxv1alpha1.TopologyRequiredAnnotation] == "" && pt.Annotations[phalanxv1alpha1.TopologyPreferredAnnotation] == "" && pt.Spec.SchedulingGroup == nil {
			t.Errorf("pod template without a topology constraint")
		}
		// A level the directory's NetworkTopology lacks would be refused
		// (required) or silently ignored (preferred).
		levels := exampleLevels(t, filepath.Dir(file))
		for _, key := range []string{phalanxv1alpha1.TopologyRequiredAnnotation, phalanxv1alpha1.TopologyPreferredAnnotation,
			phalanxv1alpha1.SubGroupTopologyRequiredAnnotation, phalanxv1alpha1.SubGroupTopologyPreferredAnnotation} {
			if level := pt.Annotations[key]; level != "" && !levels[level] {
				t.Errorf("annotation %s names level %q, which the NetworkTopology of %s/00-*.yaml does not define (levels %v)", key, level, filepath.Base(filepath.Dir(file)), levels)
			}
		}
		if _, ok := pt.Annotations[phalanxv1alpha1.GangSizeAnnotation]; ok {
			pod := &v1.Pod{ObjectMeta: pt.ObjectMeta}
			pod.Namespace, pod.Name = obj.GetNamespace(), "example"
			controller := true
			pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Name: obj.GetName(), UID: "example", Controller: &controller}}
			g, _, err := workload.ImplicitGang(pod)
			if err != nil {
				t.Errorf("gang annotations: %v", err)
			} else if _, err := workload.SubGroupsByRank(nil, pt.Annotations, int(g.MinMember)); err != nil {
				t.Errorf("sub-group annotations: %v", err)
			}
		}
	}
}

// podTemplates finds the pod templates in an object: maps with a "spec"
// holding "containers".
func podTemplates(obj any) []map[string]any {
	var out []map[string]any
	switch o := obj.(type) {
	case map[string]any:
		if spec, ok := o["spec"].(map[string]any); ok {
			if _, ok := spec["containers"]; ok {
				return append(out, o)
			}
		}
		keys := make([]string, 0, len(o))
		for k := range o {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, podTemplates(o[k])...)
		}
	case []any:
		for _, v := range o {
			out = append(out, podTemplates(v)...)
		}
	}
	return out
}

func runtimeFromMap(m map[string]any, into any) error {
	raw, err := yaml.Marshal(m)
	if err != nil {
		return err
	}
	return yaml.Unmarshal(raw, into)
}

// prerequisite reports whether an example file holds what the others need
// (namespaces, queues, the topology, device classes): 00-*.yaml, 01-*.yaml.
func prerequisite(file string) bool {
	base := filepath.Base(file)
	return len(base) > 3 && base[0] >= '0' && base[0] <= '9' && base[1] >= '0' && base[1] <= '9' && base[2] == '-'
}

// exampleLevels reads the levels of the NetworkTopology that an examples
// directory's prerequisite files define.
func exampleLevels(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "0*-*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	levels := map[string]bool{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range bytes.Split(raw, []byte("\n---")) {
			var nt phalanxv1alpha1.NetworkTopology
			if err := yaml.Unmarshal(doc, &nt); err != nil || nt.Kind != "NetworkTopology" {
				continue
			}
			for _, l := range nt.Spec.Levels {
				levels[l.Name] = true
			}
		}
	}
	if len(levels) == 0 {
		t.Fatalf("%s: no NetworkTopology in its 00-*.yaml: an example's levels are defined nowhere", dir)
	}
	return levels
}
