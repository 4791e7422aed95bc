package perf

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/phalanx-sched/phalanx/internal/bench"
)

func workload(t *testing.T, name string) bench.Workload {
	t.Helper()
	for _, w := range bench.Workloads(bench.DefaultSizes) {
		if w.Name == name {
			return w
		}
	}
	t.Fatalf("no %s workload", name)
	return bench.Workload{}
}

// render renders workloads and reads the config back.
func render(t *testing.T, workloads ...bench.Workload) []perfTestCase {
	t.Helper()
	path, err := Render(t.TempDir(), workloads)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cases []perfTestCase
	if err := yaml.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

// object reads a template file as a map.
func object(t *testing.T, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

// TestRenderLeavesOutSideBySideOnly: the DRA, sub-group and mixed
// workloads run side by side only.
func TestRenderLeavesOutSideBySideOnly(t *testing.T) {
	var names []string
	for _, tc := range render(t, bench.Workloads(bench.DefaultSizes)...) {
		names = append(names, tc.Name)
	}
	want := []string{"plain-pods_stock", "plain-pods_phalanx", "gangs_stock", "gangs_upstream-gang", "gangs_phalanx",
		"topology_stock", "topology_upstream-gang", "topology_phalanx", "queues_stock", "queues_phalanx"}
	if !slices.Equal(names, want) {
		t.Errorf("test cases %v, want %v", names, want)
	}
	for _, name := range names {
		for _, left := range []string{"dra-gangs", "subgroups", "scale"} {
			if strings.HasPrefix(name, left) {
				t.Errorf("scheduler_perf config renders %s", name)
			}
		}
	}
}

// TestRenderGangs: each case creates the nodes, its scheduler's gang
// objects (one per gang), then the measured pods; upstream's case turns on
// the Workload API gates.
func TestRenderGangs(t *testing.T) {
	w := workload(t, "gangs")
	cases := render(t, w)
	if len(cases) != 3 {
		t.Fatalf("%d cases, want stock, upstream-gang and phalanx", len(cases))
	}
	ops := map[string][]string{}
	for _, tc := range cases {
		var kinds []string
		for _, op := range tc.WorkloadTemplate {
			kind := op["opcode"].(string)
			if kind == "createAny" {
				obj := object(t, op["templatePath"].(string))
				kind = obj["kind"].(string)
				if op["count"] != float64(w.Gangs) || op["namespace"] != Namespace {
					t.Errorf("%s creates %v %s in %v, want %d in %s", tc.Name, op["count"], kind, op["namespace"], w.Gangs, Namespace)
				}
				if name := obj["metadata"].(map[string]any)["name"]; name != "gang-{{.Index}}" {
					t.Errorf("%s %s named %v", tc.Name, kind, name)
				}
			}
			kinds = append(kinds, kind)
		}
		ops[tc.Name] = kinds
		if want := (perfWorkload{Name: "1000Nodes_100x64", Labels: []string{"performance", "gangs"}}); len(tc.Workloads) != 1 || tc.Workloads[0].Name != want.Name || !slices.Equal(tc.Workloads[0].Labels, want.Labels) ||
			tc.Workloads[0].Params["pods"] != float64(6400) || tc.Workloads[0].Params["nodes"] != float64(1000) {
			t.Errorf("%s workloads %+v", tc.Name, tc.Workloads)
		}
		if gates := tc.FeatureGates; (tc.Name == "gangs_upstream-gang") != (len(gates) == len(bench.UpstreamGates)) {
			t.Errorf("%s feature gates %v", tc.Name, gates)
		}
	}
	want := map[string][]string{
		"gangs_stock":         {"createNodes", "createPods"},
		"gangs_upstream-gang": {"createNodes", "Workload", "PodGroup", "createPods"},
		"gangs_phalanx":       {"createNodes", "PodGroup", "createPods"},
	}
	for name, w := range want {
		if !slices.Equal(ops[name], w) {
			t.Errorf("%s ops %v, want %v", name, ops[name], w)
		}
	}
	pod := object(t, cases[2].WorkloadTemplate[2]["podTemplatePath"].(string))
	if labels := pod["metadata"].(map[string]any)["labels"].(map[string]any); labels["scheduling.x-k8s.io/pod-group"] != "gang-{{DivideInt .Index 64}}" {
		t.Errorf("phalanx pod labels %v", labels)
	}
	upstream := object(t, cases[1].WorkloadTemplate[3]["podTemplatePath"].(string))
	if group := upstream["spec"].(map[string]any)["schedulingGroup"]; group.(map[string]any)["podGroupName"] != "gang-{{DivideInt .Index 64}}" {
		t.Errorf("upstream pod schedulingGroup %v", group)
	}
}

// TestRenderTopologyAndQueues: phalanx's cases create the NetworkTopology
// and the queues (with their weights); PodGroups name their queue.
func TestRenderTopologyAndQueues(t *testing.T) {
	for _, tc := range render(t, workload(t, "topology"), workload(t, "queues")) {
		var kinds []string
		for _, op := range tc.WorkloadTemplate {
			if op["opcode"] != "createAny" {
				continue
			}
			obj := object(t, op["templatePath"].(string))
			kinds = append(kinds, obj["kind"].(string))
			switch obj["kind"] {
			case "NetworkTopology", "Queue":
				if op["namespace"] != nil || obj["apiVersion"] != "scheduling.phalanx.dev/v1alpha1" {
					t.Errorf("%s: %v %v in namespace %v", tc.Name, obj["apiVersion"], obj["kind"], op["namespace"])
				}
			case "PodGroup":
				if tc.Name == "queues_phalanx" {
					if q := obj["metadata"].(map[string]any)["labels"].(map[string]any); len(q) != 1 {
						t.Errorf("queue PodGroup labels %v", q)
					}
				}
				if _, ok := obj["metadata"].(map[string]any)["creationTimestamp"]; ok {
					t.Errorf("%s PodGroup keeps creationTimestamp", tc.Name)
				}
			}
		}
		want := map[string][]string{
			"topology_phalanx":       {"NetworkTopology", "PodGroup"},
			"topology_upstream-gang": {"Workload", "PodGroup"},
			"queues_phalanx":         {"Queue", "Queue", "Queue", "Queue", "PodGroup"},
		}[tc.Name]
		if !slices.Equal(kinds, want) {
			t.Errorf("%s objects %v, want %v", tc.Name, kinds, want)
		}
	}
}

func TestNodeTemplate(t *testing.T) {
	raw, err := nodeTemplate(workload(t, "topology"))
	if err != nil {
		t.Fatal(err)
	}
	var node map[string]any
	if err := yaml.Unmarshal(raw, &node); err != nil {
		t.Fatal(err)
	}
	meta := node["metadata"].(map[string]any)
	labels := meta["labels"].(map[string]any)
	if meta["name"] != "node-{{.Index}}" || labels[bench.IBLabel] != "ib-{{DivideInt .Index 512}}" ||
		labels[bench.LeafLabel] != "leaf-{{DivideInt .Index 16}}" || labels["kubernetes.io/hostname"] != "node-{{.Index}}" {
		t.Errorf("node template metadata %v", meta)
	}
	plain, err := nodeTemplate(workload(t, "plain-pods"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(plain), bench.IBLabel) {
		t.Errorf("plain node template has topology labels:\n%s", plain)
	}
}

func TestNames(t *testing.T) {
	tests := []struct {
		w              bench.Workload
		s              bench.Scheduler
		testCase, name string
	}{
		{workload(t, "plain-pods"), bench.Stock, "plain-pods_stock", "5000Nodes_10000Pods"},
		{workload(t, "gangs"), bench.UpstreamGang, "gangs_upstream-gang", "1000Nodes_100x64"},
		{workload(t, "topology"), bench.Phalanx, "topology_phalanx", "4096Nodes_1x1024"},
	}
	for _, tc := range tests {
		if got := TestCase(tc.w, tc.s); got != tc.testCase {
			t.Errorf("TestCase(%s, %s) = %q, want %q", tc.w.Name, tc.s, got, tc.testCase)
		}
		if got := WorkloadName(tc.w); got != tc.name {
			t.Errorf("WorkloadName(%s) = %q, want %q", tc.w.Name, got, tc.name)
		}
	}
}

// TestSchedulerConfigs: each case's config names its scheduler's profile;
// phalanx's is the canonical config.
func TestSchedulerConfigs(t *testing.T) {
	for _, s := range []bench.Scheduler{bench.Stock, bench.UpstreamGang, bench.Phalanx} {
		raw, err := perfSchedulerConfig(s)
		if err != nil {
			t.Fatal(err)
		}
		var cfg struct {
			Profiles []struct {
				SchedulerName string         `json:"schedulerName"`
				Plugins       map[string]any `json:"plugins"`
			} `json:"profiles"`
			EnableContentionProfiling bool `json:"enableContentionProfiling"`
		}
		if err := yaml.Unmarshal(raw, &cfg); err != nil {
			t.Fatal(err)
		}
		if len(cfg.Profiles) != 1 || cfg.Profiles[0].SchedulerName != s.SchedulerName() || cfg.EnableContentionProfiling {
			t.Errorf("%s config %+v", s, cfg)
		}
		if (s == bench.Phalanx) != (cfg.Profiles[0].Plugins != nil) {
			t.Errorf("%s config plugins %v", s, cfg.Profiles[0].Plugins)
		}
	}
}

func TestTyped(t *testing.T) {
	m := typed(bench.Queue(2), "scheduling.phalanx.dev/v1alpha1", "Queue")
	if m["apiVersion"] != "scheduling.phalanx.dev/v1alpha1" || m["kind"] != "Queue" || m["spec"].(map[string]any)["weight"] != float64(3) {
		t.Errorf("typed = %v", m)
	}
	if _, ok := m["status"]; ok {
		t.Errorf("typed keeps status: %v", m)
	}
}

func TestRenderUnwritable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Render(filepath.Join(file, "config"), bench.Workloads(bench.DefaultSizes)); err == nil {
		t.Error("Render under a file: no error")
	}
}
