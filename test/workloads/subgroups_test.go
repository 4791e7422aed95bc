package workloads

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/workload"
)

// subGroupExamples are the files of examples/subgroups and the sub-groups
// their README promises: gang size, sub-group size, and which operator pods
// (by name, as the operator names them) share a sub-group.
var subGroupExamples = map[string]struct {
	gang, size int
	together   [][]string // each list: pods that must share one sub-group
	apart      [][2]string
}{
	"jobset.yaml": {gang: 128, size: 16,
		together: [][]string{{"llm-tp-tp-0-0", "llm-tp-tp-0-15"}, {"llm-tp-tp-7-0", "llm-tp-tp-7-15"}},
		apart:    [][2]string{{"llm-tp-tp-0-15", "llm-tp-tp-1-0"}}},
	"pytorchjob.yaml": {gang: 128, size: 16,
		together: [][]string{{"llm-tp-master-0", "llm-tp-worker-0", "llm-tp-worker-14"}, {"llm-tp-worker-15", "llm-tp-worker-30"}, {"llm-tp-worker-111", "llm-tp-worker-126"}},
		apart:    [][2]string{{"llm-tp-worker-14", "llm-tp-worker-15"}, {"llm-tp-worker-110", "llm-tp-worker-111"}}},
}

// TestSubGroupExampleRanks builds, for each workload of examples/subgroups,
// the pods its operator creates, with the labels the operator puts on them
// (JobSet v0.12: its labels and the Job's completion index; training-operator
// v1: replica type and index, from their Go modules), and checks what the
// README says: the pods are the gang (gang-size), they fall into exactly
// gang-size / subgroup-size sub-groups of subgroup-size each, the pods named
// together share one and those named apart do not; and the levels the
// annotations name exist in the directory's NetworkTopology, the sub-groups'
// inside the gang's.
func TestSubGroupExampleRanks(t *testing.T) {
	dir := filepath.Join(repoRoot(), "examples", "subgroups")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples in %s: %v", dir, err)
	}
	var levels []string
	var workloads []map[string]any
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range bytes.Split(raw, []byte("\n---")) {
			var obj map[string]any
			if err := yaml.Unmarshal(doc, &obj); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			switch obj["kind"] {
			case "NetworkTopology":
				var nt phalanxv1alpha1.NetworkTopology
				if err := runtimeFromMap(obj, &nt); err != nil {
					t.Fatal(err)
				}
				for _, l := range nt.Spec.Levels {
					levels = append(levels, l.Name)
				}
			case "JobSet", "PyTorchJob":
				obj["file"] = filepath.Base(file)
				workloads = append(workloads, obj)
			}
		}
	}
	if len(levels) == 0 {
		t.Fatal("no NetworkTopology in examples/subgroups")
	}
	seen := map[string]bool{}
	for _, obj := range workloads {
		file := obj["file"].(string)
		delete(obj, "file")
		seen[file] = true
		want, ok := subGroupExamples[file]
		if !ok {
			t.Errorf("%s: no expectations in subGroupExamples", file)
			continue
		}
		t.Run(file, func(t *testing.T) {
			var pods []*v1.Pod
			switch obj["kind"] {
			case "JobSet":
				pods = jobSetPods(t, obj)
			case "PyTorchJob":
				pods = pyTorchJobPods(t, obj)
			}
			if len(pods) != want.gang {
				t.Fatalf("%d pods, want %d", len(pods), want.gang)
			}
			byName := map[string]string{}
			members := map[string]int{}
			for _, p := range pods {
				g, ok, err := workload.ImplicitGang(p)
				if err != nil || !ok || int(g.MinMember) != want.gang {
					t.Fatalf("pod %s: implicit gang %+v (%v, %v), want minMember %d", p.Name, g, ok, err, want.gang)
				}
				sg, err := workload.SubGroupsByRank(nil, p.Annotations, int(g.MinMember))
				if err != nil || sg == nil {
					t.Fatalf("pod %s: sub-groups %+v: %v", p.Name, sg, err)
				}
				if sg.Size != want.size {
					t.Fatalf("pod %s: subgroup-size %d, want %d", p.Name, sg.Size, want.size)
				}
				gangLevel := p.Annotations[phalanxv1alpha1.TopologyRequiredAnnotation]
				gi, si := slices.Index(levels, gangLevel), slices.Index(levels, sg.Required)
				if gi < 0 || si < 0 || si <= gi {
					t.Fatalf("pod %s: gang level %q, sub-group level %q; want both in the NetworkTopology (%v), the sub-groups' narrower", p.Name, gangLevel, sg.Required, levels)
				}
				id := sg.Of(p)
				if id == "" {
					t.Fatalf("pod %s (labels %v) has no rank", p.Name, p.Labels)
				}
				byName[p.Name] = id
				members[id]++
			}
			if len(members) != want.gang/want.size {
				t.Errorf("%d sub-groups %v, want %d", len(members), members, want.gang/want.size)
			}
			ids := make([]string, 0, len(members))
			for id, n := range members {
				ids = append(ids, id)
				if n != want.size {
					t.Errorf("sub-group %s has %d members, want %d", id, n, want.size)
				}
			}
			sort.Strings(ids)
			t.Logf("sub-groups: %v", ids)
			for _, names := range want.together {
				for _, n := range names {
					if _, ok := byName[n]; !ok {
						t.Fatalf("no pod %s (the README names it)", n)
					}
					if byName[n] != byName[names[0]] {
						t.Errorf("%s in sub-group %s, %s in %s; want one", names[0], byName[names[0]], n, byName[n])
					}
				}
			}
			for _, pair := range want.apart {
				if byName[pair[0]] == "" || byName[pair[0]] == byName[pair[1]] {
					t.Errorf("%s and %s in sub-group %q; want two", pair[0], pair[1], byName[pair[0]])
				}
			}
		})
	}
	for file := range subGroupExamples {
		if !seen[file] {
			t.Errorf("examples/subgroups/%s is missing", file)
		}
	}
}

