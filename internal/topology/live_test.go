package topology

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	phalanxlisters "github.com/phalanx-sched/phalanx/pkg/generated/listers/scheduling/v1alpha1"
)

// liveFixture is a Live over indexers the test fills as informers would.
type liveFixture struct {
	nodes, topos, hyper cache.Indexer
	changes             int
	live                *Live
}

func newLiveFixture(t *testing.T, withHyperNodes bool, objs ...any) *liveFixture {
	t.Helper()
	idx := func() cache.Indexer { return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}) }
	f := &liveFixture{nodes: idx(), topos: idx(), hyper: idx()}
	for _, o := range objs {
		switch o := o.(type) {
		case *v1.Node:
			f.add(t, f.nodes, o)
		case *phalanxv1alpha1.NetworkTopology:
			f.add(t, f.topos, o)
		}
	}
	var hyper cache.GenericLister
	if withHyperNodes {
		hyper = cache.NewGenericLister(f.hyper, schema.GroupResource{Group: HyperNodeGVR.Group, Resource: HyperNodeGVR.Resource})
	}
	f.live = NewLive("default", corelisters.NewNodeLister(f.nodes), phalanxlisters.NewNetworkTopologyLister(f.topos), hyper, func() { f.changes++ })
	return f
}

func (f *liveFixture) add(t *testing.T, idx cache.Indexer, obj any) {
	t.Helper()
	if err := idx.Add(obj); err != nil {
		t.Fatal(err)
	}
}

