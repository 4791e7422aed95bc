package devices

import (
	"context"
	"sync"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

// NodeSlices keeps the devices each node's ResourceSlices publish, counted
// per slice (SliceCapacity) so that a slice's change or removal replaces
// only its own count. Queue accounting adds a node's count to its
// allocatable (Total). Both the scheduler's queues and the controller's
// Queue status keep one, fed from their slice and class watches.
type NodeSlices struct {
	d *Devices

	mu     sync.Mutex
	byNode map[string]map[string]resources.List
	nodeOf map[string]string
}

// NewNodeSlices counts slices with d's classes.
func NewNodeSlices(d *Devices) *NodeSlices {
	return &NodeSlices{d: d, byNode: map[string]map[string]resources.List{}, nodeOf: map[string]string{}}
}

// Set counts a slice (added, changed, or to recount after a class
// changed). It returns the nodes whose totals may have changed: the slice's
// node and, were it on another one before, that one. A slice not local to
// one node (NodeSelector, AllNodes) counts nowhere.
func (s *NodeSlices) Set(ctx context.Context, sl *resourceapi.ResourceSlice) []string {
	node := NodeOf(sl)
	var count resources.List
	if node != "" {
		count = s.d.SliceCapacity(ctx, sl)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var touched []string
	if prev, had := s.nodeOf[sl.Name]; had && prev != node {
		s.forget(sl.Name)
		touched = append(touched, prev)
	}
	if node == "" {
		return touched
	}
	if s.byNode[node] == nil {
		s.byNode[node] = map[string]resources.List{}
	}
	s.byNode[node][sl.Name] = count
	s.nodeOf[sl.Name] = node
	return append(touched, node)
}

// Delete forgets a slice; it returns the node whose total changed, "" when
// the slice counted nowhere.
func (s *NodeSlices) Delete(sl *resourceapi.ResourceSlice) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	node := s.nodeOf[sl.Name]
	s.forget(sl.Name)
	return node
}

func (s *NodeSlices) forget(name string) {
	node, had := s.nodeOf[name]
	if !had {
		return
	}
	delete(s.nodeOf, name)
	delete(s.byNode[node], name)
	if len(s.byNode[node]) == 0 {
		delete(s.byNode, node)
	}
}

// Total is a node's allocatable plus the devices its slices publish
// (a new list; allocatable is not modified).
func (s *NodeSlices) Total(node string, allocatable resources.List) resources.List {
	total := allocatable.Clone()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, count := range s.byNode[node] {
		total.Add(count)
	}
	return total
}
