// Package numatopology is the NUMATopology plugin: it places pods that the
// kubelet's Topology Manager aligns (single-numa-node, restricted) only where
// one NUMA zone can hold them, from NodeResourceTopology objects, and keeps its
// own per-zone accounting of what it assumed until the objects catch up.
package numatopology

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	nrtv1alpha2 "github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/apis/topology/v1alpha2"
	nrtclientset "github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/generated/clientset/versioned"
	nrtinformers "github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/generated/informers/externalversions"
	nrtlisters "github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/generated/listers/topology/v1alpha2"

	"github.com/phalanx-sched/phalanx/apis/config"
	"github.com/phalanx-sched/phalanx/apis/config/validation"
	"github.com/phalanx-sched/phalanx/internal/numa"
	"github.com/phalanx-sched/phalanx/internal/resources"
	"github.com/phalanx-sched/phalanx/plugins/shared"
)

// Name is the plugin name used in the scheduler configuration.
const Name = "NUMATopology"

const stateKey fwk.StateKey = "phalanx.dev/" + Name

// reconcileGrace: an NRT update published this long after the scheduler
// charged a pod is taken to include that pod (the kubelet admitted it and the
// agent published); earlier updates may not, so the charge stays.
const reconcileGrace = 5 * time.Second

// NUMATopology filters and scores by NUMA zone.
type NUMATopology struct {
	h                fwk.Handle
	s                *shared.State
	strategy         string
	rejectWithoutNRT bool
	nrts             nrtlisters.NodeResourceTopologyLister

	mu sync.Mutex
	// parsed caches each node's zones by NRT resourceVersion.
	parsed map[string]parsedNRT
	// charges: node -> pod -> per-zone usage the NRT does not show yet.
	charges map[string]map[types.UID]charge
	// turnedAway holds pods this plugin rejected somewhere; they are woken
	// when this process's informer sees an NRT change (the scheduler's own
	// event for it may arrive while our lister is still stale).
	turnedAway map[types.UID]*v1.Pod
}

type parsedNRT struct {
	version string
	node    *numa.Node
	err     error
}

type charge struct {
	zones map[string]resources.List
	at    time.Time
}

var (
	_ fwk.PreFilterPlugin   = &NUMATopology{}
	_ fwk.FilterPlugin      = &NUMATopology{}
	_ fwk.PreScorePlugin    = &NUMATopology{}
	_ fwk.ScorePlugin       = &NUMATopology{}
	_ fwk.ReservePlugin     = &NUMATopology{}
	_ fwk.EnqueueExtensions = &NUMATopology{}
	_ shared.NodeLimiter    = &NUMATopology{}
)

// New builds the plugin from validated args.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, ok := obj.(*config.NUMATopologyArgs)
	if !ok {
		return nil, fmt.Errorf("want args of type NUMATopologyArgs, got %T", obj)
	}
	if err := validation.ValidateNUMATopologyArgs(field.NewPath("pluginConfig").Key(Name).Child("args"), args); err != nil {
		return nil, fmt.Errorf("profile %q: %w", h.ProfileName(), err)
	}
	s, err := shared.Get(ctx, h)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	cfg := shared.CRDConfig(h.KubeConfig())
	if err := shared.RequireAPI(cfg, nrtv1alpha2.SchemeGroupVersion.String(), "noderesourcetopologies"); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	client, err := nrtclientset.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	factory := nrtinformers.NewSharedInformerFactory(client, 0)
	informer := factory.Topology().V1alpha2().NodeResourceTopologies()
	pl := &NUMATopology{
		h: h, s: s, strategy: args.ScoringStrategy, rejectWithoutNRT: args.NodesWithoutTopology == config.RejectAlignedPods,
		nrts: informer.Lister(), parsed: map[string]parsedNRT{}, charges: map[string]map[types.UID]charge{},
		turnedAway: map[types.UID]*v1.Pod{},
	}
	// Objects created or changed at any time are picked up.
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { pl.reconcile(obj) },
		UpdateFunc: func(_, obj any) { pl.reconcile(obj) },
	}); err != nil {
		return nil, err
	}
	if _, err := h.SharedInformerFactory().Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: pl.onPodDelete,
	}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	s.SetNodeLimiter(pl)
	return pl, nil
}

// Name returns the plugin name.
func (pl *NUMATopology) Name() string { return Name }

// reconcile drops charges that a fresh NRT object already accounts for. New
// zone data may let gangs fit that failed to plan, so their cached failures
// are dropped and they are woken.
func (pl *NUMATopology) reconcile(obj any) {
	nrt, ok := obj.(*nrtv1alpha2.NodeResourceTopology)
	if !ok {
		return
	}
	pl.mu.Lock()
	for uid, c := range pl.charges[nrt.Name] {
		if time.Since(c.at) > reconcileGrace {
			delete(pl.charges[nrt.Name], uid)
		}
	}
	waiting := make(map[string]*v1.Pod, len(pl.turnedAway))
	for uid, p := range pl.turnedAway {
		waiting[p.Namespace+"/"+p.Name] = p
		delete(pl.turnedAway, uid)
	}
	pl.mu.Unlock()
	pl.s.Gangs.Bump()
	pl.s.CapacityFreed()
	if len(waiting) > 0 {
		pl.h.Activate(klog.Background(), waiting)
	}
}

