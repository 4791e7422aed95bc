package sim

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/phalanx-sched/phalanx/internal/bench"
	"github.com/phalanx-sched/phalanx/internal/sim/scenario"
)

// upstreamGang is job j as upstream's workload-aware scheduling sees it
// (bench.UpstreamObjects): a required network level becomes the group's
// topology key, that level's node label (the in-tree plugin has no
// hierarchy: one key, one placement per value); a job with whole sub-groups
// of ranked members and a defined level is a CompositePodGroup of the
// gang's level over one PodGroup per sub-group of the sub-groups' level.
func (d *driver) upstreamGang(j scenario.Job) bench.UpstreamObjects {
	u := bench.UpstreamObjects{Namespace: j.EffectiveNamespace(), Name: j.Name, MinCount: j.MinMember, Key: d.levelLabel(j.RequiredLevel())}
	size, level := j.SubGroups()
	if size > 0 && j.Ranks && j.MinMember > 0 && int(j.MinMember)%size == 0 && d.levelLabel(level) != "" {
		u.SubGroupSize, u.SubKey = int32(size), d.levelLabel(level)
	}
	return u
}

// levelLabel is a network level's node label ("" for none or unknown).
func (d *driver) levelLabel(level string) string {
	if l := d.sc.Level(level); level != "" && l != nil {
		return l.NodeLabel
	}
	return ""
}

// createUpstreamGang creates job j's upstream objects, as a job controller
// would: its Workload, then its PodGroup, or its CompositePodGroup and the
// sub-groups' PodGroups.
func (d *driver) createUpstreamGang(ctx context.Context, j scenario.Job) error {
	u := d.upstreamGang(j)
	api := d.c.Client.SchedulingV1beta1()
	if _, err := api.Workloads(u.Namespace).Create(ctx, u.Workload(), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating upstream Workload %s: %w", j.Name, err)
	}
	if u.SubGroupSize == 0 {
		if _, err := api.PodGroups(u.Namespace).Create(ctx, u.PodGroup(), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating upstream PodGroup %s: %w", j.Name, err)
		}
		return nil
	}
	if _, err := d.c.Client.SchedulingV1alpha3().CompositePodGroups(u.Namespace).Create(ctx, u.CompositePodGroup(), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating upstream CompositePodGroup %s (is scheduling.k8s.io/v1alpha3 served?): %w", j.Name, err)
	}
	for _, pg := range u.SubGroups() {
		created, err := api.PodGroups(u.Namespace).Create(ctx, pg, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating upstream PodGroup %s: %w", pg.Name, err)
		}
		if created.Spec.ParentCompositePodGroupName == nil {
			return fmt.Errorf("the API server dropped parentCompositePodGroupName of %s: is the %s gate on?", pg.Name, bench.CompositeGate)
		}
	}
	return nil
}
