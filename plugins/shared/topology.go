package shared

import (
	v1 "k8s.io/api/core/v1"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/phalanx-sched/phalanx/internal/gang"
)

// Topology is what the NetworkTopology plugin offers the gang planner.
type Topology interface {
	// Constrain sets the request's levels, node domains and the gang's
	// constraint. placedNodes hold members already bound or reserved: a gang
	// with a required level stays in their domain. It returns the constraint
	// for messages ("" when the gang has none).
	Constrain(pg *pgv1alpha1.PodGroup, pod *v1.Pod, placedNodes []string, req *gang.Request) string
}

// SetTopology registers the topology provider (the NetworkTopology plugin).
func (s *State) SetTopology(t Topology) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.topology = t
}

// Topology returns the registered provider, or nil.
func (s *State) Topology() Topology {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.topology
}
