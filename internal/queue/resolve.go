package queue

import (
	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Label names the queue of a pod, of its PodGroup, or of its namespace.
const Label = phalanxv1alpha1.QueueLabel

// Resolve returns a pod's queue: the pod's label, else its PodGroup's, else
// its namespace's, else the default queue.
func Resolve(podLabels, podGroupLabels, namespaceLabels map[string]string, defaultQueue string) string {
	for _, l := range []map[string]string{podLabels, podGroupLabels, namespaceLabels} {
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
