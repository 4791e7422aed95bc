// Package sim runs scenarios on an in-process cluster with the phalanx
// scheduler: it creates nodes, submits jobs (PodGroups and pods) at their
// arrival times, drives the pods' lifecycle, and reports what happened.
package sim

import (
	"fmt"
	"os"
	"time"

	"sigs.k8s.io/yaml"
)

// Scenario is a simulated cluster and the jobs submitted to it.
type Scenario struct {
	Name        string      `json:"name"`
	Description string      `json:"description,omitempty"`
	Nodes       []NodeGroup `json:"nodes"`
	Jobs        []Job       `json:"jobs"`
	// Timeout bounds the run (default 2m).
	Timeout Duration `json:"timeout,omitempty"`
}

// NodeGroup is Count identical nodes named Prefix-0..Count-1.
type NodeGroup struct {
	Prefix string            `json:"prefix"`
	Count  int               `json:"count"`
	CPU    string            `json:"cpu"`
	Memory string            `json:"memory"`
	GPUs   int64             `json:"gpus,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	// Tainted nodes carry a NoSchedule taint no job tolerates.
	Tainted bool `json:"tainted,omitempty"`
}

// Job is a gang (MinMember > 0) or a set of plain pods.
type Job struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	// Replicas pods, each asking for CPU, Memory and GPUs.
	Replicas  int    `json:"replicas"`
	MinMember int32  `json:"minMember,omitempty"`
	CPU       string `json:"cpu,omitempty"`
	Memory    string `json:"memory,omitempty"`
	GPUs      int64  `json:"gpus,omitempty"`
	// Arrival is when the job is submitted, from the start of the run.
	Arrival Duration `json:"arrival,omitempty"`
	// Duration is how long each pod runs once Running (0: until the end).
	Duration  Duration `json:"duration,omitempty"`
	DependsOn []string `json:"dependsOn,omitempty"`
	// Annotations go on the PodGroup (topology constraints, for example).
	Annotations map[string]string `json:"annotations,omitempty"`
	Priority    *int32            `json:"priority,omitempty"`
	// Expect states the outcome the scenario is about: Run (whole gang runs)
	// or Pending (it must never start). Checked by Result.Check.
	Expect string `json:"expect,omitempty"`
}

// Duration is a time.Duration written as "30s" in YAML.
type Duration struct{ time.Duration }

// UnmarshalJSON parses "1m30s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := yaml.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// MarshalJSON writes "1m30s".
func (d Duration) MarshalJSON() ([]byte, error) { return []byte(`"` + d.String() + `"`), nil }

// Load reads a scenario file.
func Load(path string) (*Scenario, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(raw)
}

// Parse decodes a scenario strictly and checks it.
func Parse(raw []byte) (*Scenario, error) {
	s := &Scenario{}
	if err := yaml.UnmarshalStrict(raw, s); err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Scenario) validate() error {
	if len(s.Nodes) == 0 {
		return fmt.Errorf("scenario %q: no nodes", s.Name)
	}
	seen := map[string]bool{}
	for i, j := range s.Jobs {
		if j.Name == "" || j.Replicas <= 0 {
			return fmt.Errorf("scenario %q: jobs[%d]: name and replicas > 0 are required", s.Name, i)
		}
		if int(j.MinMember) > j.Replicas {
			return fmt.Errorf("scenario %q: job %s: minMember %d > replicas %d", s.Name, j.Name, j.MinMember, j.Replicas)
		}
		if j.Expect != "" && j.Expect != ExpectRun && j.Expect != ExpectPending {
			return fmt.Errorf("scenario %q: job %s: expect must be %s or %s", s.Name, j.Name, ExpectRun, ExpectPending)
		}
		key := j.namespace() + "/" + j.Name
		if seen[key] {
			return fmt.Errorf("scenario %q: duplicate job %s", s.Name, key)
		}
		seen[key] = true
	}
	if s.Timeout.Duration == 0 {
		s.Timeout.Duration = 2 * time.Minute
	}
	return nil
}

// Outcomes a job can be expected to have.
const (
	ExpectRun     = "Run"
	ExpectPending = "Pending"
)

func (j Job) namespace() string {
	if j.Namespace == "" {
		return "default"
	}
	return j.Namespace
}

// Key is namespace/name.
func (j Job) Key() string { return j.namespace() + "/" + j.Name }
