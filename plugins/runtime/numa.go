package runtime

import (
	"fmt"
	"sync"
	"time"

	nrtv1alpha2 "github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/apis/topology/v1alpha2"
	nrtclientset "github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/generated/clientset/versioned"
	nrtinformers "github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/generated/informers/externalversions"
	nrtlisters "github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/generated/listers/topology/v1alpha2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/numa"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// reconcileGrace: an NRT update published this long after the scheduler
// charged a pod is taken to include that pod (the kubelet admitted it and the
// agent published); earlier updates may not, so the charge stays.
const reconcileGrace = 5 * time.Second

// NUMA is the NUMA view of the process: each node's zones from its
// NodeResourceTopology object, and the per-zone usage the scheduler assumed
// that the objects do not show yet.
type NUMA struct {
	rt    *Runtime
	nrts  nrtlisters.NodeResourceTopologyLister
	nodes corelisters.NodeLister

	mu sync.Mutex
	// parsed caches each node's zones by NRT resourceVersion.
	parsed map[string]parsedNRT
	// charges: node -> pod -> per-zone usage the NRT does not show yet.
	charges map[string]map[types.UID]zoneCharge
	// unaligned: nodes that enforce alignment without publishing zones,
	// already reported (once per node, not per pod).
	unaligned map[string]bool
}

type parsedNRT struct {
	version string
	node    *numa.Node
	err     error
}

type zoneCharge struct {
	zones map[string]resources.List
	at    time.Time
}

func newNUMA(r *Runtime) (*NUMA, error) {
	fw := r.ports()
	if err := r.require(nrtv1alpha2.SchemeGroupVersion.String(), "noderesourcetopologies"); err != nil {
		return nil, err
	}
	client := r.clients.NRT
	if client == nil {
		c, err := nrtclientset.NewForConfig(r.crdCfg)
		if err != nil {
			return nil, err
		}
		client = c
	}
	factory := nrtinformers.NewSharedInformerFactory(client, 0)
	inf := factory.Topology().V1alpha2().NodeResourceTopologies()
	// The cache keeps one object per node: keep only what numa.FromNRT reads.
	if err := inf.Informer().SetTransform(func(obj any) (any, error) {
		if nrt, ok := obj.(*nrtv1alpha2.NodeResourceTopology); ok {
			numa.Trim(nrt)
			return nrt, nil
		}
		return trimManagedFields(obj)
	}); err != nil {
		return nil, err
	}
	n := &NUMA{rt: r, nrts: inf.Lister(), nodes: fw.Informers.Core().V1().Nodes().Lister(),
		parsed: map[string]parsedNRT{}, charges: map[string]map[types.UID]zoneCharge{}, unaligned: map[string]bool{}}
	// Objects created or changed at any time are picked up.
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    n.reconcile,
		UpdateFunc: func(_, obj any) { n.reconcile(obj) },
		DeleteFunc: n.onDelete,
	}); err != nil {
		return nil, err
	}
	r.addPodHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: n.onPodDelete})
	if _, err := fw.Informers.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: n.onNodeDelete,
	}); err != nil {
		return nil, err
	}
	if err := r.syncPart("NodeResourceTopologies", factory.Start, func(stop <-chan struct{}) []string {
		return unsynced(factory.WaitForCacheSync(stop))
	}); err != nil {
		return nil, err
	}
	return n, nil
}

// reconcile drops charges that a fresh NRT object already accounts for. New
// zone data may let gangs fit that failed to plan: that is a change.
func (n *NUMA) reconcile(obj any) {
	nrt, ok := obj.(*nrtv1alpha2.NodeResourceTopology)
	if !ok {
		return
	}
	n.mu.Lock()
	for uid, c := range n.charges[nrt.Name] {
		if n.rt.clock.Since(c.at) > reconcileGrace {
			delete(n.charges[nrt.Name], uid)
		}
	}
	if n.unaligned[nrt.Name] {
		delete(n.unaligned, nrt.Name)
		NodesWithoutTopology.Set(float64(len(n.unaligned)))
	}
	n.mu.Unlock()
	n.rt.Changed()
}

func (n *NUMA) onDelete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if nrt, ok := obj.(*nrtv1alpha2.NodeResourceTopology); ok {
		n.mu.Lock()
		delete(n.parsed, nrt.Name)
		n.mu.Unlock()
		n.rt.Changed()
	}
}

func (n *NUMA) onPodDelete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if pod, ok := obj.(*v1.Pod); ok && pod.Spec.NodeName != "" {
		n.mu.Lock()
		delete(n.charges[pod.Spec.NodeName], pod.UID)
		n.mu.Unlock()
	}
}

func (n *NUMA) onNodeDelete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if node, ok := obj.(*v1.Node); ok {
		n.mu.Lock()
		delete(n.charges, node.Name)
		delete(n.parsed, node.Name)
		if n.unaligned[node.Name] {
			delete(n.unaligned, node.Name)
			NodesWithoutTopology.Set(float64(len(n.unaligned)))
		}
		n.mu.Unlock()
	}
}

// Zones returns the node's parsed topology (nil without an NRT object) and
// what the scheduler charged on it beyond the object.
func (n *NUMA) Zones(node string) (*numa.Node, map[string]resources.List, error) {
	nrt, err := n.nrts.Get(node)
	if err != nil {
		return nil, nil, nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	p, ok := n.parsed[node]
	if !ok || p.version != nrt.ResourceVersion {
		zn, err := numa.FromNRT(nrt)
		p = parsedNRT{version: nrt.ResourceVersion, node: zn, err: err}
		n.parsed[node] = p
	}
	if p.err != nil {
		return nil, nil, p.err
	}
	charged := map[string]resources.List{}
	for _, c := range n.charges[node] {
		for zone, l := range c.zones {
			if charged[zone] == nil {
				charged[zone] = resources.List{}
			}
			charged[zone].Add(l)
		}
	}
	return p.node, charged, nil
}

// LabelledPolicy returns the Topology Manager policy a node's label says the
// kubelet enforces ("" when the node has no such label or the node is
// unknown). Operators set the label where they configure the kubelet.
func (n *NUMA) LabelledPolicy(node string) (numa.Policy, error) {
	obj, err := n.nodes.Get(node)
	if err != nil {
		return "", nil
	}
	raw := obj.Labels[phalanxv1alpha1.TopologyManagerPolicyLabel]
	if raw == "" {
		return "", nil
	}
	p, err := numa.ParsePolicy(raw)
	if err != nil {
		return "", fmt.Errorf("node label %s=%q: %w", phalanxv1alpha1.TopologyManagerPolicyLabel, raw, err)
	}
	return p, nil
}

// Charge records the zones a pod will use on node until the NRT shows them.
func (n *NUMA) Charge(node string, uid types.UID, zones map[string]resources.List) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.charges[node] == nil {
		n.charges[node] = map[types.UID]zoneCharge{}
	}
	n.charges[node][uid] = zoneCharge{zones: zones, at: n.rt.clock.Now()}
}

// Uncharge gives a pod's zones back.
func (n *NUMA) Uncharge(node string, uid types.UID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.charges[node], uid)
}

// ReportUnaligned records, once per node, that the node enforces alignment
// without publishing zones; it returns true the first time, so the caller
// says so once (an event), not for every pod.
func (n *NUMA) ReportUnaligned(node string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.unaligned[node] {
		return false
	}
	n.unaligned[node] = true
	NodesWithoutTopology.Set(float64(len(n.unaligned)))
	return true
}

// Node returns the Node object, for events.
func (n *NUMA) Node(name string) (*v1.Node, error) { return n.nodes.Get(name) }
