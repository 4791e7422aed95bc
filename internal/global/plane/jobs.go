package plane

import (
	"encoding/json"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/estimator"
	"github.com/phalanx-sched/phalanx/internal/estimator/karmadapb"
	"github.com/phalanx-sched/phalanx/internal/global"
	"github.com/phalanx-sched/phalanx/internal/queue"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// jobOf is the tier's view of a binding. tmpl is its resource template's
// phalanx labels and annotations (nil: not read); the queue is the
// template's label, else its namespace's, else defaultQueue.
func jobOf(b *binding, tmpl *estimator.Template, namespaceLabels map[string]string, defaultQueue string) *global.Job {
	j := &global.Job{
		Key: b.Namespace + "/" + b.Name, UID: b.UID,
		Namespace: b.Namespace, Kind: b.Spec.Resource.Kind, Name: b.Spec.Resource.Name,
		Created: b.CreationTimestamp.Time,
	}
	if j.Namespace == "" {
		j.Namespace = b.Spec.Resource.Namespace
	}
	if p := b.Spec.SchedulePriority; p != nil {
		j.Priority = p.Priority
	}
	var tl, ta map[string]string
	if tmpl != nil {
		tl, ta = tmpl.Labels, tmpl.Annotations
	}
	j.Queue = queue.Of(nil, tl, namespaceLabels, defaultQueue)
	for _, d := range strings.Split(ta[phalanxv1alpha1.DependsOnAnnotation], ",") {
		if d = strings.TrimSpace(d); d != "" {
			j.DependsOn = append(j.DependsOn, d)
		}
	}
	var err error
	if j.Request, j.Components, err = setOf(b); err != nil {
		j.Invalid = err.Error()
	}
	j.Divides = divides(b.Spec.Placement)
	if j.Allowed, err = allowed(b.Spec.Placement); err != nil {
		j.Invalid = err.Error()
	}
	for _, task := range b.Spec.GracefulEvictionTasks {
		j.Evicted = append(j.Evicted, task.FromCluster)
	}
	if len(b.Spec.Clusters) > 0 {
		j.Member = b.Spec.Clusters[0].Name
		if len(b.Spec.Clusters) > 1 {
			j.Invalid = fmt.Sprintf("spec.clusters names %d members; phalanx-global places a job in one", len(b.Spec.Clusters))
		}
		// lastScheduledTime is rewritten by every dispatch; a move keeps
		// Scheduled True, so its transition time is the first dispatch's.
		if b.Status.LastScheduledTime != nil {
			j.Since = b.Status.LastScheduledTime.Time
		}
		if c := apimeta.FindStatusCondition(b.Status.Conditions, ScheduledCondition); j.Since.IsZero() && c != nil && c.Status == metav1.ConditionTrue {
			j.Since = c.LastTransitionTime.Time
		}
		j.Started, j.Done = progress(b, j.Member)
	}
	return j
}

// setOf is the whole set's request and its components as the estimators
// are asked: spec.components (Karmada's multi-template workloads), else
// spec.replicas of spec.replicaRequirements (one replica for a workload
// without replicas).
func setOf(b *binding) (resources.List, []*karmadapb.Component, error) {
	comps := b.Spec.Components
	if len(comps) == 0 {
		n := b.Spec.Replicas
		if n == 0 {
			n = 1
		}
		comps = []component{{Name: "replicas", Replicas: n, ReplicaRequirements: b.Spec.ReplicaRequirements}}
	}
	total := resources.List{}
	out := make([]*karmadapb.Component, 0, len(comps))
	for i, c := range comps {
		rr := &karmadapb.ComponentReplicaRequirements{ResourceRequestBytes: map[string][]byte{}}
		if r := c.ReplicaRequirements; r != nil {
			total.AddScaled(resources.FromResourceList(r.ResourceRequest), int64(c.Replicas))
			for name, q := range r.ResourceRequest {
				raw, err := q.Marshal()
				if err != nil {
					return nil, nil, fmt.Errorf("spec.components[%d].replicaRequirements.resourceRequest[%s]: %w", i, name, err)
				}
				rr.ResourceRequestBytes[string(name)] = raw
			}
			rr.PriorityClassName = r.PriorityClassName
			claim, err := claimOf(r.NodeClaim)
			if err != nil {
				return nil, nil, fmt.Errorf("spec.components[%d].replicaRequirements.nodeClaim: %w", i, err)
			}
			rr.NodeClaim = claim
		}
		out = append(out, &karmadapb.Component{Name: c.Name, Replicas: c.Replicas, ReplicaRequirements: rr})
	}
	return total, out, nil
}

func claimOf(nc *nodeClaim) (*karmadapb.NodeClaim, error) {
	if nc == nil {
		return nil, nil
	}
	out := &karmadapb.NodeClaim{NodeSelector: nc.NodeSelector}
	if nc.HardNodeAffinity != nil {
		raw, err := nc.HardNodeAffinity.Marshal()
		if err != nil {
			return nil, err
		}
		out.NodeAffinityBytes = raw
	}
	for _, t := range nc.Tolerations {
		raw, err := t.Marshal()
		if err != nil {
			return nil, err
		}
		out.TolerationsBytes = append(out.TolerationsBytes, raw)
	}
	return out, nil
}

// divides says why a placement would put a job in more than one member.
func divides(p *placement) string {
	if p == nil {
		return ""
	}
	for _, sc := range p.SpreadConstraints {
		if sc.MinGroups > 1 {
			by := sc.SpreadByField
			if by == "" {
				by = "label " + sc.SpreadByLabel
			}
			return fmt.Sprintf("its placement.spreadConstraints ask for at least %d groups by %s", sc.MinGroups, by)
		}
	}
	if rs := p.ReplicaScheduling; rs != nil {
		if rs.ReplicaSchedulingType == "Duplicated" {
			return "its placement.replicaScheduling is Duplicated: a copy of the whole job in every member"
		}
		if rs.ReplicaDivisionPreference == "Weighted" && rs.WeightPreference != nil && len(rs.WeightPreference.StaticWeightList) > 1 {
			return fmt.Sprintf("its placement.replicaScheduling.weightPreference.staticWeightList divides the replicas over %d weights", len(rs.WeightPreference.StaticWeightList))
		}
	}
	return ""
}

// allowed is the placement's cluster affinity: clusterAffinity, else the
// first of clusterAffinities (Karmada tries them in order; the tier keeps
// to the first).
func allowed(p *placement) (func(*global.Member) bool, error) {
	if p == nil {
		return nil, nil
	}
	aff, field := p.ClusterAffinity, "placement.clusterAffinity"
	if aff == nil && len(p.ClusterAffinities) > 0 {
		aff, field = &p.ClusterAffinities[0], "placement.clusterAffinities[0]"
	}
	if aff == nil {
		return nil, nil
	}
	if len(aff.FieldSelector) > 0 && string(aff.FieldSelector) != "null" {
		return nil, fmt.Errorf("%s.fieldSelector is not supported by phalanx-global: select members by clusterNames or labelSelector", field)
	}
	sel := labels.Everything()
	if aff.LabelSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(aff.LabelSelector)
		if err != nil {
			return nil, fmt.Errorf("%s.labelSelector: %w", field, err)
		}
		sel = s
	}
	names, exclude := set(aff.ClusterNames), set(aff.Exclude)
	return func(m *global.Member) bool {
		if exclude[m.Name] || (len(names) > 0 && !names[m.Name]) {
			return false
		}
		return sel.Matches(labels.Set(m.Labels))
	}, nil
}

