package workload

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	schedulinglistersv1alpha3 "k8s.io/client-go/listers/scheduling/v1alpha3"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
)

// Composites is the adapter of the Workload API's CompositePodGroups
// (scheduling.k8s.io/v1alpha3, alpha in 1.37). A CompositePodGroup with a
// gang policy is a phalanx gang of sub-groups: each PodGroup whose
// parentCompositePodGroupName names it is one sub-group (its minCount the
// sub-group's size, its topology key the sub-groups' level), and
// minGroupCount of them must start together, inside the composite's own
// topology key. Children lists the PodGroups of a parent.
type Composites struct {
	Lister   schedulinglistersv1alpha3.CompositePodGroupLister
	Children func(namespace, parent string) []*schedulingv1beta1.PodGroup
}

var _ Adapter = Composites{}

// Source implements Adapter.
func (Composites) Source() ident.Source { return ident.SourceComposite }

// Spec implements Adapter.
func (a Composites) Spec(namespace, name string) (*gangspec.Spec, error) {
	if a.Lister == nil {
		return nil, apierrors.NewNotFound(schedulingv1alpha3.Resource("compositepodgroups"), name)
	}
	cpg, err := a.Lister.CompositePodGroups(namespace).Get(name)
	if err != nil {
		return nil, err
	}
	return SpecFromComposite(cpg, a.children(namespace, name)), nil
}

// SpecOf implements Adapter.
func (a Composites) SpecOf(obj any) *gangspec.Spec {
	cpg, ok := obj.(*schedulingv1alpha3.CompositePodGroup)
	if !ok {
		return nil
	}
	return SpecFromComposite(cpg, a.children(cpg.Namespace, cpg.Name))
}

func (a Composites) children(namespace, parent string) []*schedulingv1beta1.PodGroup {
	if a.Children == nil {
		return nil
	}
	return a.Children(namespace, parent)
}

// IsGang reports whether a CompositePodGroup schedules its groups together.
func IsGang(cpg *schedulingv1alpha3.CompositePodGroup) bool {
	return cpg.Spec.SchedulingPolicy.Gang != nil
}

// SpecFromComposite reads a gang CompositePodGroup and its child PodGroups
// into a gang of sub-groups. Children that differ in size or topology key,
// or that are themselves not gangs, make the sub-groups invalid (an error in
// Spec.SubGroups, which the planner reports).
func SpecFromComposite(cpg *schedulingv1alpha3.CompositePodGroup, children []*schedulingv1beta1.PodGroup) *gangspec.Spec {
	ref := ident.Ref{Source: ident.SourceComposite, Namespace: cpg.Namespace, Name: cpg.Name}
	s := &gangspec.Spec{
		Ref: ref, UID: cpg.UID, Generation: cpg.Generation, Created: cpg.CreationTimestamp.Time,
		Labels: map[string]string{}, Annotations: map[string]string{},
		Priority:      cpg.Spec.Priority,
		NeverPreempts: cpg.Spec.PreemptionPolicy != nil && *cpg.Spec.PreemptionPolicy == schedulingv1alpha3.PreemptNever,
	}
	if q := cpg.Labels[phalanxv1alpha1.QueueLabel]; q != "" {
		s.Labels[phalanxv1alpha1.QueueLabel] = q
	}
	for _, key := range []string{phalanxv1alpha1.TopologyRequiredAnnotation, phalanxv1alpha1.TopologyPreferredAnnotation} {
		if v := cpg.Annotations[key]; v != "" {
			s.Annotations[key] = v
		}
	}
	if d := cpg.Spec.DisruptionMode; d == nil || d.All == nil {
		s.Disruption = gangspec.DisruptSingle
	}
	if c := cpg.Spec.SchedulingConstraints; c != nil && len(c.Topology) > 0 {
		s.TopologyKey = c.Topology[0].Key
	}
	sg := &gangspec.SubGroups{Source: "by PodGroup"}
	s.SubGroups = sg
	groups := 0
	if g := cpg.Spec.SchedulingPolicy.Gang; g != nil {
		groups = int(g.MinGroupCount)
	}
	// By name: the informer's index lists them in no fixed order, and the
	// first one sets the size the others are checked against.
	children = slices.Clone(children)
	slices.SortFunc(children, func(a, b *schedulingv1beta1.PodGroup) int { return strings.Compare(a.Name, b.Name) })
	for i, child := range children {
		size, key := 0, ""
		if g := child.Spec.SchedulingPolicy.Gang; g != nil {
			size = int(g.MinCount)
		}
		if c := child.Spec.SchedulingConstraints; c != nil && len(c.Topology) > 0 {
			key = c.Topology[0].Key
		}
		switch {
		case size < 1:
			sg.Err = fmt.Sprintf("PodGroup %s/%s of CompositePodGroup %s has no gang policy: every sub-group must be a gang", child.Namespace, child.Name, cpg.Name)
		case i == 0:
			sg.Size, sg.Key = size, key
		case size != sg.Size || key != sg.Key:
			sg.Err = fmt.Sprintf("the PodGroups of CompositePodGroup %s differ (%s: minCount %d, topology key %q; %s: minCount %d, topology key %q): phalanx plans sub-groups of one size and one level",
				cpg.Name, children[0].Name, sg.Size, sg.Key, child.Name, size, key)
		}
		if sg.Err != "" {
			break
		}
	}
	sg.Min = groups
	s.MinMember = max(groups*sg.Size, 1)
	name := cpg.Name
	sg.Of = func(p *v1.Pod) string {
		for _, child := range children {
			if g := p.Spec.SchedulingGroup; g != nil && g.PodGroupName != nil && *g.PodGroupName == child.Name && ParentOf(child) == name {
				return child.Name
			}
		}
		return ""
	}
	return s
}

// ParentOf is the CompositePodGroup a PodGroup belongs to, "" for none.
func ParentOf(pg *schedulingv1beta1.PodGroup) string {
	if p := pg.Spec.ParentCompositePodGroupName; p != nil {
		return *p
	}
	return ""
}
