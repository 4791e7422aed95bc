package gangs

import (
	"k8s.io/utils/ptr"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"

	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/lifecycle"
)

// planInputsChanged reports whether what a gang's plan depends on changed
// between two versions of its group object.
func planInputsChanged(old, cur *gangspec.Spec) bool {
	if gangspec.Quorum(old) != gangspec.Quorum(cur) || old.TopologyKey != cur.TopologyKey ||
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
func (g *Gangs) regroup(ref ident.Ref) {
	var leaves []ident.Ref
	switch ref.Source {
	case ident.SourceWorkload:
		if _, ok := g.CompositeOf(ref); ok {
			leaves = []ident.Ref{ref}
		}
	case ident.SourceComposite:
		if comp := g.Composites(); comp != nil {
			for _, child := range comp.Children(ref.Namespace, ref.Name) {
				leaves = append(leaves, ident.Ref{Source: ident.SourceWorkload, Namespace: child.Namespace, Name: child.Name})
			}
		}
	}
	for _, leaf := range leaves {
		if !g.Lifecycle.Tracks(leaf) || g.Lifecycle.Phase(leaf) != lifecycle.PhaseIdle {
			continue
		}
		for _, m := range g.Members(leaf) {
			g.onPod(m)
		}
		g.Lifecycle.Forget(leaf)
	}
}
