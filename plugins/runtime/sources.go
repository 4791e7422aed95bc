package runtime

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"

	"github.com/phalanx-sched/phalanx/internal/gang"
	"github.com/phalanx-sched/phalanx/internal/workload"
)

// A pod's gang and its definition, from every gang source: the adapters of
// internal/workload over this process's informers, the CompositePodGroups
// a Workload API PodGroup belongs to, and sub-groups declared on pods.

// resolve finds a pod's gang with workload.GangOf — the one precedence of
// gang sources, shared with the controller: the scheduler-plugins PodGroup
// label, else spec.schedulingGroup (upstream Workload API), else the
// implicit-gang annotations. An invalid annotation is an error: the pod
// belongs to a gang that cannot be formed.
func (g *Gangs) resolve(pod *v1.Pod) (gang.Ref, *workload.Implicit, bool, error) {
	ref, implicit, ok, err := g.leafRef(pod)
	if ok && err == nil && ref.Source == gang.SourceWorkload {
		if root, isComposite := g.compositeOf(ref); isComposite {
			return root, nil, true, nil
		}
	}
	return ref, implicit, ok, err
}

// leafRef is the group object a pod names itself (the PodGroup of a
// CompositePodGroup's sub-group, not the composite): the key the member
// index keeps pods under, whatever informer event comes first.
func (g *Gangs) leafRef(pod *v1.Pod) (gang.Ref, *workload.Implicit, bool, error) {
	r, err := workload.GangOf(pod)
	if err != nil {
		return gang.Ref{}, nil, true, err
	}
	switch r.Source {
	case workload.SourceNone:
		return gang.Ref{}, nil, false, nil
	case workload.SourceWorkloadAPI:
		return gang.Ref{Source: gang.SourceWorkload, Namespace: r.Namespace, Name: r.Name}, nil, true, nil
	}
	return gang.Ref{Namespace: r.Namespace, Name: r.Name}, r.Implicit, true, nil
}

// compositeOf is the gang CompositePodGroup an upstream PodGroup belongs
// to, where the API server serves CompositePodGroups: its PodGroups are
// that gang's sub-groups.
func (g *Gangs) compositeOf(leaf gang.Ref) (gang.Ref, bool) {
	up, comp := g.upstream.Load(), g.composites.Load()
	if up == nil || comp == nil {
		return gang.Ref{}, false
	}
	pg, err := up.PodGroups.PodGroups(leaf.Namespace).Get(leaf.Name)
	if err != nil {
		return gang.Ref{}, false
	}
	parent := workload.ParentOf(pg)
	if parent == "" {
		return gang.Ref{}, false
	}
	cpg, err := comp.Lister.CompositePodGroups(leaf.Namespace).Get(parent)
	if err != nil || !workload.IsGang(cpg) {
		return gang.Ref{}, false
	}
	return gang.Ref{Source: gang.SourceComposite, Namespace: leaf.Namespace, Name: parent}, true
}

// Spec returns the gang's definition; a NotFound error when its group object
// does not exist (yet), or its API is not served.
func (g *Gangs) Spec(ref gang.Ref) (*gang.Spec, error) {
	spec, err := g.adapter(ref.Source).Spec(ref.Namespace, ref.Name)
	if err != nil {
		return nil, err
	}
	g.addSubGroups(spec)
	return spec, nil
}

// addSubGroups reads a gang's sub-group annotations: on its group object,
// else on its members' pod template (operators that make the PodGroup
// themselves copy nothing of ours onto it). Invalid ones are kept as an
// error the planner reports.
func (g *Gangs) addSubGroups(spec *gang.Spec) {
	if spec.SubGroups != nil {
		return
	}
	g.mu.Lock()
	podAnnotations := g.memberAnnotations[spec.Ref]
	g.mu.Unlock()
	sg, err := workload.SubGroupsByRank(spec.Annotations, podAnnotations, spec.MinMember)
	if err != nil {
		sg = &gang.SubGroups{Err: err.Error()}
	}
	spec.SubGroups = sg
}

// noteMemberAnnotations keeps a member's annotations when they declare
// sub-groups, for addSubGroups.
func (g *Gangs) noteMemberAnnotations(ref gang.Ref, pod *v1.Pod) {
	if pod.Annotations[phalanxv1alpha1.SubGroupSizeAnnotation] == "" {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.memberAnnotations[ref]; !ok {
		g.memberAnnotations[ref] = pod.Annotations
	}
}

// adapter reads the gangs of a source.
func (g *Gangs) adapter(source gang.Source) workload.Adapter {
	switch source {
	case gang.SourceWorkload:
		if up := g.upstream.Load(); up != nil {
			return *up
		}
		return workload.Upstream{}
	case gang.SourceComposite:
		if c := g.composites.Load(); c != nil {
			return *c
		}
		return workload.Composites{}
	}
	return g.podGroups
}

// WatchesWorkloadAPI reports whether the API server serves the upstream
// Workload API now (as far as the last look found: see workloadAPI).
func (g *Gangs) WatchesWorkloadAPI() bool { return g.upstream.Load() != nil }

// specOf reads a group object any adapter's informer delivered.
func (g *Gangs) specOf(obj any) *gang.Spec {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	for _, source := range []gang.Source{gang.SourcePodGroup, gang.SourceWorkload, gang.SourceComposite} {
		if s := g.adapter(source).SpecOf(obj); s != nil {
			g.addSubGroups(s)
			return s
		}
	}
	return nil
}

// planInputsChanged reports whether what a gang's plan depends on changed
// between two versions of its group object.
func planInputsChanged(old, cur *gang.Spec) bool {
	if gang.Quorum(old) != gang.Quorum(cur) || old.TopologyKey != cur.TopologyKey ||
		!ptr.Equal(old.Priority, cur.Priority) || old.NeverPreempts != cur.NeverPreempts {
		return true
	}
	for _, key := range []string{phalanxv1alpha1.TopologyRequiredAnnotation, phalanxv1alpha1.TopologyPreferredAnnotation,
		phalanxv1alpha1.SubGroupSizeAnnotation, phalanxv1alpha1.SubGroupMinAnnotation,
		phalanxv1alpha1.SubGroupTopologyRequiredAnnotation, phalanxv1alpha1.SubGroupTopologyPreferredAnnotation} {
		if old.Annotations[key] != cur.Annotations[key] {
			return true
		}
	}
	return false
}

// regroup files a group's members again under the gang they belong to now:
// a PodGroup that turns out to be a CompositePodGroup's sub-group (whichever
// of the two the informers delivered first), or a composite's PodGroups.
func (g *Gangs) regroup(ref gang.Ref) {
	var leaves []gang.Ref
	switch ref.Source {
	case gang.SourceWorkload:
		if _, ok := g.compositeOf(ref); ok {
			leaves = []gang.Ref{ref}
		}
	case gang.SourceComposite:
		if comp := g.composites.Load(); comp != nil {
			for _, child := range comp.Children(ref.Namespace, ref.Name) {
				leaves = append(leaves, gang.Ref{Source: gang.SourceWorkload, Namespace: child.Namespace, Name: child.Name})
			}
		}
	}
	for _, leaf := range leaves {
		if !g.Lifecycle.Tracks(leaf) || g.Lifecycle.Phase(leaf) != gang.PhaseIdle {
			continue
		}
		for _, m := range g.Members(leaf) {
			g.onPod(m)
		}
		g.Lifecycle.Forget(leaf)
	}
}
