package scenario

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// valid is a scenario that passes Validate; each case breaks one field.
func valid() *Scenario {
	return &Scenario{
		Name:    "s",
		Nodes:   []NodeGroup{{Prefix: "n", Count: 2, CPU: "4", Memory: "8Gi"}},
		Network: []phalanxv1alpha1.TopologyLevel{{Name: "rack", NodeLabel: "example.com/rack"}},
		Queues:  []Queue{{Name: "q"}},
		Jobs:    []Job{{Name: "j", Replicas: 2}},
	}
}

// TestValidateNamesTheField: every error names the scenario and the field
// (or object) that is wrong.
func TestValidateNamesTheField(t *testing.T) {
	share := func(v float64) *float64 { return &v }
	subGroups := func(size, level string) map[string]string {
		return map[string]string{phalanxv1alpha1.SubGroupSizeAnnotation: size, phalanxv1alpha1.SubGroupTopologyRequiredAnnotation: level}
	}
	for _, tc := range []struct {
		name  string
		spoil func(s *Scenario)
		want  string
	}{
		{"no name", func(s *Scenario) { s.Name = "" }, "scenario: name is required"},
		{"no nodes", func(s *Scenario) { s.Nodes = nil }, `scenario "s": no nodes`},
		{"node without prefix", func(s *Scenario) { s.Nodes = append(s.Nodes, NodeGroup{Count: 1}) }, "nodes[1]: prefix and count > 0 are required"},
		{"node count 0", func(s *Scenario) { s.Nodes[0].Count = 0 }, "nodes[0]: prefix and count"},
		{"too many NUMA zones", func(s *Scenario) { s.Nodes[0].NUMAZones = 9 }, "nodes[0].numaZones: must be between 0 and 8"},
		{"negative NUMA zones", func(s *Scenario) { s.Nodes[0].NUMAZones = -1 }, "nodes[0].numaZones"},
		{"level without label", func(s *Scenario) { s.Network[0].NodeLabel = "" }, "network[0]: name and nodeLabel are required"},
		{"queue without name", func(s *Scenario) { s.Queues = append(s.Queues, Queue{}) }, "queues[1]: name is required"},
		{"zero share", func(s *Scenario) { s.Queues[0].ExpectShare = share(0) }, "queue q: expectShare must be in (0, 1]"},
		{"tolerance 1", func(s *Scenario) { s.ShareTolerance = 1 }, "shareTolerance must be in [0, 1)"},
		{"negative tolerance", func(s *Scenario) { s.ShareTolerance = -0.1 }, "shareTolerance"},
		{"job without replicas", func(s *Scenario) { s.Jobs[0].Replicas = 0 }, "jobs[0]: name and replicas > 0 are required"},
		{"job without name", func(s *Scenario) { s.Jobs = append(s.Jobs, Job{Replicas: 1}) }, "jobs[1]: name and replicas"},
		{"bad expectation", func(s *Scenario) { s.Jobs[0].Expect = "Done" }, "job j: expect must be Run or Pending"},
		{"sub-groups without a level", func(s *Scenario) { s.Jobs[0].Annotations = subGroups("2", "") }, `job j: sub-group level "" is not in the scenario's network (rack, host)`},
		{"sub-groups at an unknown level", func(s *Scenario) { s.Jobs[0].Annotations = subGroups("2", "clique") }, `sub-group level "clique"`},
		{"duplicate job", func(s *Scenario) { s.Jobs = append(s.Jobs, Job{Name: "j", Namespace: "default", Replicas: 1}) }, "duplicate job default/j"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := valid()
			tc.spoil(s)
			err := s.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
			if s.Name != "" && !strings.Contains(err.Error(), `scenario "s"`) {
				t.Errorf("error %q does not name the scenario", err)
			}
		})
	}
}

