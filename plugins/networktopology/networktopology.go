// Package networktopology is the NetworkTopology plugin: it keeps each gang
// inside one network domain (leaf, spine, InfiniBand cluster), as a hard or a
// soft constraint, from a NetworkTopology object or Volcano HyperNodes. The
// domain is chosen by the gang planner from what really fits; this plugin
// gives the planner the gang's constraint, keeps later members in the gang's
// domain, and scores.
package networktopology

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/apis/config"
	"github.com/phalanx-sched/phalanx/apis/config/validation"
	"github.com/phalanx-sched/phalanx/internal/gang"
	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
	"github.com/phalanx-sched/phalanx/internal/topology"
	"github.com/phalanx-sched/phalanx/plugins/internal/ports"
	"github.com/phalanx-sched/phalanx/plugins/runtime"
)

// Name is the plugin name used in the scheduler configuration.
const Name = "NetworkTopology"

const preScoreKey fwk.StateKey = "phalanx.dev/" + Name + "-score"

// gpuResource counts in a domain's used fraction.
const gpuResource v1.ResourceName = "nvidia.com/gpu"

// Gangs is what this plugin needs of the gang directory.
type Gangs interface {
	GangOf(pod *v1.Pod) (ident.Ref, *gangspec.Spec, bool, error)
	Members(ref ident.Ref) []*v1.Pod
}

// Placed is what this plugin needs of the gang lifecycle.
type Placed interface {
	PlacedNodes(ref ident.Ref) []string
}

// Topologies is what this plugin needs of the process topology.
type Topologies interface {
	View() (*topology.Tree, int)
	ForKeys(keys ...string) *topology.Tree
}

// NetworkTopology gives the planner the gang's constraint and scores nodes.
type NetworkTopology struct {
	// usage keeps the domains' usage for pods outside gangs across cycles.
	usage  *usageCache
	h      fwk.Handle
	gangs  Gangs
	placed Placed
	topo   Topologies

	// domainNodes caches the node set of a domain for PreFilter results,
	// for the tree it was computed from: every member of a big gang asks
	// for the same set. The framework only reads PreFilter results.
	mu          sync.Mutex
	domainTree  *topology.Tree
	domainNodes map[string]sets.Set[string]
}

var (
	_ fwk.PreFilterPlugin   = &NetworkTopology{}
	_ fwk.PreScorePlugin    = &NetworkTopology{}
	_ fwk.ScorePlugin       = &NetworkTopology{}
	_ fwk.EnqueueExtensions = &NetworkTopology{}
)

// Factory returns the plugin factory over the process runtime.
func Factory(rt *runtime.Runtime) func(context.Context, k8sruntime.Object, fwk.Handle) (fwk.Plugin, error) {
	return func(ctx context.Context, obj k8sruntime.Object, h fwk.Handle) (fwk.Plugin, error) {
		args, ok := obj.(*config.NetworkTopologyArgs)
		if !ok {
			return nil, fmt.Errorf("want args of type NetworkTopologyArgs, got %T", obj)
		}
		if err := validation.ValidateNetworkTopologyArgs(field.NewPath("pluginConfig").Key(Name).Child("args"), args); err != nil {
			return nil, fmt.Errorf("profile %q: %w", h.ProfileName(), err)
		}
		fw := ports.Of(h)
		gangs, err := rt.Gangs(fw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", Name, err)
		}
		topo, err := rt.Topology(fw, args.TopologyName, args.UseHyperNodes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", Name, err)
		}
		return New(h, gangs, gangs.Lifecycle, topo), nil
	}
}

// New builds the plugin over its dependencies.
func New(h fwk.Handle, gangs Gangs, placed Placed, topo Topologies) *NetworkTopology {
	return &NetworkTopology{h: h, gangs: gangs, placed: placed, topo: topo, usage: &usageCache{}}
}

// Name returns the plugin name.
func (pl *NetworkTopology) Name() string { return Name }

