package sim

import (
	"context"
	"fmt"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
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
	policy := schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: j.MinMember}}
	var constraints *schedulingv1beta1.PodGroupSchedulingConstraints
	if level := j.requiredLevel(); level != "" {
		if l := d.sc.level(level); l != nil {
			constraints = &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{Key: l.NodeLabel}}}
		}
	}
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