func networkTopology(levels ...Level) *phalanxv1alpha1.NetworkTopology {
	nt := &phalanxv1alpha1.NetworkTopology{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	for _, l := range levels {
		nt.Spec.Levels = append(nt.Spec.Levels, phalanxv1alpha1.TopologyLevel{Name: l.Name, NodeLabel: l.NodeLabel})
	}
	return nt
}

// TestLiveTree: the tree follows the named NetworkTopology's levels; its
// packing level is the narrowest that groups several nodes (not the host
// level); a node label change is seen after Invalidate, and each
// invalidation, a node's or the topology's, is reported as a change for
// the process once the trees are stale.
func TestLiveTree(t *testing.T) {
	objs := []any{networkTopology(threeLevels...)}
	for _, n := range labelNodes() {
		objs = append(objs, n)
	}
	f := newLiveFixture(t, false, objs...)
	tree, pack := f.live.View()
	if got := tree.Levels(); !reflect.DeepEqual(got, []string{"ib-cluster", "leaf", "host"}) {
		t.Fatalf("levels %v", got)
	}
	if pack != 1 {
		t.Fatalf("packing level %d, want 1 (leaf: leaf-1 holds two nodes, hosts hold one)", pack)
	}
	if got := tree.Nodes("leaf", "leaf-1"); !reflect.DeepEqual(got, []string{"n1", "n2"}) {
		t.Fatalf("leaf-1 holds %v", got)
	}

	// n3 moves to leaf-1: unseen until invalidated.
	f.add(t, f.nodes, node("n3", ibLabel, "ib-a", leafLabel, "leaf-1", hostLabel, "n3"))
	if got := f.live.Tree().Nodes("leaf", "leaf-1"); len(got) != 2 {
		t.Fatalf("rebuilt without an invalidation: leaf-1 holds %v", got)
	}
	f.live.Invalidate()
	if got := f.live.Tree().Nodes("leaf", "leaf-1"); !reflect.DeepEqual(got, []string{"n1", "n2", "n3"}) {
		t.Fatalf("after the node change leaf-1 holds %v, want n1 n2 n3", got)
	}
	if f.changes != 1 {
		t.Fatalf("a node change reported %d process changes, want 1: a gang woken by another node handler may have planned on the stale trees", f.changes)
	}

	// The topology loses its host and leaf levels.
	f.add(t, f.topos, networkTopology(Level{Name: "ib-cluster", NodeLabel: ibLabel}))
	f.live.Invalidate()
	tree, pack = f.live.View()
	if got := tree.Levels(); !reflect.DeepEqual(got, []string{"ib-cluster"}) || pack != 0 {
		t.Fatalf("after the topology change: levels %v, packing level %d; want [ib-cluster] and 0", got, pack)
	}
	if f.changes != 2 {
		t.Fatalf("a topology change reported %d process changes, want 1 more", f.changes-1)
	}
}

// TestLiveNone: without the named NetworkTopology and without HyperNodes
// there is no tree (packing level -1); with HyperNodes read, they define it.
func TestLiveNone(t *testing.T) {
	f := newLiveFixture(t, false, node("n1", leafLabel, "leaf-1"))
	if tree, pack := f.live.View(); tree != nil || pack != -1 {
		t.Fatalf("no topology: tree %v, packing level %d; want nil and -1", tree, pack)
	}

	hns, nodes := equivalentTopology(t)
	objs := []any{}
	for _, n := range nodes {
		objs = append(objs, n)
	}
	f = newLiveFixture(t, true, objs...)
	for _, h := range hns {
		f.add(t, f.hyper, h)
	}
	want, _ := FromHyperNodes(hns, nodes)
	got := f.live.Tree()
	if got == nil || !reflect.DeepEqual(got.Levels(), want.Levels()) {
		t.Fatalf("HyperNode tree levels %v, want %v", got.Levels(), want.Levels())
	}
	for _, n := range nodes {
		if !reflect.DeepEqual(got.Domains(n.Name), want.Domains(n.Name)) {
			t.Errorf("%s: domains %v, want %v", n.Name, got.Domains(n.Name), want.Domains(n.Name))
		}
	}
}

// TestLiveForKeys: a tree of node labels (an upstream gang's topology keys)
// names a level after the NetworkTopology level of the same label, else
// after the label; it is cached until the next invalidation.
func TestLiveForKeys(t *testing.T) {
	objs := []any{networkTopology(Level{Name: "leaf", NodeLabel: leafLabel})}
	for _, n := range labelNodes() {
		objs = append(objs, n)
	}
	f := newLiveFixture(t, false, objs...)
	tr := f.live.ForKeys(ibLabel, leafLabel)
	if got := tr.Levels(); !reflect.DeepEqual(got, []string{ibLabel, "leaf"}) {
		t.Fatalf("levels %v, want [%s leaf]", got, ibLabel)
	}
	if again := f.live.ForKeys(ibLabel, leafLabel); again != tr {
		t.Fatal("the same keys built a new tree without an invalidation")
	}
	f.live.Invalidate()
	if again := f.live.ForKeys(ibLabel, leafLabel); again == tr {
		t.Fatal("an invalidation kept the cached tree")
	}
}

// TestLiveTellsANodeChangeOnceTheTreesHaveIt: the change a node's
// invalidation tells is one a plan it wakes sees. The gangs' node handler
// tells the same change on its own, maybe first: a gang it woke planned on
// the cached tree of the upstream gang's key, which lacked the added node,
// failed, and kept the failure until the periodic retry 20 s later.
func TestLiveTellsANodeChangeOnceTheTreesHaveIt(t *testing.T) {
	f := newLiveFixture(t, false, node("n1", ibLabel, "ib-a"))
	if got := f.live.ForKeys(ibLabel).Nodes(ibLabel, "ib-a"); !reflect.DeepEqual(got, []string{"n1"}) {
		t.Fatalf("ib-a holds %v, want n1", got)
	}
	var seen [][]string
	f.live.changed = func() { seen = append(seen, f.live.ForKeys(ibLabel).Nodes(ibLabel, "ib-a")) }
	f.add(t, f.nodes, node("n2", ibLabel, "ib-a"))
	f.live.Invalidate()
	if want := [][]string{{"n1", "n2"}}; !reflect.DeepEqual(seen, want) {
		t.Fatalf("the node's invalidation told changes seeing ib-a as %v, want %v", seen, want)
	}
}

// TestPackingLevel: one node per domain at every level (hosts only) gives -1.
func TestPackingLevel(t *testing.T) {
	tr := FromLevels([]Level{{Name: "host", NodeLabel: hostLabel}}, []*v1.Node{node("a", hostLabel, "a"), node("b", hostLabel, "b")})
	if got := PackingLevel(tr); got != -1 {
		t.Fatalf("hosts only: packing level %d, want -1", got)
	}
}
