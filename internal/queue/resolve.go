package queue

import (
	v1 "k8s.io/api/core/v1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Label names the queue of a pod, of its PodGroup, or of its namespace.
const Label = phalanxv1alpha1.QueueLabel

// Of is the queue a pod is charged to — the one resolution the scheduler
// (plugins/runtime) and the controller (internal/controller) share, whatever
// the source of the pod's gang: the pod's queue label, else its gang's group
// object's, else its namespace's, else defaultQueue.
//
// groupLabels are the labels of the gang's group object, nil for a pod in no
// gang: a scheduler-plugins PodGroup's own labels (an implicit gang's
// PodGroup carries its pods' label), or for an upstream Workload API
// PodGroup workload.UpstreamGroupLabels (the PodGroup's label, else its
// Workload's). pod may be nil: the queue of a gang with no member at hand.
func Of(pod *v1.Pod, groupLabels, namespaceLabels map[string]string, defaultQueue string) string {
	var podLabels map[string]string
	if pod != nil {
		podLabels = pod.Labels
	}
	for _, l := range []map[string]string{podLabels, groupLabels, namespaceLabels} {
		if q := l[Label]; q != "" {
			return q
		}
	}
	return defaultQueue
}

// FromAPI converts a Queue object.
func FromAPI(q *phalanxv1alpha1.Queue) Queue {
	out := Queue{
		Name: q.Name, Parent: q.Spec.Parent, Weight: q.Spec.Weight,
		Guarantee:   resources.FromResourceList(q.Spec.Guarantee),
		Reclaimable: q.Spec.Reclaimable == nil || *q.Spec.Reclaimable,
		Open:        q.Spec.State != phalanxv1alpha1.QueueStateClosed,
	}
	if len(q.Spec.Capability) > 0 {
		out.Capability = resources.FromResourceList(q.Spec.Capability)
	}
	return out
}
