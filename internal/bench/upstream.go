package bench

import (
	"fmt"

	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The template names of an UpstreamObjects's Workload: upstreamTemplate is its
// PodGroupTemplate (with sub-groups, the sub-groups' one inside the
// CompositePodGroupTemplate upstreamComposite).
const (
	upstreamTemplate  = "workers"
	upstreamComposite = "replicas"
)

// UpstreamObjects are one gang as upstream's workload-aware scheduling (1.37)
// sees it: the objects a job controller would create. The bench and the
// trace replay write their upstream-gang rows with it.
type UpstreamObjects struct {
	Namespace, Name string
	// MinCount is the gang's members.
	MinCount int32
	// Key is the node label of the gang's topology constraint ("": none).
	Key string
	// SubGroupSize > 0 makes the gang a CompositePodGroup of
	// MinCount/SubGroupSize PodGroups of that many members, each with the
	// topology key SubKey.
	SubGroupSize int32
	SubKey       string
}

// UpstreamSubGroupName is the PodGroup of sub-group k of gang name.
func UpstreamSubGroupName(name string, k int) string { return fmt.Sprintf("%s-tp-%d", name, k) }

// GroupOf is the PodGroup member i (its rank) names in spec.schedulingGroup.
func (u UpstreamObjects) GroupOf(i int) string {
	if u.SubGroupSize > 0 {
		return UpstreamSubGroupName(u.Name, i/int(u.SubGroupSize))
	}
	return u.Name
}

func constraints(key string) *schedulingv1beta1.PodGroupSchedulingConstraints {
	if key == "" {
		return nil
	}
	return &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{Key: key}}}
}

// policy and groupConstraints are one PodGroup's: the gang's, or with
// sub-groups one sub-group's.
func (u UpstreamObjects) policy() schedulingv1beta1.PodGroupSchedulingPolicy {
	n := u.MinCount
	if u.SubGroupSize > 0 {
		n = u.SubGroupSize
	}
	return schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: n}}
}

func (u UpstreamObjects) groupConstraints() *schedulingv1beta1.PodGroupSchedulingConstraints {
	if u.SubGroupSize > 0 {
		return constraints(u.SubKey)
	}
	return constraints(u.Key)
}

// Workload is the gang's Workload: one gang template, or with sub-groups
// one composite template (the gang's key) of one gang template (the
// sub-groups' key).
func (u UpstreamObjects) Workload() *schedulingv1beta1.Workload {
	template := schedulingv1beta1.PodGroupTemplate{Name: upstreamTemplate, SchedulingPolicy: u.policy(), SchedulingConstraints: u.groupConstraints()}
	wl := &schedulingv1beta1.Workload{
		TypeMeta:   metav1.TypeMeta{APIVersion: schedulingv1beta1.SchemeGroupVersion.String(), Kind: "Workload"},
		ObjectMeta: metav1.ObjectMeta{Name: u.Name, Namespace: u.Namespace},
	}
	if u.SubGroupSize == 0 {
		wl.Spec.PodGroupTemplates = []schedulingv1beta1.PodGroupTemplate{template}
		return wl
	}
	composite := schedulingv1beta1.CompositePodGroupTemplate{
		Name: upstreamComposite,
		SchedulingPolicy: schedulingv1beta1.CompositePodGroupSchedulingPolicy{Gang: &schedulingv1beta1.CompositeGangSchedulingPolicy{
			MinGroupCount: u.MinCount / u.SubGroupSize}},
		PodGroupTemplates: []schedulingv1beta1.PodGroupTemplate{template},
	}
	if u.Key != "" {
		composite.SchedulingConstraints = &schedulingv1beta1.CompositePodGroupSchedulingConstraints{
			Topology: []schedulingv1beta1.TopologyConstraint{{Key: u.Key}}}
	}
	wl.Spec.CompositePodGroupTemplates = []schedulingv1beta1.CompositePodGroupTemplate{composite}
	return wl
}

// PodGroup is the runtime PodGroup of a gang without sub-groups.
func (u UpstreamObjects) PodGroup() *schedulingv1beta1.PodGroup {
	return &schedulingv1beta1.PodGroup{
		TypeMeta:   metav1.TypeMeta{APIVersion: schedulingv1beta1.SchemeGroupVersion.String(), Kind: "PodGroup"},
		ObjectMeta: metav1.ObjectMeta{Name: u.Name, Namespace: u.Namespace},
		Spec: schedulingv1beta1.PodGroupSpec{
			WorkloadRef:           &schedulingv1beta1.WorkloadReference{WorkloadName: u.Name, TemplateName: upstreamTemplate},
			SchedulingPolicy:      u.policy(),
			SchedulingConstraints: u.groupConstraints(),
		},
	}
}

// CompositePodGroup is the runtime v1alpha3 CompositePodGroup of a gang of
// sub-groups: all of them (minGroupCount) inside one domain of the gang's key.
func (u UpstreamObjects) CompositePodGroup() *schedulingv1alpha3.CompositePodGroup {
	cpg := &schedulingv1alpha3.CompositePodGroup{
		TypeMeta:   metav1.TypeMeta{APIVersion: schedulingv1alpha3.SchemeGroupVersion.String(), Kind: "CompositePodGroup"},
		ObjectMeta: metav1.ObjectMeta{Name: u.Name, Namespace: u.Namespace},
		Spec: schedulingv1alpha3.CompositePodGroupSpec{
			WorkloadRef: &schedulingv1alpha3.WorkloadReference{WorkloadName: u.Name, TemplateName: upstreamComposite},
			SchedulingPolicy: schedulingv1alpha3.CompositePodGroupSchedulingPolicy{Gang: &schedulingv1alpha3.CompositeGangSchedulingPolicy{
				MinGroupCount: u.MinCount / u.SubGroupSize}},
		},
	}
	if u.Key != "" {
		cpg.Spec.SchedulingConstraints = &schedulingv1alpha3.CompositePodGroupSchedulingConstraints{
			Topology: []schedulingv1alpha3.TopologyConstraint{{Key: u.Key}}}
	}
	return cpg
}

// SubGroups are the runtime PodGroups of the composite's sub-groups.
func (u UpstreamObjects) SubGroups() []*schedulingv1beta1.PodGroup {
	var out []*schedulingv1beta1.PodGroup
	for k := 0; k < int(u.MinCount/u.SubGroupSize); k++ {
		out = append(out, &schedulingv1beta1.PodGroup{
			TypeMeta:   metav1.TypeMeta{APIVersion: schedulingv1beta1.SchemeGroupVersion.String(), Kind: "PodGroup"},
			ObjectMeta: metav1.ObjectMeta{Name: UpstreamSubGroupName(u.Name, k), Namespace: u.Namespace},
			Spec: schedulingv1beta1.PodGroupSpec{
				ParentCompositePodGroupName: ptr.To(u.Name),
				WorkloadRef:                 &schedulingv1beta1.WorkloadReference{WorkloadName: u.Name, TemplateName: upstreamTemplate},
				SchedulingPolicy:            u.policy(),
				SchedulingConstraints:       u.groupConstraints(),
			},
		})
	}
	return out
}
