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

// QueueOrder is what the CapacityQueue plugin offers Coscheduling's QueueSort:
// the pod whose queue is further below its deserved share goes first.
type QueueOrder interface {
	// Compare returns <0 if a's queue should go before b's, >0 after, 0 if equal.
	Compare(a, b *v1.Pod) int
}

// SetQueueOrder registers the queue ordering (the CapacityQueue plugin).
func (s *State) SetQueueOrder(q QueueOrder) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queueOrder = q
}

// QueueOrder returns the registered ordering, or nil.
func (s *State) QueueOrder() QueueOrder {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queueOrder
}

// NodeLimiter caps how many copies of a pod fit a node beyond resource
// arithmetic (the NUMATopology plugin: per-zone fit).
type NodeLimiter interface {
	Limit(pod *v1.Pod, node string, max int) int
}

// SetNodeLimiter registers the limiter.
func (s *State) SetNodeLimiter(l NodeLimiter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limiter = l
}

// NodeLimiter returns the registered limiter, or nil.
func (s *State) NodeLimiter() NodeLimiter {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limiter
}