func set(names []string) map[string]bool {
	out := make(map[string]bool, len(names))
	for _, n := range names {
		out[n] = true
	}
	return out
}

// memberStatus is the part of a workload's status, as Karmada aggregates
// it from a member, that says whether it runs: the conditions of
// training-operator, JobSet and Ray jobs, and batch/v1 Job's pod counts.
type memberStatus struct {
	Conditions []struct {
		Type   string             `json:"type"`
		Status v1.ConditionStatus `json:"status"`
	} `json:"conditions"`
	Ready     *int32 `json:"ready"`
	Succeeded int32  `json:"succeeded"`
	Failed    int32  `json:"failed"`
}

// progress reads whether the job's quorum runs or has succeeded in member
// (started) and whether it has finished there (done).
func progress(b *binding, member string) (started, done bool) {
	for _, item := range b.Status.AggregatedStatus {
		if item.ClusterName != member || len(item.Status) == 0 {
			continue
		}
		var st memberStatus
		if json.Unmarshal(item.Status, &st) != nil {
			continue
		}
		for _, c := range st.Conditions {
			if c.Status != v1.ConditionTrue {
				continue
			}
			switch c.Type {
			case "Running":
				started = true
			case "Succeeded", "Complete", "Completed":
				return true, true
			case "Failed":
				return started, true
			}
		}
		quorum := max(b.Spec.Replicas, 1)
		if st.Ready != nil && *st.Ready+st.Succeeded >= quorum {
			started = true
		}
		if st.Succeeded >= quorum {
			return true, true
		}
	}
	return started, done
}
