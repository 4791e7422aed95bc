// Package scenario is what the simulator runs: a cluster's nodes, network
// levels and queues, and the jobs submitted to it, as a scenario file
// states them, checked and with their defaults filled in.
package scenario

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/numa"
)

// Suite is a scenario file: one scenario, or several under `scenarios`, each
// run on its own fresh cluster.
type Suite struct {
	Scenarios []*Scenario `json:"scenarios"`
}

// Scenario is a simulated cluster and the jobs submitted to it.
type Scenario struct {
	Name        string      `json:"name"`
	Description string      `json:"description,omitempty"`
	Nodes       []NodeGroup `json:"nodes"`
	// Network is the cluster's network levels, widest first (for example
	// ib-cluster, then rack); it becomes the NetworkTopology "default".
	// The host level is added.
	Network []phalanxv1alpha1.TopologyLevel `json:"network,omitempty"`
	Queues  []Queue                         `json:"queues,omitempty"`
	Jobs    []Job                           `json:"jobs"`
	// Timeout bounds the run (default 2m).
	Timeout Duration `json:"timeout,omitempty"`
	// ShareTolerance is how far a queue's measured share may be from its
	// expectShare (default 0.1).
	ShareTolerance float64 `json:"shareTolerance,omitempty"`
}

// Queue is a phalanx Queue; jobs name it in `queue`.
type Queue struct {
	Name                      string `json:"name"`
	phalanxv1alpha1.QueueSpec `json:",inline"`
	// ExpectShare is the share of the used GPUs (CPU on clusters without
	// GPUs) the queue should hold while every queue with an expectShare has
	// work waiting. Checked by Result.Check.
	ExpectShare *float64 `json:"expectShare,omitempty"`
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
	// NUMAZones splits the node's CPUs, memory and GPUs evenly into this many
	// zones in its NodeResourceTopology object (0: one zone, the whole node).
	NUMAZones int `json:"numaZones,omitempty"`
	// TopologyPolicy is the kubelet's Topology Manager policy the node
	// reports: single-numa-node (the default with NUMAZones), restricted,
	// best-effort or none (the default without).
	TopologyPolicy string `json:"topologyPolicy,omitempty"`

	// ExactName names the group's one node Prefix, without an index (trace
	// replays keep the trace's node names). Not read from scenario files.
	ExactName bool `json:"-"`
}