// turnAway records a rejected pod (bounded: a pod is kept once) and returns st.
func (pl *NUMATopology) turnAway(pod *v1.Pod, st *fwk.Status) *fwk.Status {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if len(pl.turnedAway) < maxTurnedAway {
		pl.turnedAway[pod.UID] = pod
	}
	return st
}

// maxTurnedAway bounds the memory of rejected pods kept for waking.
const maxTurnedAway = 10000

func (pl *NUMATopology) onPodDelete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	pl.mu.Lock()
	delete(pl.charges[pod.Spec.NodeName], pod.UID)
	delete(pl.turnedAway, pod.UID)
	pl.mu.Unlock()
}

// zones returns the node's parsed topology (nil without an NRT object) and
// what the scheduler charged on it beyond the object.
func (pl *NUMATopology) zones(node string) (*numa.Node, map[string]resources.List, error) {
	nrt, err := pl.nrts.Get(node)
	if err != nil {
		return nil, nil, nil
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	p, ok := pl.parsed[node]
	if !ok || p.version != nrt.ResourceVersion {
		n, err := numa.FromNRT(nrt)
		p = parsedNRT{version: nrt.ResourceVersion, node: n, err: err}
		pl.parsed[node] = p
	}
	if p.err != nil {
		return nil, nil, p.err
	}
	charged := map[string]resources.List{}
	for _, c := range pl.charges[node] {
		for zone, l := range c.zones {
			if charged[zone] == nil {
				charged[zone] = resources.List{}
			}
			charged[zone].Add(l)
		}
	}
	return p.node, charged, nil
}

type cycleState struct{ aligned bool }

func (c *cycleState) Clone() fwk.StateData { return c }

// PreFilter decides once per cycle whether the pod needs NUMA alignment.
func (pl *NUMATopology) PreFilter(_ context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if !numa.NeedsAlignment(pod) {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	state.Write(stateKey, &cycleState{aligned: true})
	return nil, nil
}

// PreFilterExtensions returns nil.
func (pl *NUMATopology) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter admits the pod only where the kubelet's Topology Manager will.
func (pl *NUMATopology) Filter(_ context.Context, _ fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	name := nodeInfo.Node().Name
	node, charged, err := pl.zones(name)
	if err != nil {
		return pl.turnAway(pod, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("NodeResourceTopology of %s cannot be read: %v", name, err)))
	}
	if node == nil {
		if pl.rejectWithoutNRT {
			return pl.turnAway(pod, fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
				"node has no NodeResourceTopology and the pod needs NUMA alignment (devices, or pinned CPUs): publish NRT objects (NFD topology-updater) or set NUMATopology nodesWithoutTopology: AdmitAll"))
		}
		return nil
	}
	if _, ok, reason := node.Fit(pod, charged); !ok {
		return pl.turnAway(pod, fwk.NewStatus(fwk.Unschedulable, reason))
	}
	return nil
}

// Limit tells the gang planner how many copies of an aligned pod fit the
// node's zones (a node with two zones of 4 GPUs takes two 4-GPU members).
func (pl *NUMATopology) Limit(pod *v1.Pod, nodeName string, max int) int {
	if !numa.NeedsAlignment(pod) {
		return max
	}
	node, charged, err := pl.zones(nodeName)
	if err != nil {
		return 0
	}
	if node == nil {
		if pl.rejectWithoutNRT {
			return 0
		}
		return max
	}
	return node.Copies(pod, charged, max)
}

// PreScore skips pods that need no alignment.
func (pl *NUMATopology) PreScore(_ context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	if _, err := state.Read(stateKey); err != nil {
		return fwk.NewStatus(fwk.Skip)
	}
	return nil
}

// Score ranks nodes by the configured strategy.
func (pl *NUMATopology) Score(_ context.Context, _ fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	node, charged, err := pl.zones(nodeInfo.Node().Name)
	if err != nil || node == nil {
		return 0, nil
	}
	return node.Score(pod, charged, pl.strategy), nil
}

// ScoreExtensions returns nil: scores are already in range.
func (pl *NUMATopology) ScoreExtensions() fwk.ScoreExtensions { return nil }

// Reserve charges the zones the kubelet will use, so that the next pods do not
// double-book them before the NRT object shows it.
func (pl *NUMATopology) Reserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	if _, err := state.Read(stateKey); err != nil {
		return nil
	}
	node, charged, err := pl.zones(nodeName)
	if err != nil || node == nil {
		return nil
	}
	allocs, ok, reason := node.Fit(pod, charged)
	if !ok {
		return fwk.NewStatus(fwk.Unschedulable, reason)
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.charges[nodeName] == nil {
		pl.charges[nodeName] = map[types.UID]charge{}
	}
	pl.charges[nodeName][pod.UID] = charge{zones: numa.Usage(allocs), at: time.Now()}
	klog.FromContext(ctx).V(4).Info("Charged NUMA zones", "pod", klog.KObj(pod), "node", nodeName, "zones", allocs)
	return nil
}

// Unreserve gives the zones back.
func (pl *NUMATopology) Unreserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	delete(pl.charges[nodeName], pod.UID)
}

// EventsToRegister: a new or updated NRT object, or freed capacity.
func (pl *NUMATopology) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: "noderesourcetopologies.v1alpha2.topology.node.k8s.io", ActionType: fwk.Add | fwk.Update}},
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add}},
	}, nil
}
