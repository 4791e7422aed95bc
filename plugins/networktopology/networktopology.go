// Package networktopology is the NetworkTopology plugin: it keeps each gang
// inside one network domain (leaf, spine, InfiniBand cluster), as a hard or a
// soft constraint, from a NetworkTopology object or Volcano HyperNodes. The
// domain is chosen by the gang planner from what really fits; this plugin
// supplies the levels, keeps later members in the gang's domain, and scores.
package networktopology

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/phalanx-sched/phalanx/apis/config"
	"github.com/phalanx-sched/phalanx/apis/config/validation"
	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/gang"
	"github.com/phalanx-sched/phalanx/internal/topology"
	phalanxclientset "github.com/phalanx-sched/phalanx/pkg/generated/clientset/versioned"
	phalanxinformers "github.com/phalanx-sched/phalanx/pkg/generated/informers/externalversions"
	phalanxlisters "github.com/phalanx-sched/phalanx/pkg/generated/listers/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/plugins/shared"
)

// Name is the plugin name used in the scheduler configuration.
const Name = "NetworkTopology"

const preScoreKey fwk.StateKey = "phalanx.dev/" + Name

// NetworkTopology supplies network levels to the gang planner and scores nodes.
type NetworkTopology struct {
	h     fwk.Handle
	s     *shared.State
	name  string
	nodes corelisters.NodeLister
	topos phalanxlisters.NetworkTopologyLister
	// hyperNodes is nil unless HyperNodes are read.
	hyperNodes cache.GenericLister

	mu        sync.Mutex
	tree      *topology.Tree
	packLevel int
	dirty     bool
}

var (
	_ fwk.PreFilterPlugin   = &NetworkTopology{}
	_ fwk.PreScorePlugin    = &NetworkTopology{}
	_ fwk.ScorePlugin       = &NetworkTopology{}
	_ fwk.EnqueueExtensions = &NetworkTopology{}
	_ shared.Topology       = &NetworkTopology{}
)

// New builds the plugin from validated args.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, ok := obj.(*config.NetworkTopologyArgs)
	if !ok {
		return nil, fmt.Errorf("want args of type NetworkTopologyArgs, got %T", obj)
	}
	if err := validation.ValidateNetworkTopologyArgs(field.NewPath("pluginConfig").Key(Name).Child("args"), args); err != nil {
		return nil, fmt.Errorf("profile %q: %w", h.ProfileName(), err)
	}
	s, err := shared.Get(ctx, h)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	cfg := shared.CRDConfig(h.KubeConfig())
	if err := shared.RequireAPI(cfg, phalanxv1alpha1.SchemeGroupVersion.String(), "networktopologies"); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	client, err := phalanxclientset.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	pl := &NetworkTopology{h: h, s: s, name: args.TopologyName, dirty: true,
		nodes: h.SharedInformerFactory().Core().V1().Nodes().Lister()}

	invalidate := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { pl.invalidate(true) },
		UpdateFunc: func(any, any) { pl.invalidate(true) },
		DeleteFunc: func(any) { pl.invalidate(true) },
	}
	factory := phalanxinformers.NewSharedInformerFactory(client, 0)
	topoInformer := factory.Scheduling().V1alpha1().NetworkTopologies()
	pl.topos = topoInformer.Lister()
	if _, err := topoInformer.Informer().AddEventHandler(invalidate); err != nil {
		return nil, err
	}
	var dynFactory dynamicinformer.DynamicSharedInformerFactory
	if args.UseHyperNodes && shared.RequireAPI(cfg, topology.HyperNodeGVR.GroupVersion().String(), topology.HyperNodeGVR.Resource) == nil {
		dc, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		dynFactory = dynamicinformer.NewDynamicSharedInformerFactory(dc, 0)
		hn := dynFactory.ForResource(topology.HyperNodeGVR)
		pl.hyperNodes = hn.Lister()
		if _, err := hn.Informer().AddEventHandler(invalidate); err != nil {
			return nil, err
		}
		klog.FromContext(ctx).Info("Reading Volcano HyperNodes for network topology")
	}
	// Node label changes move nodes between domains.
	if _, err := h.SharedInformerFactory().Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { pl.invalidate(false) },
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*v1.Node)
			n, ok2 := newObj.(*v1.Node)
			if !ok1 || !ok2 || !labels.Equals(o.Labels, n.Labels) {
				pl.invalidate(false)
			}
		},
		DeleteFunc: func(any) { pl.invalidate(false) },
	}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	if dynFactory != nil {
		dynFactory.Start(ctx.Done())
		dynFactory.WaitForCacheSync(ctx.Done())
	}
	s.SetTopology(pl)
	return pl, nil
}

