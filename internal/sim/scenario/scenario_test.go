package scenario

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/phalanx-sched/phalanx/examples"
)

func TestParseDemo(t *testing.T) {
	suite, err := Parse(examples.Demo)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range suite.Scenarios {
		names = append(names, s.Name)
	}
	// make demo's reference scenarios, as issue #7 lists them.
	if got, want := strings.Join(names, ","), "gangs,queues,ib-clusters,numa"; got != want {
		t.Fatalf("scenarios %s, want %s", got, want)
	}
}

// Every scenario file in examples/ stays valid.
func TestParseExamples(t *testing.T) {
	files, err := filepath.Glob("../../../examples/*.yaml")
	if err != nil || len(files) < 2 {
		t.Fatalf("examples: %v %v", files, err)
	}
	for _, f := range files {
		if _, err := Load(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestParse(t *testing.T) {
	const node = "nodes: [{prefix: n, count: 1, cpu: \"4\", memory: 8Gi}]\n"
	tests := []struct {
		name, in  string
		scenarios int
		wantErr   string
	}{
		{name: "one scenario", in: "name: a\n" + node + "jobs: [{name: j, replicas: 1}]", scenarios: 1},
		{name: "suite", in: "scenarios:\n- name: a\n  " + strings.TrimSpace(node) + "\n  jobs: []\n- name: b\n  " + strings.TrimSpace(node) + "\n  jobs: []", scenarios: 2},
		{name: "unknown field", in: "name: a\n" + node + "jobs: [{name: j, replicas: 1, gpu: 1}]", wantErr: "unknown field"},
		{name: "unknown field in a suite", in: "scenarios:\n- name: a\n  " + strings.TrimSpace(node) + "\n  jobs: [{name: j, replicas: 1, gpu: 1}]", wantErr: `unknown field "gpu"`},
		{name: "no name", in: node + "jobs: []", wantErr: "name is required"},
		{name: "duplicate scenario", in: "scenarios:\n- name: a\n  " + strings.TrimSpace(node) + "\n- name: a\n  " + strings.TrimSpace(node), wantErr: "defined twice"},
		{name: "minMember above replicas", in: "name: a\n" + node + "jobs: [{name: j, replicas: 1, minMember: 2}]", wantErr: "minMember 2 > replicas 1"},
		{name: "unknown queue", in: "name: a\n" + node + "jobs: [{name: j, replicas: 1, queue: q}]", wantErr: `queue "q" is not among`},
		{name: "unknown level", in: "name: a\n" + node + "jobs: [{name: j, replicas: 1, annotations: {scheduling.phalanx.dev/topology-required: rack}}]", wantErr: `level "rack" is not in the scenario's network (host)`},
		{name: "host level is always there", in: "name: a\n" + node + "jobs: [{name: j, replicas: 1, annotations: {scheduling.phalanx.dev/topology-required: host}}]", scenarios: 1},
		{name: "bad policy", in: "name: a\nnodes: [{prefix: n, count: 1, cpu: \"4\", topologyPolicy: strict}]\njobs: []", wantErr: `topologyPolicy: unknown topology manager policy "strict"`},
		{name: "share out of range", in: "name: a\n" + node + "queues: [{name: q, expectShare: 1.5}]\njobs: []", wantErr: "expectShare must be in (0, 1]"},
		{name: "bad duration", in: "name: a\n" + node + "jobs: [{name: j, replicas: 1, duration: soon}]", wantErr: "invalid duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			suite, err := Parse([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(suite.Scenarios) != tt.scenarios {
				t.Fatalf("%d scenarios, want %d", len(suite.Scenarios), tt.scenarios)
			}
			for _, s := range suite.Scenarios {
				if s.Timeout.Duration == 0 || s.ShareTolerance == 0 {
					t.Errorf("%s: defaults not set: timeout %v, tolerance %v", s.Name, s.Timeout, s.ShareTolerance)
				}
			}
		})
	}
}
