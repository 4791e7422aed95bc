package plane

import (
	"strconv"

	v1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/phalanx-sched/phalanx/internal/global"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// memberOf is the tier's view of a Cluster: it takes new work while it is
// Ready and carries no NoSchedule or NoExecute taint (Karmada's failover
// taints an unreachable member NoExecute and evicts its bindings, which the
// tier then places again, whole).
func memberOf(c *cluster) *global.Member {
	m := &global.Member{Name: c.Name, Labels: c.Labels, Allocatable: resources.List{}}
	if cond := apimeta.FindStatusCondition(c.Status.Conditions, "Ready"); cond != nil && cond.Status == metav1.ConditionTrue {
		m.Ready = true
	}
	for _, t := range c.Spec.Taints {
		if t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute {
			m.Ready = false
		}
	}
	if rs := c.Status.ResourceSummary; rs != nil {
		m.Allocatable = resources.FromResourceList(rs.Allocatable)
		m.InUse = resources.FromResourceList(rs.Allocated)
		m.InUse.Add(resources.FromResourceList(rs.Allocating))
	}
	if cost, err := strconv.ParseInt(c.Labels[global.CostLabel], 10, 64); err == nil && cost >= 0 {
		m.Cost = cost
	}
	return m
}