// Name returns the plugin name.
func (pl *NetworkTopology) Name() string { return Name }

// invalidate marks the tree stale. A topology change may let failed gangs fit
// (or no longer), so their cached failures are dropped and they are woken.
func (pl *NetworkTopology) invalidate(topologyChanged bool) {
	pl.mu.Lock()
	pl.dirty = true
	pl.mu.Unlock()
	if topologyChanged {
		pl.s.Gangs.Bump()
		pl.s.CapacityFreed()
	}
}

// Tree returns the current topology, rebuilt when nodes or topology objects
// changed; nil when none is defined.
func (pl *NetworkTopology) Tree() *topology.Tree {
	t, _ := pl.view()
	return t
}

// view returns the tree and its packing level, rebuilding both when stale.
func (pl *NetworkTopology) view() (*topology.Tree, int) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.dirty {
		pl.dirty = false
		pl.tree = pl.build()
		pl.packLevel = -1
		if pl.tree != nil {
			pl.packLevel = packingLevel(pl.tree)
		}
	}
	return pl.tree, pl.packLevel
}

func (pl *NetworkTopology) build() *topology.Tree {
	nodes, err := pl.nodes.List(labels.Everything())
	if err != nil {
		return nil
	}
	if nt, err := pl.topos.Get(pl.name); err == nil {
		levels := make([]topology.Level, len(nt.Spec.Levels))
		for i, l := range nt.Spec.Levels {
			levels[i] = topology.Level{Name: l.Name, NodeLabel: l.NodeLabel}
		}
		return topology.FromLevels(levels, nodes)
	} else if !apierrors.IsNotFound(err) {
		return nil
	}
	if pl.hyperNodes != nil {
		objs, err := pl.hyperNodes.List(labels.Everything())
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
	return nil
}

// constraint returns the gang's required and preferred levels: from the
// PodGroup, else from the pod (pod templates propagate through operators).
func constraint(pg *pgv1alpha1.PodGroup, pod *v1.Pod) (required, preferred string) {
	for _, a := range []map[string]string{pgAnnotations(pg), pod.Annotations} {
		if required == "" {
			required = a[phalanxv1alpha1.TopologyRequiredAnnotation]
		}
		if preferred == "" {
			preferred = a[phalanxv1alpha1.TopologyPreferredAnnotation]
		}
	}
	return required, preferred
}

func pgAnnotations(pg *pgv1alpha1.PodGroup) map[string]string {
	if pg == nil {
		return nil
	}
	return pg.Annotations
}

// Constrain implements shared.Topology for the gang planner.
func (pl *NetworkTopology) Constrain(pg *pgv1alpha1.PodGroup, pod *v1.Pod, placedNodes []string, req *gang.Request) string {
	required, preferred := constraint(pg, pod)
	req.Required, req.Preferred = required, preferred
	t := pl.Tree()
	if t == nil {
		// A required level with no topology defined is reported by the
		// planner as an unknown level; a preferred one is ignored.
		return describe(required, preferred)
	}
	req.Levels = t.Levels()
	for i := range req.Nodes {
		req.Nodes[i].Domains = t.Domains(req.Nodes[i].Name)
	}
	if domain, li := placedDomain(t, required, placedNodes); domain != "" {
		kept := req.Nodes[:0]
		for _, n := range req.Nodes {
			if li < len(n.Domains) && n.Domains[li] == domain {
				kept = append(kept, n)
			}
		}
		req.Nodes = kept
	}
	return describe(required, preferred)
}

func describe(required, preferred string) string {
	switch {
	case required != "":
		return "required " + required
	case preferred != "":
		return "preferred " + preferred
	}
	return ""
}

// placedDomain is the domain at the required level of the gang's placed
// members, so that later members (scale-out, replacements, a replan after a
// restart) join them.
func placedDomain(t *topology.Tree, required string, placedNodes []string) (string, int) {
	if required == "" || len(placedNodes) == 0 {
		return "", -1
	}
	li := slices.Index(t.Levels(), required)
	if li < 0 {
		return "", -1
	}
	sort.Strings(placedNodes)
	for _, n := range placedNodes {
		if d := t.Domains(n); li < len(d) && d[li] != "" {
			return d[li], li
		}
	}
	return "", -1
}

// placedNodes returns the nodes of a gang's bound and reserved members.
func (pl *NetworkTopology) placedNodes(key string) []string {
	var out []string
	for _, m := range pl.s.Members(key) {
		if m.Spec.NodeName != "" && m.DeletionTimestamp == nil {
			out = append(out, m.Spec.NodeName)
		}
	}
	return append(out, pl.s.Gangs.ReservedNodes(key)...)
}

// PreFilter keeps members of a gang with a required level inside the domain
// of the members already placed (the planner does the same for new plans).
func (pl *NetworkTopology) PreFilter(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	key := shared.GangKey(pod)
	if key == "" {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	pg, _ := pl.s.PodGroup(key)
	required, _ := constraint(pg, pod)
	if required == "" {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	t := pl.Tree()
	if t == nil {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	domain, _ := placedDomain(t, required, pl.placedNodes(key))
	if domain == "" {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return &fwk.PreFilterResult{NodeNames: sets.New(t.Nodes(required, domain)...)}, nil
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
	t, packLevel := pl.view()
	if t == nil || len(t.Levels()) == 0 {
		return fwk.NewStatus(fwk.Skip)
	}
	st := &scoreState{tree: t, packLevel: -1}
	if key := shared.GangKey(pod); key != "" {
		placed := pl.placedNodes(key)
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
		all, err := pl.h.SnapshotSharedLister().NodeInfos().List()
		if err != nil {
			return fwk.AsStatus(err)
		}
		if packLevel < 0 {
			return fwk.NewStatus(fwk.Skip)
		}
		st.packLevel = packLevel
		st.used = domainUsage(t, packLevel, all)
	}
	state.Write(preScoreKey, st)
	return nil
}

// packingLevel is the narrowest level that groups several nodes: a level of
// one node per domain (the host level) says nothing about fragmentation.
func packingLevel(t *topology.Tree) int {
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

// domainUsage returns, per domain of the level, the larger of its CPU and GPU
// used fractions.
func domainUsage(t *topology.Tree, li int, nodes []fwk.NodeInfo) map[string]float64 {
	type acc struct{ cpuUsed, cpuAll, gpuUsed, gpuAll int64 }
	sums := map[string]*acc{}
	for _, ni := range nodes {
		d := t.Domains(ni.Node().Name)
		if li >= len(d) || d[li] == "" {
			continue
		}
		a := sums[d[li]]
		if a == nil {
			a = &acc{}
			sums[d[li]] = a
		}
		a.cpuUsed += ni.GetRequested().GetMilliCPU()
		a.cpuAll += ni.GetAllocatable().GetMilliCPU()
		a.gpuUsed += ni.GetRequested().GetScalarResources()[gpuResource]
		a.gpuAll += ni.GetAllocatable().GetScalarResources()[gpuResource]
	}
	out := make(map[string]float64, len(sums))
	for d, a := range sums {
		f := 0.0
		if a.cpuAll > 0 {
			f = float64(a.cpuUsed) / float64(a.cpuAll)
		}
		if a.gpuAll > 0 {
			if g := float64(a.gpuUsed) / float64(a.gpuAll); g > f {
				f = g
			}
		}
		out[d] = f
	}
	return out
}

const gpuResource v1.ResourceName = "nvidia.com/gpu"

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

// EventsToRegister: new nodes or relabelled nodes can open a domain.
func (pl *NetworkTopology) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel}},
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}},
	}, nil
}
