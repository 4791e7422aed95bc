package numa

import (
	"fmt"
	"sync"
	"time"

	nrtv1alpha2 "github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/apis/topology/v1alpha2"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/metrics"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// reconcileGrace: an NRT update published this long after the scheduler
// charged a pod is taken to include that pod (the kubelet admitted it and the
// agent published); earlier updates may not, so the charge stays.
const reconcileGrace = 5 * time.Second

// Live is the NUMA view of the process: each node's zones from its
// NodeResourceTopology object, and the per-zone usage the scheduler assumed
// that the objects do not show yet. An informer of the objects, transformed
// by ParseNRT, feeds it through Reconcile and OnDelete.
type Live struct {
	clock clock.PassiveClock
	// done ends waits for the first list (the scheduler stops).
	done <-chan struct{}
	// changed is told that zone data changed (failed gangs may fit now).
	changed func()
	// zones holds a *nodeZones per node that publishes an NRT object.
	zones cache.Store
	// synced closes once zones holds every object: only scheduling cycles
	// read them, so the first list may run beside kube-scheduler's.
	synced <-chan struct{}
	nodes  corelisters.NodeLister

	mu sync.Mutex
	// charges: node -> pod -> per-zone usage the NRT does not show yet.
	charges map[string]map[types.UID]zoneCharge
	// unaligned: nodes that enforce alignment without publishing zones,
	// already reported (once per node, not per pod).
	unaligned map[string]bool
}

// nodeZones is what the NRT informer keeps of a node's object: its parse,
// made once as the object arrives, not the object: nothing else reads the
// object, and its Go form (a quantity per amount, strings per zone) is the
// larger of the two.
type nodeZones struct {
	name string
	// resourceVersion lets the informer tell an update from a resync, as
	// it does for objects.
	resourceVersion string
	node            *Node
	err             error
}

// GetObjectMeta lets the informer's store key and compare the parse (by
// meta.Accessor); it is a fresh copy, so setters change nothing.
func (z *nodeZones) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Name: z.name, ResourceVersion: z.resourceVersion}
}

// ParseNRT is the NRT informer's transform. Tombstones and parses already
// made pass through as they are.
func ParseNRT(obj any) (any, error) {
	nrt, ok := obj.(*nrtv1alpha2.NodeResourceTopology)
	if !ok {
		return obj, nil
	}
	node, err := FromNRT(nrt)
	return &nodeZones{name: nrt.Name, resourceVersion: nrt.ResourceVersion, node: node, err: err}, nil
}

// NewLive returns an empty view: zones is the informer's store, synced closes
// once it holds every object, done when the scheduler stops.
func NewLive(clk clock.PassiveClock, zones cache.Store, nodes corelisters.NodeLister, changed func()) *Live {
	return &Live{clock: clk, zones: zones, nodes: nodes, changed: changed,
		charges: map[string]map[types.UID]zoneCharge{}, unaligned: map[string]bool{}}
}

// Listed sets what Zones waits for before its first read: synced closes
// once the informer listed every object, done when the scheduler stops.
func (n *Live) Listed(synced, done <-chan struct{}) { n.synced, n.done = synced, done }

type zoneCharge struct {
	zones map[string]resources.List
	at    time.Time
}

// Reconcile drops charges that a fresh NRT object already accounts for. New
// zone data may let gangs fit that failed to plan: that is a change.
func (n *Live) Reconcile(obj any) {
	z, ok := obj.(*nodeZones)
	if !ok {
		return
	}
	n.mu.Lock()
	for uid, c := range n.charges[z.name] {
		if n.clock.Since(c.at) > reconcileGrace {
			delete(n.charges[z.name], uid)
		}
	}
	if n.unaligned[z.name] {
		delete(n.unaligned, z.name)
		metrics.NodesWithoutTopology.Set(float64(len(n.unaligned)))
	}
	n.mu.Unlock()
	n.changed()
}

func (n *Live) OnDelete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if _, ok := obj.(*nodeZones); ok {
		n.changed()
	}
}

func (n *Live) OnPodDelete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if pod, ok := obj.(*v1.Pod); ok && pod.Spec.NodeName != "" {
		n.mu.Lock()
		delete(n.charges[pod.Spec.NodeName], pod.UID)
		n.mu.Unlock()
	}
}

func (n *Live) OnNodeDelete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if node, ok := obj.(*v1.Node); ok {
		n.mu.Lock()
		delete(n.charges, node.Name)
		if n.unaligned[node.Name] {
			delete(n.unaligned, node.Name)
			metrics.NodesWithoutTopology.Set(float64(len(n.unaligned)))
		}
		n.mu.Unlock()
	}
}

// Zones returns the node's parsed topology (nil without an NRT object) and
// what the scheduler charged on it beyond the object. Until the first list
// is in, it waits for it.
func (n *Live) Zones(node string) (*Node, map[string]resources.List, error) {
	select {
	case <-n.synced:
	case <-n.done:
		return nil, nil, fmt.Errorf("the NodeResourceTopology objects were not listed: the scheduler is stopping")
	}
	obj, ok, _ := n.zones.GetByKey(node)
	if !ok {
		return nil, nil, nil
	}
	z := obj.(*nodeZones)
	if z.err != nil {
		return nil, nil, z.err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	charged := map[string]resources.List{}
	for _, c := range n.charges[node] {
		for zone, l := range c.zones {
			if charged[zone] == nil {
				charged[zone] = resources.List{}
			}
			charged[zone].Add(l)
		}
	}
	return z.node, charged, nil
}

// LabelledPolicy returns the Topology Manager policy a node's label says the
// kubelet enforces ("" when the node has no such label or the node is
// unknown). Operators set the label where they configure the kubelet.
func (n *Live) LabelledPolicy(node string) (Policy, error) {
	obj, err := n.nodes.Get(node)
	if err != nil {
		return "", nil
	}
	raw := obj.Labels[phalanxv1alpha1.TopologyManagerPolicyLabel]
	if raw == "" {
		return "", nil
	}
	p, err := ParsePolicy(raw)
	if err != nil {
		return "", fmt.Errorf("node label %s=%q: %w", phalanxv1alpha1.TopologyManagerPolicyLabel, raw, err)
	}
	return p, nil
}

// Charge records the zones a pod will use on node until the NRT shows them.
func (n *Live) Charge(node string, uid types.UID, zones map[string]resources.List) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.charges[node] == nil {
		n.charges[node] = map[types.UID]zoneCharge{}
	}
	n.charges[node][uid] = zoneCharge{zones: zones, at: n.clock.Now()}
}

// Uncharge gives a pod's zones back.
func (n *Live) Uncharge(node string, uid types.UID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.charges[node], uid)
}

// ReportUnaligned records, once per node, that the node enforces alignment
// without publishing zones; it returns true the first time, so the caller
// says so once (an event), not for every pod.
func (n *Live) ReportUnaligned(node string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.unaligned[node] {
		return false
	}
	n.unaligned[node] = true
	metrics.NodesWithoutTopology.Set(float64(len(n.unaligned)))
	return true
}

// Node returns the Node object, for events.
func (n *Live) Node(name string) (*v1.Node, error) { return n.nodes.Get(name) }
