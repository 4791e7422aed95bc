// Package probe implements the gang manager's prober port over the
// scheduler framework: the profile's own Filter plugins judge a member on
// every node, and the scheduler's snapshot gives each node's free room.
package probe

import (
	"context"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/phalanx-sched/phalanx/internal/gang"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
	"github.com/phalanx-sched/phalanx/internal/resources"
	"github.com/phalanx-sched/phalanx/plugins/groupclaims"
)

// Filters asks the profile's Filter plugins about a member on every node of
// the cycle, in parallel. Its state skips the plugin named self (the manager
// accounts for held capacity itself) and the plugins named in also.
func Filters(h fwk.Handle, self string, state fwk.CycleState, infos []fwk.NodeInfo, also ...string) gang.Prober {
	return gang.ProberFunc(func(ctx context.Context, pod *v1.Pod) *gang.View {
		probeState := state.Clone()
		skip := sets.New(append([]string{self}, also...)...)
		if s := state.GetSkipFilterPlugins(); s != nil {
			skip = skip.Union(s)
		}
		probeState.SetSkipFilterPlugins(skip)
		view := newView(infos)
		h.Parallelizer().Until(ctx, len(infos), func(i int) {
			view.Verdicts[i] = verdictOf(h.RunFilterPluginsWithNominatedPods(ctx, probeState, pod, infos[i]))
		}, self)
		return view
	})
}

// Statuses is the prober for a plain pod that fits no node: what the
// cycle's filters already said (a queue's refusal ends the cycle before
// them; then they are asked).
func Statuses(h fwk.Handle, self string, state fwk.CycleState, statuses fwk.NodeToStatusReader, admitted bool) gang.Prober {
	infos, err := h.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return gang.ProberFunc(func(context.Context, *v1.Pod) *gang.View { return nil })
	}
	if !admitted {
		return Filters(h, self, state, infos)
	}
	return gang.ProberFunc(func(context.Context, *v1.Pod) *gang.View {
		view := newView(infos)
		for i, ni := range infos {
			view.Verdicts[i] = verdictOf(statuses.Get(ni.Node().Name))
		}
		return view
	})
}

func newView(infos []fwk.NodeInfo) *gang.View {
	view := &gang.View{Nodes: make([]planner.NodeState, len(infos)), Verdicts: make([]planner.Verdict, len(infos))}
	for i, ni := range infos {
		free, pods := FreeOn(ni)
		view.Nodes[i] = planner.NodeState{Node: ni.Node(), Free: free, FreePods: pods}
	}
	view.PodsOn = func(i int) []*v1.Pod {
		pis := infos[i].GetPods()
		out := make([]*v1.Pod, len(pis))
		for j, pi := range pis {
			out[j] = pi.GetPod()
		}
		return out
	}
	return view
}

// resourcePlugins reject a node for lack of free capacity only when they
// say Unschedulable: the member would fit there if pods left.
var resourcePlugins = sets.New("NodeResourcesFit", "NUMATopology")

// DRAPlugins are the in-tree DRA plugin's names: kube-scheduler's, and the
// one phalanx runs it under in gang profiles (groupclaims). A gang whose
// members ask for devices is probed without it: the planner's device
// session allocates on every node itself, and the plugin would keep the
// allocation it found for each node in the cycle's state (shared by clones)
// until the gang binds.
var DRAPlugins = []string{names.DynamicResources, groupclaims.Name}

// devicesTaken is how DynamicResources says a node's devices are in use (it
// marks it unresolvable, though devices free up when pods leave).
const devicesTaken = "cannot allocate all claims"

func verdictOf(st *fwk.Status) planner.Verdict {
	if st.IsSuccess() {
		return planner.Verdict{Fits: true}
	}
	resourceOnly := st.Code() == fwk.Unschedulable && resourcePlugins.Has(st.Plugin())
	if slices.Contains(DRAPlugins, st.Plugin()) && slices.Contains(st.Reasons(), devicesTaken) {
		resourceOnly = true
	}
	return planner.Verdict{Plugin: st.Plugin(), Reasons: st.Reasons(), ResourceOnly: resourceOnly}
}

// FreeOn is what the node has left by the scheduler's own accounting.
func FreeOn(ni fwk.NodeInfo) (resources.List, int64) {
	alloc, req := ni.GetAllocatable(), ni.GetRequested()
	free := resources.List{
		v1.ResourceCPU:              alloc.GetMilliCPU() - req.GetMilliCPU(),
		v1.ResourceMemory:           alloc.GetMemory() - req.GetMemory(),
		v1.ResourceEphemeralStorage: alloc.GetEphemeralStorage() - req.GetEphemeralStorage(),
	}
	for name, v := range alloc.GetScalarResources() {
		free[name] = v - req.GetScalarResources()[name]
	}
	return free, int64(alloc.GetAllowedPodNumber() - len(ni.GetPods()))
}
