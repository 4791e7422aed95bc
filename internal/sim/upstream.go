package sim

import (
	"context"
	"fmt"

	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// upstreamTemplate names the one PodGroupTemplate of a job's Workload;
// upstreamComposite the CompositePodGroupTemplate of a job with sub-groups.
const (
	upstreamTemplate  = "workers"
	upstreamComposite = "replicas"
)

// createUpstreamGang creates job j as upstream's workload-aware scheduling
// sees a gang (the objects a job controller would create): a Workload with one
// gang template of minMember and its runtime PodGroup. A required network
// level becomes the group's topology constraint on that level's node label
// (the in-tree plugin has no hierarchy: one key, one placement per value).
// A job with sub-groups is a CompositePodGroup of the gang's level over one
// PodGroup per sub-group, each of the sub-groups' level (1.37's form).
func (d *driver) createUpstreamGang(ctx context.Context, j Job) error {
	if size, _ := d.upstreamSubGroups(j); size > 0 {
		return d.createUpstreamComposite(ctx, j, size)
	}
	policy := schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: j.MinMember}}
	constraints := d.upstreamConstraints(j.requiredLevel())
	ns := j.namespace()
	wl := &schedulingv1beta1.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: j.Name, Namespace: ns},
		Spec: schedulingv1beta1.WorkloadSpec{PodGroupTemplates: []schedulingv1beta1.PodGroupTemplate{{
			Name: upstreamTemplate, SchedulingPolicy: policy, SchedulingConstraints: constraints,
		}}},
	}
	if _, err := d.c.Client.SchedulingV1beta1().Workloads(ns).Create(ctx, wl, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating upstream Workload %s: %w", j.Name, err)
	}
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: j.Name, Namespace: ns},
		Spec: schedulingv1beta1.PodGroupSpec{
			WorkloadRef: &schedulingv1beta1.WorkloadReference{
				WorkloadName: j.Name, TemplateName: upstreamTemplate,
			},
			SchedulingPolicy:      policy,
			SchedulingConstraints: constraints,
		},
	}
	if _, err := d.c.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating upstream PodGroup %s: %w", j.Name, err)
	}
	return nil
}

// upstreamSubGroups is the sub-group size of a job written as a
// CompositePodGroup for upstream-gang (0: a flat gang): whole sub-groups
// of ranked members, a level the scenario defines.
func (d *driver) upstreamSubGroups(j Job) (int, string) {
	size, level := j.subGroups()
	if size <= 0 || !j.Ranks || j.MinMember <= 0 || int(j.MinMember)%size != 0 || d.sc.level(level) == nil {
		return 0, ""
	}
	return size, level
}

// upstreamConstraints is a level as an upstream topology constraint: its
// node label as the key (nil for no level).
func (d *driver) upstreamConstraints(level string) *schedulingv1beta1.PodGroupSchedulingConstraints {
	if l := d.sc.level(level); level != "" && l != nil {
		return &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{Key: l.NodeLabel}}}
	}
	return nil
}

// upstreamSubGroupName is the PodGroup of sub-group k of job j.
func upstreamSubGroupName(j Job, k int) string { return fmt.Sprintf("%s-tp-%d", j.Name, k) }

func (d *driver) createUpstreamComposite(ctx context.Context, j Job, size int) error {
	ns := j.namespace()
	_, subLevel := j.subGroups()
	groups := int(j.MinMember) / size
	policy := schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(size)}}
	subConstraints := d.upstreamConstraints(subLevel)
	var compConstraints *schedulingv1beta1.CompositePodGroupSchedulingConstraints
	var compConstraintsA3 *schedulingv1alpha3.CompositePodGroupSchedulingConstraints
	if c := d.upstreamConstraints(j.requiredLevel()); c != nil {
		compConstraints = &schedulingv1beta1.CompositePodGroupSchedulingConstraints{Topology: c.Topology}
		compConstraintsA3 = &schedulingv1alpha3.CompositePodGroupSchedulingConstraints{
			Topology: []schedulingv1alpha3.TopologyConstraint{{Key: c.Topology[0].Key}}}
	}
	wl := &schedulingv1beta1.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: j.Name, Namespace: ns},
		Spec: schedulingv1beta1.WorkloadSpec{CompositePodGroupTemplates: []schedulingv1beta1.CompositePodGroupTemplate{{
			Name: upstreamComposite,
			SchedulingPolicy: schedulingv1beta1.CompositePodGroupSchedulingPolicy{Gang: &schedulingv1beta1.CompositeGangSchedulingPolicy{
				MinGroupCount: int32(groups)}},
			SchedulingConstraints: compConstraints,
			PodGroupTemplates: []schedulingv1beta1.PodGroupTemplate{{
				Name: upstreamTemplate, SchedulingPolicy: policy, SchedulingConstraints: subConstraints,
			}},
		}}},
	}
	if _, err := d.c.Client.SchedulingV1beta1().Workloads(ns).Create(ctx, wl, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating upstream Workload %s: %w", j.Name, err)
	}
	cpg := &schedulingv1alpha3.CompositePodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: j.Name, Namespace: ns},
		Spec: schedulingv1alpha3.CompositePodGroupSpec{
			WorkloadRef: &schedulingv1alpha3.WorkloadReference{WorkloadName: j.Name, TemplateName: upstreamComposite},
			SchedulingPolicy: schedulingv1alpha3.CompositePodGroupSchedulingPolicy{Gang: &schedulingv1alpha3.CompositeGangSchedulingPolicy{
				MinGroupCount: int32(groups)}},
			SchedulingConstraints: compConstraintsA3,
		},
	}
	if _, err := d.c.Client.SchedulingV1alpha3().CompositePodGroups(ns).Create(ctx, cpg, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating upstream CompositePodGroup %s (is scheduling.k8s.io/v1alpha3 served?): %w", j.Name, err)
	}
	for k := 0; k < groups; k++ {
		pg := &schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: upstreamSubGroupName(j, k), Namespace: ns},
			Spec: schedulingv1beta1.PodGroupSpec{
				ParentCompositePodGroupName: ptr.To(j.Name),
				WorkloadRef:                 &schedulingv1beta1.WorkloadReference{WorkloadName: j.Name, TemplateName: upstreamTemplate},
				SchedulingPolicy:            policy,
				SchedulingConstraints:       subConstraints,
			},
		}
		created, err := d.c.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating upstream PodGroup %s: %w", pg.Name, err)
		}
		if created.Spec.ParentCompositePodGroupName == nil {
			return fmt.Errorf("the API server dropped parentCompositePodGroupName of %s: is the CompositePodGroup gate on?", pg.Name)
		}
	}
	return nil
}

// upstreamGroupOf is the upstream PodGroup pod i of job j belongs to.
func (d *driver) upstreamGroupOf(j Job, i int) string {
	if size, _ := d.upstreamSubGroups(j); size > 0 {
		return upstreamSubGroupName(j, i/size)
	}
	return j.Name
}