// NodeName is the name of the group's node i.
func (g NodeGroup) NodeName(i int) string {
	if g.ExactName && g.Count == 1 {
		return g.Prefix
	}
	return fmt.Sprintf("%s-%d", g.Prefix, i)
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
	// Queue is the phalanx Queue of the job (default: the default queue).
	Queue string `json:"queue,omitempty"`
	// Guaranteed gives the pods limits equal to their requests: Guaranteed
	// QoS, so the kubelet aligns their CPUs and memory to NUMA zones.
	Guaranteed bool `json:"guaranteed,omitempty"`
	// Ranks labels each pod with its index as its rank
	// (scheduling.phalanx.dev/rank), as a job controller does: what
	// phalanx's sub-groups (subgroup-size annotation) go by.
	Ranks bool `json:"ranks,omitempty"`
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
func Load(path string) (*Suite, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(raw)
}

// Parse decodes a scenario file strictly and checks every scenario in it.
func Parse(raw []byte) (*Suite, error) {
	var top map[string]any
	if err := yaml.Unmarshal(raw, &top); err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	suite := &Suite{}
	if _, ok := top["scenarios"]; ok {
		if err := yaml.UnmarshalStrict(raw, suite); err != nil {
			return nil, fmt.Errorf("scenarios: %w", err)
		}
	} else {
		one := &Scenario{}
		if err := yaml.UnmarshalStrict(raw, one); err != nil {
			return nil, fmt.Errorf("scenario: %w", err)
		}
		suite.Scenarios = []*Scenario{one}
	}
	names := map[string]bool{}
	for _, s := range suite.Scenarios {
		if err := s.Validate(); err != nil {
			return nil, err
		}
		if names[s.Name] {
			return nil, fmt.Errorf("scenario %q: defined twice", s.Name)
		}
		names[s.Name] = true
	}
	return suite, nil
}

// Validate checks the scenario and fills in its defaults (timeout, share
// tolerance).
func (s *Scenario) Validate() error {
	if s.Name == "" {
		return errors.New("scenario: name is required")
	}
	if len(s.Nodes) == 0 {
		return fmt.Errorf("scenario %q: no nodes", s.Name)
	}
	for i, g := range s.Nodes {
		if g.Prefix == "" || g.Count <= 0 {
			return fmt.Errorf("scenario %q: nodes[%d]: prefix and count > 0 are required", s.Name, i)
		}
		if g.NUMAZones < 0 || g.NUMAZones > 8 {
			return fmt.Errorf("scenario %q: nodes[%d].numaZones: must be between 0 and 8", s.Name, i)
		}
		if g.TopologyPolicy != "" {
			if _, err := numa.ParsePolicy(g.TopologyPolicy); err != nil {
				return fmt.Errorf("scenario %q: nodes[%d].topologyPolicy: %w", s.Name, i, err)
			}
		}
	}
	for i, l := range s.Network {
		if l.Name == "" || l.NodeLabel == "" {
			return fmt.Errorf("scenario %q: network[%d]: name and nodeLabel are required", s.Name, i)
		}
	}
	queues := map[string]bool{}
	for i, q := range s.Queues {
		if q.Name == "" {
			return fmt.Errorf("scenario %q: queues[%d]: name is required", s.Name, i)
		}
		if q.ExpectShare != nil && (*q.ExpectShare <= 0 || *q.ExpectShare > 1) {
			return fmt.Errorf("scenario %q: queue %s: expectShare must be in (0, 1]", s.Name, q.Name)
		}
		queues[q.Name] = true
	}
	if s.ShareTolerance < 0 || s.ShareTolerance >= 1 {
		return fmt.Errorf("scenario %q: shareTolerance must be in [0, 1)", s.Name)
	}
	if s.ShareTolerance == 0 {
		s.ShareTolerance = 0.1
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
		if j.Queue != "" && !queues[j.Queue] {
			return fmt.Errorf("scenario %q: job %s: queue %q is not among the scenario's queues", s.Name, j.Name, j.Queue)
		}
		if level := j.RequiredLevel(); level != "" && s.Level(level) == nil {
			return fmt.Errorf("scenario %q: job %s: topology level %q is not in the scenario's network (%s)", s.Name, j.Name, level, s.levelNames())
		}
		if size, level := j.SubGroups(); size > 0 && (level == "" || s.Level(level) == nil) {
			return fmt.Errorf("scenario %q: job %s: sub-group level %q is not in the scenario's network (%s)", s.Name, j.Name, level, s.levelNames())
		}
		key := j.EffectiveNamespace() + "/" + j.Name
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

// EffectiveNamespace is the job's namespace, "default" when unset.
func (j Job) EffectiveNamespace() string {
	if j.Namespace == "" {
		return metav1.NamespaceDefault
	}
	return j.Namespace
}

// Key is namespace/name.
func (j Job) Key() string { return j.EffectiveNamespace() + "/" + j.Name }

// RequiredLevel is the network level the job must stay inside, if any.
func (j Job) RequiredLevel() string {
	return j.Annotations[phalanxv1alpha1.TopologyRequiredAnnotation]
}

// SubGroups is the job's sub-group size and required level (0, "" when it
// has none, or no valid size).
func (j Job) SubGroups() (int, string) {
	size, err := strconv.Atoi(j.Annotations[phalanxv1alpha1.SubGroupSizeAnnotation])
	if err != nil || size <= 0 {
		return 0, ""
	}
	return size, j.Annotations[phalanxv1alpha1.SubGroupTopologyRequiredAnnotation]
}

// Level finds a network level by name; "host" is always there.
func (s *Scenario) Level(name string) *phalanxv1alpha1.TopologyLevel {
	for i := range s.Network {
		if s.Network[i].Name == name {
			return &s.Network[i]
		}
	}
	if name == hostLevel.Name {
		return &hostLevel
	}
	return nil
}

func (s *Scenario) levelNames() string {
	var names []string
	for _, l := range s.Network {
		names = append(names, l.Name)
	}
	return strings.Join(append(names, hostLevel.Name), ", ")
}

// Levels is the scenario's network with the host level at the bottom.
func (s *Scenario) Levels() []phalanxv1alpha1.TopologyLevel {
	out := slices.Clone(s.Network)
	if s.Level(hostLevel.Name) == &hostLevel {
		out = append(out, hostLevel)
	}
	return out
}

// HostLevel names the level every scenario has: one domain per node.
const HostLevel = "host"

var hostLevel = phalanxv1alpha1.TopologyLevel{Name: HostLevel, NodeLabel: v1.LabelHostname}
