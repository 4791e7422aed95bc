package workload

import (
	"fmt"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// UpstreamGang is what phalanx's gang core needs from an upstream Workload
// API PodGroup (scheduling.k8s.io/v1beta1).
type UpstreamGang struct {
	Namespace, Name string
	// MinCount is spec.schedulingPolicy.gang.minCount: the gang's minMember.
	MinCount int32
	// TopologyKeys are spec.schedulingConstraints.topology[].key: node label
	// keys whose value every member must share (required). Kubernetes 1.37
	// allows one. TopologyLevelFor maps a key onto a phalanx level.
	TopologyKeys []string
	// TopologyRequired and TopologyPreferred are phalanx's topology
	// annotations (level names) on the PodGroup, else on its Workload.
	TopologyRequired, TopologyPreferred string
	// Queue is the phalanx queue label of the PodGroup, else of its
	// Workload; "" lets the caller fall back to the pod's and namespace's.
	Queue string
	// Priority is spec.priority of the PodGroup, else of its Workload
	// template; nil if neither has one.
	Priority *int32
	// Workload is the Workload the PodGroup was made from ("" if none).
	Workload string
}

// FromUpstream converts an upstream PodGroup, and optionally the Workload it
// references (used for labels, annotations and priority the PodGroup lacks),
// into a gang. ok is false when the PodGroup has no gang policy (the basic
// policy schedules its pods one by one). A gang with minCount below 1 is an
// error naming the field.
func FromUpstream(pg *schedulingv1beta1.PodGroup, wl *schedulingv1beta1.Workload) (UpstreamGang, bool, error) {
	gang := pg.Spec.SchedulingPolicy.Gang
	if gang == nil {
		return UpstreamGang{}, false, nil
	}
	if gang.MinCount < 1 {
		return UpstreamGang{}, true, fmt.Errorf("PodGroup %s/%s: spec.schedulingPolicy.gang.minCount: %d is not a positive integer",
			pg.Namespace, pg.Name, gang.MinCount)
	}
	g := UpstreamGang{Namespace: pg.Namespace, Name: pg.Name, MinCount: gang.MinCount, Priority: pg.Spec.Priority}
	if c := pg.Spec.SchedulingConstraints; c != nil {
		for _, t := range c.Topology {
			if t.Key != "" {
				g.TopologyKeys = append(g.TopologyKeys, t.Key)
			}
		}
	}
	var template *schedulingv1beta1.PodGroupTemplate
	g.Workload = WorkloadOf(pg)
	if wl = referenced(pg, wl); wl != nil {
		ref := pg.Spec.WorkloadRef
		for i := range wl.Spec.PodGroupTemplates {
			if wl.Spec.PodGroupTemplates[i].Name == ref.TemplateName {
				template = &wl.Spec.PodGroupTemplates[i]
			}
		}
	}
	lookup := func(pgValue string, fromWorkload func() string) string {
		if pgValue != "" || wl == nil {
			return pgValue
		}
		return fromWorkload()
	}
	g.Queue = UpstreamQueue(pg, wl)
	g.TopologyRequired = lookup(pg.Annotations[phalanxv1alpha1.TopologyRequiredAnnotation], func() string {
		return wl.Annotations[phalanxv1alpha1.TopologyRequiredAnnotation]
	})
	g.TopologyPreferred = lookup(pg.Annotations[phalanxv1alpha1.TopologyPreferredAnnotation], func() string {
		return wl.Annotations[phalanxv1alpha1.TopologyPreferredAnnotation]
	})
	if g.Priority == nil && template != nil {
		g.Priority = template.Priority
	}
	return g, true, nil
}

// WorkloadOf is the name of the Workload an upstream PodGroup was made from,
// "" if none.
func WorkloadOf(pg *schedulingv1beta1.PodGroup) string {
	if ref := pg.Spec.WorkloadRef; ref != nil {
		return ref.WorkloadName
	}
	return ""
}

// referenced is wl if it is the Workload pg was made from, else nil.
func referenced(pg *schedulingv1beta1.PodGroup, wl *schedulingv1beta1.Workload) *schedulingv1beta1.Workload {
	if name := WorkloadOf(pg); wl != nil && name != "" && wl.Name == name && wl.Namespace == pg.Namespace {
		return wl
	}
	return nil
}

// UpstreamQueue is the phalanx queue label of an upstream PodGroup, else of
// the Workload it was made from (wl may be nil: the Workload is unknown or
// not served); "" when neither names a queue. It holds for every scheduling
// policy, gang or basic.
func UpstreamQueue(pg *schedulingv1beta1.PodGroup, wl *schedulingv1beta1.Workload) string {
	if q := pg.Labels[phalanxv1alpha1.QueueLabel]; q != "" {
		return q
	}
	if wl = referenced(pg, wl); wl != nil {
		return wl.Labels[phalanxv1alpha1.QueueLabel]
	}
	return ""
}

// UpstreamGroupLabels are the group labels queue.Of takes for a pod of an
// upstream PodGroup: the queue label UpstreamQueue finds, nil for none.
func UpstreamGroupLabels(pg *schedulingv1beta1.PodGroup, wl *schedulingv1beta1.Workload) map[string]string {
	if q := UpstreamQueue(pg, wl); q != "" {
		return map[string]string{phalanxv1alpha1.QueueLabel: q}
	}
	return nil
}

// TopologyLevelFor maps an upstream topology key (a node label key) onto a
// phalanx level: the level of the NetworkTopology whose nodeLabel is the key
// (so the level's place in the hierarchy and its name in conditions are
// kept), else a single ad-hoc level named after the key. adHoc tells which.
func TopologyLevelFor(key string, levels []phalanxv1alpha1.TopologyLevel) (level phalanxv1alpha1.TopologyLevel, adHoc bool) {
	for _, l := range levels {
		if l.NodeLabel == key {
			return l, false
		}
	}
	return phalanxv1alpha1.TopologyLevel{Name: key, NodeLabel: key}, true
}