// constraintOf returns the gang's topology and constraint: the required or
// preferred level of its annotations (group object, else pod), else the
// node label of an upstream PodGroup's constraint as a one-level topology;
// for a gang of sub-groups, the level of each sub-group's domain too.
func (pl *NetworkTopology) constraintOf(spec *gangspec.Spec, pod *v1.Pod) gang.Constraint {
	tree, _ := pl.topo.View()
	required, preferred := gangspec.TopologyConstraint(spec.Annotations, pod.Annotations)
	sg := spec.SubGroups
	if required == "" && preferred == "" && (spec.TopologyKey != "" || sg != nil && sg.Key != "") {
		// An upstream gang: its keys (the gang's, then its sub-groups')
		// are the levels, widest first.
		var keys []string
		if spec.TopologyKey != "" {
			keys = append(keys, spec.TopologyKey)
		}
		if sg != nil && sg.Key != "" && sg.Key != spec.TopologyKey {
			keys = append(keys, sg.Key)
		}
		t := pl.topo.ForKeys(keys...)
		c := gang.Constraint{Tree: t}
		if levels := t.Levels(); len(levels) == len(keys) {
			if spec.TopologyKey != "" {
				c.Required = levels[0]
			}
			if sg != nil && sg.Key != "" {
				c.SubRequired = levels[len(levels)-1]
			}
		}
		return c
	}
	c := gang.Constraint{Tree: tree, Required: required, Preferred: preferred}
	if sg != nil {
		c.SubRequired, c.SubPreferred = sg.Required, sg.Preferred
		c.SubErr = subLevelProblem(tree, c)
	}
	return c
}

// subLevelProblem says why a gang of sub-groups cannot use its sub-groups'
// level: not defined, or not inside the gang's own level. "" when fine.
func subLevelProblem(tree *topology.Tree, c gang.Constraint) string {
	sub := c.SubRequired + c.SubPreferred
	if tree == nil {
		return fmt.Sprintf("sub-group level %q: no NetworkTopology (or HyperNodes) defines levels", sub)
	}
	levels := tree.Levels()
	si := slices.Index(levels, sub)
	if si < 0 {
		return fmt.Sprintf("sub-group level %q is not defined (levels: %s)", sub, strings.Join(levels, ", "))
	}
	if gl := c.Required + c.Preferred; gl != "" {
		if gi := slices.Index(levels, gl); gi >= 0 && si <= gi {
			return fmt.Sprintf("sub-group level %q is not inside the gang's level %q (levels, widest first: %s)", sub, gl, strings.Join(levels, ", "))
		}
	}
	return ""
}

