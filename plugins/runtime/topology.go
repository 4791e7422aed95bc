package runtime

import (
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/topology"
	phalanxlisters "github.com/phalanx-sched/phalanx/pkg/generated/listers/scheduling/v1alpha1"
)

// Topology is the network topology of the process: a tree of levels from the
// named NetworkTopology object (node labels) or from Volcano HyperNodes,
// rebuilt when nodes or topology objects change.
type Topology struct {
	rt    *Runtime
	name  string
	nodes corelisters.NodeLister
	topos phalanxlisters.NetworkTopologyLister
	// hyperNodes is nil unless HyperNodes are read.
	hyperNodes cache.GenericLister

	mu        sync.Mutex
	tree      *topology.Tree
	packLevel int
	dirty     bool
	// byKey caches one-level trees of a node label (the upstream Workload
	// API's topology constraint names a label, not a level).
	byKey map[string]*topology.Tree
}

func newTopology(r *Runtime, name string, useHyperNodes bool) (*Topology, error) {
	ctx, fw := r.ctx, r.ports()
	if err := r.require(phalanxv1alpha1.SchemeGroupVersion.String(), "networktopologies"); err != nil {
		return nil, err
	}
	factory, err := r.phalanxInformers()
	if err != nil {
		return nil, err
	}
	t := &Topology{rt: r, name: name, dirty: true, byKey: map[string]*topology.Tree{},
		nodes: fw.Informers.Core().V1().Nodes().Lister()}
	changed := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { t.invalidate(true) },
		UpdateFunc: func(any, any) { t.invalidate(true) },
		DeleteFunc: func(any) { t.invalidate(true) },
	}
	inf := factory.Scheduling().V1alpha1().NetworkTopologies()
	t.topos = inf.Lister()
	if _, err := inf.Informer().AddEventHandler(changed); err != nil {
		return nil, err
	}
	if err := r.syncPart("NetworkTopologies", factory.Start, func(stop <-chan struct{}) []string {
		return unsynced(factory.WaitForCacheSync(stop))
	}); err != nil {
		return nil, err
	}
	if useHyperNodes {
		if served, _ := r.clients.Served(topology.HyperNodeGVR.GroupVersion().String(), topology.HyperNodeGVR.Resource); served && r.crdCfg != nil {
			dc, err := dynamic.NewForConfig(r.crdCfg)
			if err != nil {
				return nil, err
			}
			dyn := dynamicinformer.NewDynamicSharedInformerFactory(dc, 0)
			hn := dyn.ForResource(topology.HyperNodeGVR)
			t.hyperNodes = hn.Lister()
			if _, err := hn.Informer().AddEventHandler(changed); err != nil {
				return nil, err
			}
			if err := r.syncPart("HyperNodes", dyn.Start, func(stop <-chan struct{}) []string {
				return unsynced(dyn.WaitForCacheSync(stop))
			}); err != nil {
				return nil, err
			}
			klog.FromContext(ctx).Info("Reading Volcano HyperNodes for network topology")
		}
	}
	// Node label changes move nodes between domains.
	if _, err := fw.Informers.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { t.invalidate(false) },
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*v1.Node)
			n, ok2 := newObj.(*v1.Node)
			if !ok1 || !ok2 || !labels.Equals(o.Labels, n.Labels) {
				t.invalidate(false)
			}
		},
		DeleteFunc: func(any) { t.invalidate(false) },
	}); err != nil {
		return nil, err
	}
	return t, nil
}

// invalidate marks the trees stale. A topology change may let failed gangs
// fit (or no longer), so it is a change for the whole process.
func (t *Topology) invalidate(topologyChanged bool) {
	t.mu.Lock()
	t.dirty = true
	t.byKey = map[string]*topology.Tree{}
	t.mu.Unlock()
	if topologyChanged {
		t.rt.Changed()
	}
}

// Tree returns the current topology; nil when none is defined.
func (t *Topology) Tree() *topology.Tree {
	tree, _ := t.View()
	return tree
}

// View returns the tree and its packing level (the narrowest level that
// groups several nodes; -1 without one), rebuilding both when stale.
func (t *Topology) View() (*topology.Tree, int) {
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
func (t *Topology) ForKeys(keys ...string) *topology.Tree {
	id := strings.Join(keys, "\x00")
	t.mu.Lock()
	defer t.mu.Unlock()
	if tr, ok := t.byKey[id]; ok {
		return tr
	}
	levels := make([]topology.Level, len(keys))
	nt, ntErr := t.topos.Get(t.name)
	for i, key := range keys {
		levels[i] = topology.Level{Name: key, NodeLabel: key}
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
	tr := topology.FromLevels(levels, nodes)
	t.byKey[id] = tr
	return tr
}

func (t *Topology) build() *topology.Tree {
	nodes, err := t.nodes.List(labels.Everything())
	if err != nil {
		return nil
	}
	if nt, err := t.topos.Get(t.name); err == nil {
		levels := make([]topology.Level, len(nt.Spec.Levels))
		for i, l := range nt.Spec.Levels {
			levels[i] = topology.Level{Name: l.Name, NodeLabel: l.NodeLabel}
		}
		return topology.FromLevels(levels, nodes)
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
	tree, errs := topology.FromHyperNodes(hns, nodes)
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
func PackingLevel(t *topology.Tree) int {
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
