package sim

import (
	"context"
	"fmt"

	schedulingv1alpha2 "k8s.io/api/scheduling/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// upstreamTemplate names the one PodGroupTemplate of a job's Workload.
const upstreamTemplate = "workers"

// createUpstreamGang creates job j as upstream's workload-aware scheduling
// sees a gang (the objects a job controller would create): a Workload with one
// gang template of minMember and its runtime PodGroup. A required network
// level becomes the group's topology constraint on that level's node label
// (the in-tree plugin has no hierarchy: one key, one placement per value).
func (d *driver) createUpstreamGang(ctx context.Context, j Job) error {
	policy := schedulingv1alpha2.PodGroupSchedulingPolicy{Gang: &schedulingv1alpha2.GangSchedulingPolicy{MinCount: j.MinMember}}
	var constraints *schedulingv1alpha2.PodGroupSchedulingConstraints
	if level := j.requiredLevel(); level != "" {
		if l := d.sc.level(level); l != nil {
			constraints = &schedulingv1alpha2.PodGroupSchedulingConstraints{Topology: []schedulingv1alpha2.TopologyConstraint{{Key: l.NodeLabel}}}
		}
	}
	ns := j.namespace()
	wl := &schedulingv1alpha2.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: j.Name, Namespace: ns},
		Spec: schedulingv1alpha2.WorkloadSpec{PodGroupTemplates: []schedulingv1alpha2.PodGroupTemplate{{
			Name: upstreamTemplate, SchedulingPolicy: policy, SchedulingConstraints: constraints,
		}}},
	}
	if _, err := d.c.Client.SchedulingV1alpha2().Workloads(ns).Create(ctx, wl, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating upstream Workload %s: %w", j.Name, err)
	}
	pg := &schedulingv1alpha2.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: j.Name, Namespace: ns},
		Spec: schedulingv1alpha2.PodGroupSpec{
			PodGroupTemplateRef: &schedulingv1alpha2.PodGroupTemplateReference{Workload: &schedulingv1alpha2.WorkloadPodGroupTemplateReference{
				WorkloadName: j.Name, PodGroupTemplateName: upstreamTemplate,
			}},
			SchedulingPolicy:      policy,
			SchedulingConstraints: constraints,
		},
	}
	if _, err := d.c.Client.SchedulingV1alpha2().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating upstream PodGroup %s: %w", j.Name, err)
	}
	return nil
}