// PreFilter gives the planner the gang's constraint for this cycle and keeps
// members of a gang with a required level inside the domain of the members
// already placed (scale-out, replacements, a replan after a restart); a
// member of a sub-group with a required level, inside its sub-group's
// domain when the sub-group has bound members (a replacement).
func (pl *NetworkTopology) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	ref, spec, ok, err := pl.gangs.GangOf(pod)
	if !ok || err != nil {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	c := pl.constraintOf(spec, pod)
	state.Write(stateKey, &cycleState{Constraint: c})
	tree, _ := c.Tree.(*topology.Tree)
	if tree == nil {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	if c.SubRequired != "" && c.SubErr == "" {
		// The sub-group's domain lies inside the gang's.
		if domain := pl.subGroupDomain(tree, c.SubRequired, ref, spec, pod); domain != "" {
			return &fwk.PreFilterResult{NodeNames: pl.nodesOf(tree, c.SubRequired, domain)}, nil
		}
	}
	if c.Required == "" {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	domain, _ := planner.PlacedDomain(tree, c.Required, pl.placed.PlacedNodes(ref))
	if domain == "" {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return &fwk.PreFilterResult{NodeNames: pl.nodesOf(tree, c.Required, domain)}, nil
}

// subGroupDomain is the domain at level of the pod's sub-group's bound
// members, "" when it has none (its sub-group is planned whole, and a plan
// steers each member).
func (pl *NetworkTopology) subGroupDomain(tree *topology.Tree, level string, ref ident.Ref, spec *gangspec.Spec, pod *v1.Pod) string {
	sg := spec.SubGroups
	if sg == nil || sg.Of == nil {
		return ""
	}
	own := sg.Of(pod)
	if own == "" {
		return ""
	}
	_, in := gangspec.BoundBySubGroup(spec, pl.gangs.Members(ref), tree, slices.Index(tree.Levels(), level))
	return in[own]
}

// nodesOf returns the nodes of a domain as a set, shared between cycles.
func (pl *NetworkTopology) nodesOf(tree *topology.Tree, level, domain string) sets.Set[string] {
	key := level + "/" + domain
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.domainTree != tree {
		pl.domainTree, pl.domainNodes = tree, map[string]sets.Set[string]{}
	}
	nodes, ok := pl.domainNodes[key]
	if !ok {
		nodes = sets.New(tree.Nodes(level, domain)...)
		pl.domainNodes[key] = nodes
	}
	return nodes
}

// PreFilterExtensions returns nil.
func (pl *NetworkTopology) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// scoreState is what PreScore computed for Score.
type scoreState struct {
	tree *topology.Tree
	// occupied[level] holds the domains of the gang's placed members.
	occupied []sets.Set[string]
	// used maps a domain of the packing level to its used fraction.
	packLevel int
	used      map[string]float64
}

func (s *scoreState) Clone() fwk.StateData { return s }

// PreScore prepares scoring: for gang members, the domains of their placed
// siblings; for other pods, how used each domain is, so they fill fragmented
// domains and leave whole ones to gangs.
func (pl *NetworkTopology) PreScore(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	t, packLevel := pl.topo.View()
	if t == nil || len(t.Levels()) == 0 {
		return fwk.NewStatus(fwk.Skip)
	}
	st := &scoreState{tree: t, packLevel: -1}
	if ref, _, ok, err := pl.gangs.GangOf(pod); ok && err == nil {
		placed := pl.placed.PlacedNodes(ref)
		if len(placed) == 0 {
			return fwk.NewStatus(fwk.Skip)
		}
		st.occupied = make([]sets.Set[string], len(t.Levels()))
		for i := range st.occupied {
			st.occupied[i] = sets.New[string]()
		}
		for _, n := range placed {
			for i, d := range t.Domains(n) {
				if d != "" {
					st.occupied[i].Insert(d)
				}
			}
		}
	} else {
		if packLevel < 0 {
			return fwk.NewStatus(fwk.Skip)
		}
		all, err := pl.h.SnapshotSharedLister().NodeInfos().List()
		if err != nil {
			return fwk.AsStatus(err)
		}
		st.packLevel = packLevel
		st.used = pl.usage.of(t, packLevel, all)
	}
	state.Write(preScoreKey, st)
	return nil
}

// Score: gang members score by how narrow a domain they share with placed
// siblings; other pods score by how used the node's domain is.
func (pl *NetworkTopology) Score(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	d, err := state.Read(preScoreKey)
	if err != nil {
		return 0, nil
	}
	st := d.(*scoreState)
	domains := st.tree.Domains(nodeInfo.Node().Name)
	if st.occupied != nil {
		for li := len(st.occupied) - 1; li >= 0; li-- {
			if li < len(domains) && domains[li] != "" && st.occupied[li].Has(domains[li]) {
				return int64(li+1) * fwk.MaxScore / int64(len(st.occupied)), nil
			}
		}
		return 0, nil
	}
	if st.packLevel < 0 || st.packLevel >= len(domains) {
		return 0, nil
	}
	return int64(st.used[domains[st.packLevel]] * float64(fwk.MaxScore)), nil
}

// ScoreExtensions returns nil: scores are already in range.
func (pl *NetworkTopology) ScoreExtensions() fwk.ScoreExtensions { return nil }

// EventsToRegister: new or relabelled nodes can open a domain. Topology
// object changes reach waiting gangs through the runtime.
func (pl *NetworkTopology) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel}},
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}},
	}, nil
}