// jobSetPods are the pods the JobSet and Job controllers create for a JobSet:
// per replicated job and replica a child Job <jobset>-<rjob>-<i>, each pod
// with the JobSet's labels (global index across the JobSet) and its
// completion index.
func jobSetPods(t *testing.T, obj map[string]any) []*v1.Pod {
	t.Helper()
	var js jobsetv1alpha2.JobSet
	if err := runtimeFromMap(obj, &js); err != nil {
		t.Fatal(err)
	}
	var out []*v1.Pod
	global := 0
	for _, rj := range js.Spec.ReplicatedJobs {
		spec := rj.Template.Spec
		if spec.CompletionMode == nil || *spec.CompletionMode != batchv1.IndexedCompletion {
			t.Fatalf("replicated job %s: completionMode %v; the ranks come from Indexed completion", rj.Name, spec.CompletionMode)
		}
		for j := 0; j < int(rj.Replicas); j++ {
			job := fmt.Sprintf("%s-%s-%d", js.Name, rj.Name, j)
			for i := 0; i < int(*spec.Parallelism); i++ {
				p := podOf(spec.Template, fmt.Sprintf("%s-%d", job, i), js.Namespace)
				for k, v := range map[string]string{
					jobsetv1alpha2.JobSetNameKey:         js.Name,
					jobsetv1alpha2.JobSetUIDKey:          "uid-" + js.Name,
					jobsetv1alpha2.ReplicatedJobNameKey:  rj.Name,
					jobsetv1alpha2.JobIndexKey:           strconv.Itoa(j),
					jobsetv1alpha2.JobGlobalIndexKey:     strconv.Itoa(global),
					batchv1.JobNameLabel:                 job,
					batchv1.JobCompletionIndexAnnotation: strconv.Itoa(i),
				} {
					p.Labels[k] = v
				}
				p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job, UID: types.UID("uid-" + job), Controller: ptr.To(true)}}
				out = append(out, p)
			}
			global++
		}
	}
	return out
}

// pyTorchJobPods are the pods training-operator creates for a PyTorchJob:
// <job>-<type>-<index>, labelled with the replica type (lower case) and
// index, owned by the PyTorchJob.
func pyTorchJobPods(t *testing.T, obj map[string]any) []*v1.Pod {
	t.Helper()
	var job kubeflowv1.PyTorchJob
	if err := runtimeFromMap(obj, &job); err != nil {
		t.Fatal(err)
	}
	var out []*v1.Pod
	for _, rtype := range []kubeflowv1.ReplicaType{kubeflowv1.PyTorchJobReplicaTypeMaster, kubeflowv1.PyTorchJobReplicaTypeWorker} {
		spec := job.Spec.PyTorchReplicaSpecs[rtype]
		if spec == nil {
			continue
		}
		rt := strings.ToLower(string(rtype))
		for i := 0; i < int(*spec.Replicas); i++ {
			p := podOf(spec.Template, fmt.Sprintf("%s-%s-%d", job.Name, rt, i), job.Namespace)
			p.Labels[kubeflowv1.OperatorNameLabel] = "pytorchjob-controller"
			p.Labels[kubeflowv1.JobNameLabel] = job.Name
			p.Labels[kubeflowv1.ReplicaTypeLabel] = rt
			p.Labels[kubeflowv1.ReplicaIndexLabel] = strconv.Itoa(i)
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: kubeflowv1.SchemeGroupVersion.String(), Kind: kubeflowv1.PyTorchJobKind,
				Name: job.Name, UID: types.UID("uid-" + job.Name), Controller: ptr.To(true)}}
			out = append(out, p)
		}
	}
	return out
}

func podOf(tmpl v1.PodTemplateSpec, name, ns string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: *tmpl.ObjectMeta.DeepCopy(), Spec: *tmpl.Spec.DeepCopy()}
	p.Name, p.Namespace = name, ns
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	return p
}
