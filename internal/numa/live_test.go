package numa

import (
	"strings"
	"testing"
	"time"

	"github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/apis/topology/v1alpha2"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// liveFixture is a Live over a store the test fills through ParseNRT, as
// the informer does, with its first list already in.
type liveFixture struct {
	clock   *clocktesting.FakeClock
	store   cache.Store
	nodes   cache.Indexer
	changes int
	live    *Live
}

func newLiveFixture(t *testing.T, nodes ...*v1.Node) *liveFixture {
	t.Helper()
	f := &liveFixture{clock: clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0)),
		store: cache.NewStore(cache.MetaNamespaceKeyFunc), nodes: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})}
	for _, n := range nodes {
		if err := f.nodes.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	f.live = NewLive(f.clock, f.store, corelisters.NewNodeLister(f.nodes), func() { f.changes++ })
	synced := make(chan struct{})
	close(synced)
	f.live.Listed(synced, make(chan struct{}))
	return f
}

// publish stores the NRT's parse and tells the view, as the informer does.
func (f *liveFixture) publish(t *testing.T, nrt *v1alpha2.NodeResourceTopology) {
	t.Helper()
	obj, err := ParseNRT(nrt)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.store.Update(obj); err != nil {
		t.Fatal(err)
	}
	f.live.Reconcile(obj)
}

func twoZones(name, rv string) *v1alpha2.NodeResourceTopology {
	return &v1alpha2.NodeResourceTopology{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv},
		Attributes: attrs(AttributePolicy, "single-numa-node", AttributeScope, "container"),
		Zones: v1alpha2.ZoneList{
			{Name: "node-0", Type: "Node", Resources: v1alpha2.ResourceInfoList{res("cpu", "16", "16")}},
			{Name: "node-1", Type: "Node", Resources: v1alpha2.ResourceInfoList{res("cpu", "16", "16")}},
		},
	}
}

// TestLiveCharges: a pod's charge shows in Zones until an NRT update
// published well after it (reconcileGrace) accounts for it; an update that
// comes sooner keeps it; a pod's or node's deletion drops it. Each new
// object is a change for the process.
func TestLiveCharges(t *testing.T) {
	f := newLiveFixture(t)
	f.publish(t, twoZones("n1", "1"))
	f.live.Charge("n1", "pod-a", map[string]resources.List{"node-0": {v1.ResourceCPU: 4000}})
	f.live.Charge("n1", "pod-b", map[string]resources.List{"node-0": {v1.ResourceCPU: 2000}, "node-1": {v1.ResourceCPU: 1000}})
	node, charged, err := f.live.Zones("n1")
	if err != nil || node == nil {
		t.Fatalf("zones: %v, %v", node, err)
	}
	if charged["node-0"][v1.ResourceCPU] != 6000 || charged["node-1"][v1.ResourceCPU] != 1000 {
		t.Fatalf("charged %v, want node-0 6000m and node-1 1000m", charged)
	}

	f.publish(t, twoZones("n1", "2")) // too soon to include the pods
	if _, charged, _ = f.live.Zones("n1"); charged["node-0"][v1.ResourceCPU] != 6000 {
		t.Fatalf("an update within the grace dropped charges: %v", charged)
	}
	f.live.Uncharge("n1", "pod-b")
	f.clock.Step(reconcileGrace + time.Second)
	f.live.Charge("n1", "pod-c", map[string]resources.List{"node-1": {v1.ResourceCPU: 3000}})
	f.publish(t, twoZones("n1", "3"))
	_, charged, _ = f.live.Zones("n1")
	if charged["node-0"][v1.ResourceCPU] != 0 || charged["node-1"][v1.ResourceCPU] != 3000 {
		t.Fatalf("after a late update: charged %v, want only pod-c's 3000m on node-1", charged)
	}
	if f.changes != 3 {
		t.Fatalf("%d changes, want one per published object (3)", f.changes)
	}

	f.live.OnPodDelete(&v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "pod-c"}, Spec: v1.PodSpec{NodeName: "n1"}})
	if _, charged, _ = f.live.Zones("n1"); len(charged) != 0 {
		t.Fatalf("a deleted pod's charge stays: %v", charged)
	}
	f.live.Charge("n1", "pod-d", map[string]resources.List{"node-1": {v1.ResourceCPU: 1000}})
	f.live.OnNodeDelete(cache.DeletedFinalStateUnknown{Obj: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}})
	if _, charged, _ = f.live.Zones("n1"); len(charged) != 0 {
		t.Fatalf("a deleted node's charges stay: %v", charged)
	}
	f.live.OnDelete(cache.DeletedFinalStateUnknown{Obj: f.store.List()[0]})
	if f.changes != 4 {
		t.Fatalf("an NRT deletion is not a change: %d changes", f.changes)
	}
}

// TestLiveZonesErrors: a node without an object has no zones and no error;
// an object that does not parse gives its error; a stopping scheduler ends
// the wait for the first list.
func TestLiveZonesErrors(t *testing.T) {
	f := newLiveFixture(t)
	if node, _, err := f.live.Zones("absent"); node != nil || err != nil {
		t.Fatalf("no object: %v, %v; want nil, nil", node, err)
	}
	bad := twoZones("n2", "1")
	bad.Zones = append(bad.Zones, bad.Zones[0]) // a zone named twice
	f.publish(t, bad)
	if _, _, err := f.live.Zones("n2"); err == nil {
		t.Fatal("an object that does not parse gave no error")
	}

	waiting := NewLive(f.clock, f.store, corelisters.NewNodeLister(f.nodes), func() {})
	done := make(chan struct{})
	close(done)
	waiting.Listed(make(chan struct{}), done)
	if _, _, err := waiting.Zones("n1"); err == nil || !strings.Contains(err.Error(), "stopping") {
		t.Fatalf("stopped before the first list: %v, want an error saying the scheduler stops", err)
	}
}

// TestLiveUnalignedAndPolicy: a node that enforces alignment without zones
// is reported once, again after its object came and went; the labelled
// policy is read from the node, and a bad label names itself.
func TestLiveUnalignedAndPolicy(t *testing.T) {
	labelled := func(name, policy string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{phalanxv1alpha1.TopologyManagerPolicyLabel: policy}}}
	}
	f := newLiveFixture(t, labelled("n1", "single-numa-node"), labelled("n2", "tightest"), &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n3"}})
	if !f.live.ReportUnaligned("n1") || f.live.ReportUnaligned("n1") {
		t.Fatal("an unaligned node is not reported exactly once")
	}
	f.publish(t, twoZones("n1", "1"))
	if !f.live.ReportUnaligned("n1") {
		t.Fatal("after its object came, the node is not reported again")
	}
	if p, err := f.live.LabelledPolicy("n1"); err != nil || p != "single-numa-node" {
		t.Fatalf("n1 policy %q, %v", p, err)
	}
	if _, err := f.live.LabelledPolicy("n2"); err == nil || !strings.Contains(err.Error(), phalanxv1alpha1.TopologyManagerPolicyLabel) {
		t.Fatalf("a bad label: %v, want an error naming the label", err)
	}
	for _, name := range []string{"n3", "unknown"} {
		if p, err := f.live.LabelledPolicy(name); p != "" || err != nil {
			t.Fatalf("%s: policy %q, %v; want none", name, p, err)
		}
	}
}
