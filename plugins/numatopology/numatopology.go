// Package numatopology is the NUMATopology plugin: it places pods that the
// kubelet's Topology Manager aligns (single-numa-node, restricted) only where
// one NUMA zone can hold them, from NodeResourceTopology objects, and keeps a
// per-zone accounting of what it assumed until the objects catch up. Nodes
// that publish no zones take every pod, as the kubelet's default policy
// (none) does, unless they are known to enforce alignment.
package numatopology

import (
	"context"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/apis/config"
	"github.com/phalanx-sched/phalanx/apis/config/validation"
	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/numa"
	"github.com/phalanx-sched/phalanx/internal/resources"
	"github.com/phalanx-sched/phalanx/plugins/internal/ports"
	"github.com/phalanx-sched/phalanx/plugins/runtime"
)

// Name is the plugin name used in the scheduler configuration.
const Name = "NUMATopology"

// Zones is what this plugin needs of the process NUMA view.
type Zones interface {
	Zones(node string) (*numa.Node, map[string]resources.List, error)
	LabelledPolicy(node string) (numa.Policy, error)
	Charge(node string, uid types.UID, zones map[string]resources.List)
	Uncharge(node string, uid types.UID)
	ReportUnaligned(node string) bool
	Node(name string) (*v1.Node, error)
}

// TurnAway remembers a rejected plain pod, to wake it when zone data changes.
type TurnAway interface {
	TurnedAway(pod *v1.Pod)
}

// NUMATopology filters and scores by NUMA zone.
type NUMATopology struct {
	h        fwk.Handle
	zones    Zones
	waiting  TurnAway
	strategy string
	// strict holds nodes without NodeResourceTopology to alignment.
	strict bool

	// aligned remembers whether the last pods asked about need alignment:
	// the planner asks Limit for every node with the same few pods.
	alignMu sync.Mutex
	aligned [4]alignedPod
	next    int
}

type alignedPod struct {
	pod     *v1.Pod
	aligned bool
}

// needsAlignment is numa.NeedsAlignment, remembered for the last few pods.
func (pl *NUMATopology) needsAlignment(pod *v1.Pod) bool {
	pl.alignMu.Lock()
	defer pl.alignMu.Unlock()
	for _, a := range pl.aligned {
		if a.pod == pod {
			return a.aligned
		}
	}
	a := numa.NeedsAlignment(pod)
	pl.aligned[pl.next] = alignedPod{pod: pod, aligned: a}
	pl.next = (pl.next + 1) % len(pl.aligned)
	return a
}

var (
	_ fwk.PreFilterPlugin   = &NUMATopology{}
	_ fwk.FilterPlugin      = &NUMATopology{}
	_ fwk.PreScorePlugin    = &NUMATopology{}
	_ fwk.ScorePlugin       = &NUMATopology{}
	_ fwk.ReservePlugin     = &NUMATopology{}
	_ fwk.EnqueueExtensions = &NUMATopology{}
)

// Factory returns the plugin factory over the process runtime.
func Factory(rt *runtime.Runtime) func(context.Context, k8sruntime.Object, fwk.Handle) (fwk.Plugin, error) {
	return func(ctx context.Context, obj k8sruntime.Object, h fwk.Handle) (fwk.Plugin, error) {
		args, ok := obj.(*config.NUMATopologyArgs)
		if !ok {
			return nil, fmt.Errorf("want args of type NUMATopologyArgs, got %T", obj)
		}
		if err := validation.ValidateNUMATopologyArgs(field.NewPath("pluginConfig").Key(Name).Child("args"), args); err != nil {
			return nil, fmt.Errorf("profile %q: %w", h.ProfileName(), err)
		}
		fw := ports.Of(h)
		gangs, err := rt.Gangs(fw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", Name, err)
		}
		zones, err := rt.NUMA(fw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", Name, err)
		}
		return New(h, zones, gangs, args), nil
	}
}

// New builds the plugin over its dependencies.
func New(h fwk.Handle, zones Zones, waiting TurnAway, args *config.NUMATopologyArgs) *NUMATopology {
	return &NUMATopology{h: h, zones: zones, waiting: waiting, strategy: args.ScoringStrategy,
		strict: args.NodesWithoutTopology == config.RejectAlignedPods}
}

// Name returns the plugin name.
func (pl *NUMATopology) Name() string { return Name }