// TestValidateAccepts: what looks alike but is allowed.
func TestValidateAccepts(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(s *Scenario)
	}{
		{"same name in two namespaces", func(s *Scenario) { s.Jobs = append(s.Jobs, Job{Name: "j", Namespace: "other", Replicas: 1}) }},
		{"sub-groups at a network level", func(s *Scenario) {
			s.Jobs[0].Annotations = map[string]string{phalanxv1alpha1.SubGroupSizeAnnotation: "2", phalanxv1alpha1.SubGroupTopologyRequiredAnnotation: "rack"}
		}},
		{"an invalid sub-group size means none", func(s *Scenario) {
			s.Jobs[0].Annotations = map[string]string{phalanxv1alpha1.SubGroupSizeAnnotation: "two"}
		}},
		{"a full share", func(s *Scenario) { v := 1.0; s.Queues[0].ExpectShare = &v }},
		{"eight NUMA zones and a policy", func(s *Scenario) { s.Nodes[0].NUMAZones, s.Nodes[0].TopologyPolicy = 8, "restricted" }},
		{"expected outcomes", func(s *Scenario) { s.Jobs[0].Expect = ExpectPending; s.Jobs[0].Queue = "q" }},
	} {
		s := valid()
		tc.edit(s)
		if err := s.Validate(); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// TestValidateDefaults: unset timeout and tolerance get defaults, set ones
// are kept.
func TestValidateDefaults(t *testing.T) {
	s := valid()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if s.Timeout.Duration != 2*time.Minute || s.ShareTolerance != 0.1 {
		t.Errorf("defaults: timeout %v, tolerance %v", s.Timeout, s.ShareTolerance)
	}
	s = valid()
	s.Timeout.Duration, s.ShareTolerance = 30*time.Second, 0.05
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if s.Timeout.Duration != 30*time.Second || s.ShareTolerance != 0.05 {
		t.Errorf("set values changed: timeout %v, tolerance %v", s.Timeout, s.ShareTolerance)
	}
}

func TestNodeName(t *testing.T) {
	for _, tc := range []struct {
		g    NodeGroup
		i    int
		want string
	}{
		{NodeGroup{Prefix: "gpu", Count: 4}, 3, "gpu-3"},
		{NodeGroup{Prefix: "trace-node", Count: 1, ExactName: true}, 0, "trace-node"},
		{NodeGroup{Prefix: "x", Count: 2, ExactName: true}, 1, "x-1"}, // exact names are for one node
	} {
		if got := tc.g.NodeName(tc.i); got != tc.want {
			t.Errorf("%+v.NodeName(%d) = %q, want %q", tc.g, tc.i, got, tc.want)
		}
	}
}

func TestJobHelpers(t *testing.T) {
	for _, tc := range []struct {
		job      Job
		key      string
		level    string
		size     int
		subLevel string
	}{
		{Job{Name: "a"}, "default/a", "", 0, ""},
		{Job{Name: "b", Namespace: "ml", Annotations: map[string]string{phalanxv1alpha1.TopologyRequiredAnnotation: "rack"}}, "ml/b", "rack", 0, ""},
		{Job{Name: "c", Annotations: map[string]string{phalanxv1alpha1.SubGroupSizeAnnotation: "4", phalanxv1alpha1.SubGroupTopologyRequiredAnnotation: "clique"}}, "default/c", "", 4, "clique"},
		{Job{Name: "d", Annotations: map[string]string{phalanxv1alpha1.SubGroupSizeAnnotation: "0", phalanxv1alpha1.SubGroupTopologyRequiredAnnotation: "clique"}}, "default/d", "", 0, ""},
		{Job{Name: "e", Annotations: map[string]string{phalanxv1alpha1.SubGroupSizeAnnotation: "-2"}}, "default/e", "", 0, ""},
	} {
		size, subLevel := tc.job.SubGroups()
		if tc.job.Key() != tc.key || tc.job.RequiredLevel() != tc.level || size != tc.size || subLevel != tc.subLevel {
			t.Errorf("%s: key %q level %q sub-groups %d %q; want %q %q %d %q", tc.job.Name, tc.job.Key(), tc.job.RequiredLevel(), size, subLevel, tc.key, tc.level, tc.size, tc.subLevel)
		}
	}
}

// TestLevels: the host level is always there, at the bottom, unless the
// network names one itself.
func TestLevels(t *testing.T) {
	s := valid()
	if l := s.Level(HostLevel); l == nil || l.NodeLabel != v1.LabelHostname {
		t.Errorf("host level %+v, want one by %s", l, v1.LabelHostname)
	}
	if l := s.Level("rack"); l != &s.Network[0] {
		t.Errorf("rack level %+v is not the network's", l)
	}
	if l := s.Level("spine"); l != nil {
		t.Errorf("unknown level found: %+v", l)
	}
	var names []string
	for _, l := range s.Levels() {
		names = append(names, l.Name)
	}
	if strings.Join(names, ",") != "rack,host" {
		t.Errorf("levels %v, want rack,host", names)
	}
	s.Network = append(s.Network, phalanxv1alpha1.TopologyLevel{Name: HostLevel, NodeLabel: "example.com/host"})
	if got := s.Levels(); len(got) != 2 || got[1].NodeLabel != "example.com/host" {
		t.Errorf("levels %+v: the network's own host level should stand alone", got)
	}
	if len(s.Network) != 2 {
		t.Errorf("Levels changed the network: %+v", s.Network)
	}
}

func TestDurationJSON(t *testing.T) {
	var d Duration
	if err := json.Unmarshal([]byte(`"1m30s"`), &d); err != nil || d.Duration != 90*time.Second {
		t.Fatalf("unmarshal: %v %v", d, err)
	}
	out, err := json.Marshal(d)
	if err != nil || string(out) != `"1m30s"` {
		t.Errorf("marshal: %s %v", out, err)
	}
	for _, bad := range []string{`"soon"`, `"10"`, `{}`} {
		if err := json.Unmarshal([]byte(bad), &d); err == nil {
			t.Errorf("%s parsed as %v", bad, d)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("a missing file loaded")
	}
	if _, err := Parse([]byte("name: [unclosed")); err == nil || !strings.HasPrefix(err.Error(), "scenario:") {
		t.Errorf("bad YAML: %v", err)
	}
}
