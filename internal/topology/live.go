package topology

import (
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	phalanxlisters "github.com/phalanx-sched/phalanx/pkg/generated/listers/scheduling/v1alpha1"
)

// Live is the network topology of the process: a tree of levels from the
// named NetworkTopology object (node labels) or from Volcano HyperNodes,
// rebuilt from the listers when Invalidate says nodes or topology objects
// changed.
type Live struct {
	name  string
	nodes corelisters.NodeLister
	topos phalanxlisters.NetworkTopologyLister
	// hyperNodes is nil unless HyperNodes are read.
	hyperNodes cache.GenericLister
	// changed is told that the topology changed (failed gangs may fit now).
	changed func()

	mu        sync.Mutex
	tree      *Tree
	packLevel int
	dirty     bool
	// byKey caches one-level trees of a node label (the upstream Workload
	// API's topology constraint names a label, not a level).
	byKey map[string]*Tree
}

// NewLive returns the topology named name over the listers; hyperNodes may
// be nil. changed is called on each topology change.
func NewLive(name string, nodes corelisters.NodeLister, topos phalanxlisters.NetworkTopologyLister, hyperNodes cache.GenericLister, changed func()) *Live {
	return &Live{name: name, nodes: nodes, topos: topos, hyperNodes: hyperNodes, changed: changed, dirty: true, byKey: map[string]*Tree{}}
}

// Invalidate marks the trees stale. A topology change may let failed gangs
// fit (or no longer), so it is a change for the whole process, told after
// the trees are stale. That holds for a node's change too, which the
// scheduler's and the gangs' handlers see on their own: a gang they wake
// before this runs may plan on the stale trees and fail, and only a change
// counted after it voids that failure and wakes the gang again.
func (t *Live) Invalidate() {
	t.mu.Lock()
	t.dirty = true
	t.byKey = map[string]*Tree{}
	t.mu.Unlock()
	t.changed()
}

// Tree returns the current topology; nil when none is defined.
func (t *Live) Tree() *Tree {
	tree, _ := t.View()
	return tree
}

// View returns the tree and its packing level (the narrowest level that
// groups several nodes; -1 without one), rebuilding both when stale.
func (t *Live) View() (*Tree, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dirty {
		t.dirty = false
		t.tree = t.build()
		t.packLevel = -1
		if t.tree != nil {
			t.packLevel = PackingLevel(t.tree)
		}
	}
	return t.tree, t.packLevel
}

// ForKeys returns the tree whose levels are the given node labels, widest
// first: the topology of an upstream gang of sub-groups (the
// CompositePodGroup's key, then its PodGroups'). Levels keep the name of a
// NetworkTopology level with the same label.
func (t *Live) ForKeys(keys ...string) *Tree {
	id := strings.Join(keys, "\x00")
	t.mu.Lock()
	defer t.mu.Unlock()
	if tr, ok := t.byKey[id]; ok {
		return tr
	}
	levels := make([]Level, len(keys))
	nt, ntErr := t.topos.Get(t.name)
	for i, key := range keys {
		levels[i] = Level{Name: key, NodeLabel: key}
		if ntErr == nil {
			for _, l := range nt.Spec.Levels {
				if l.NodeLabel == key {
					levels[i].Name = l.Name
				}
			}
		}
	}
	nodes, err := t.nodes.List(labels.Everything())
	if err != nil {
		return nil
	}
	tr := FromLevels(levels, nodes)
	t.byKey[id] = tr
	return tr
}

func (t *Live) build() *Tree {
	nodes, err := t.nodes.List(labels.Everything())
	if err != nil {
		return nil
	}
	if nt, err := t.topos.Get(t.name); err == nil {
		levels := make([]Level, len(nt.Spec.Levels))
		for i, l := range nt.Spec.Levels {
			levels[i] = Level{Name: l.Name, NodeLabel: l.NodeLabel}
		}
		return FromLevels(levels, nodes)
	} else if !apierrors.IsNotFound(err) {
		return nil
	}
	if t.hyperNodes == nil {
		return nil
	}
	objs, err := t.hyperNodes.List(labels.Everything())
	if err != nil || len(objs) == 0 {
		return nil
	}
	hns := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok {
			hns = append(hns, u)
		}
	}
	tree, errs := FromHyperNodes(hns, nodes)
	for i, e := range errs {
		if i == 5 {
			klog.Background().Info("More HyperNode problems not shown", "count", len(errs)-i)
			break
		}
		klog.Background().Info("Ignoring part of the HyperNode topology", "err", e)
	}
	return tree
}

// PackingLevel is the narrowest level that groups several nodes: a level of
// one node per domain (the host level) says nothing about fragmentation.
func PackingLevel(t *Tree) int {
	levels := t.Levels()
	for li := len(levels) - 1; li >= 0; li-- {
		for _, v := range t.Values(levels[li]) {
			if len(t.Nodes(levels[li], v)) > 1 {
				return li
			}
		}
	}
	return -1
}