// PreFilter gives the gang planner this plugin's per-node member limit and
// decides once per cycle whether the pod needs NUMA alignment.
func (pl *NUMATopology) PreFilter(_ context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	needs := numa.NeedsAlignment(pod)
	state.Write(stateKey, &cycleState{limiter: pl, aligned: needs})
	if !needs {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return nil, nil
}

// PreFilterExtensions returns nil.
func (pl *NUMATopology) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// verdict is the node's answer for an aligned pod: zones (nil when the node
// publishes none and is not held to alignment), or why it is refused.
func (pl *NUMATopology) verdict(node string) (*numa.Node, map[string]resources.List, *fwk.Status) {
	zn, charged, err := pl.zones.Zones(node)
	if err != nil {
		return nil, nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("NodeResourceTopology of %s cannot be read: %v", node, err))
	}
	if zn != nil {
		return zn, charged, nil
	}
	policy, err := pl.zones.LabelledPolicy(node)
	if err != nil {
		return nil, nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	var why string
	switch {
	case policy.Rejects():
		why = fmt.Sprintf("node label %s=%s says the kubelet enforces NUMA alignment, but the node publishes no NodeResourceTopology (run NFD topology-updater)",
			phalanxv1alpha1.TopologyManagerPolicyLabel, policy)
	case pl.strict && policy == "":
		why = "node has no NodeResourceTopology and NUMATopology's nodesWithoutTopology is RejectAlignedPods"
	default:
		return nil, nil, nil
	}
	if pl.zones.ReportUnaligned(node) {
		if n, err := pl.zones.Node(node); err == nil {
			pl.h.EventRecorder().Eventf(n, nil, v1.EventTypeWarning, "NoNUMATopology", "Scheduling",
				"pods that need NUMA alignment (devices, pinned CPUs) are not placed here: %s", why)
		}
	}
	return nil, nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, why)
}

// Filter admits the pod only where the kubelet's Topology Manager will.
func (pl *NUMATopology) Filter(_ context.Context, _ fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	zn, charged, st := pl.verdict(nodeInfo.Node().Name)
	if st != nil {
		pl.waiting.TurnedAway(pod)
		return st
	}
	if zn == nil {
		return nil
	}
	if _, ok, reason := zn.Fit(pod, charged); !ok {
		pl.waiting.TurnedAway(pod)
		return fwk.NewStatus(fwk.Unschedulable, reason)
	}
	return nil
}

// Limit tells the gang planner how many copies of an aligned pod fit the
// node's zones (a node with two zones of 4 GPUs takes two 4-GPU members).
func (pl *NUMATopology) Limit(pod *v1.Pod, node string, max int) int {
	if !pl.needsAlignment(pod) {
		return max
	}
	zn, charged, st := pl.verdict(node)
	if st != nil {
		return 0
	}
	if zn == nil {
		return max
	}
	return zn.Copies(pod, charged, max)
}

// PreScore skips pods that need no alignment.
func (pl *NUMATopology) PreScore(_ context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	if !aligned(state) {
		return fwk.NewStatus(fwk.Skip)
	}
	return nil
}

// Score ranks nodes by the configured strategy.
func (pl *NUMATopology) Score(_ context.Context, _ fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	zn, charged, err := pl.zones.Zones(nodeInfo.Node().Name)
	if err != nil || zn == nil {
		return 0, nil
	}
	return zn.Score(pod, charged, pl.strategy), nil
}

// ScoreExtensions returns nil: scores are already in range.
func (pl *NUMATopology) ScoreExtensions() fwk.ScoreExtensions { return nil }

// Reserve charges the zones the kubelet will use, so that the next pods do not
// double-book them before the NRT object shows it.
func (pl *NUMATopology) Reserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	if !aligned(state) {
		return nil
	}
	zn, charged, err := pl.zones.Zones(nodeName)
	if err != nil || zn == nil {
		return nil
	}
	allocs, ok, reason := zn.Fit(pod, charged)
	if !ok {
		return fwk.NewStatus(fwk.Unschedulable, reason)
	}
	pl.zones.Charge(nodeName, pod.UID, numa.Usage(allocs))
	klog.FromContext(ctx).V(4).Info("Charged NUMA zones", "pod", klog.KObj(pod), "node", nodeName, "zones", allocs)
	return nil
}

// Unreserve gives the zones back.
func (pl *NUMATopology) Unreserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) {
	pl.zones.Uncharge(nodeName, pod.UID)
}

// EventsToRegister: freed capacity, new nodes and relabelled nodes (the
// topology-manager-policy label). NodeResourceTopology changes reach waiting
// pods through the runtime.
func (pl *NUMATopology) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel}},
	}, nil
}
