package plane

import (
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// View is a binding as a reader sees it (kubectl phalanx on the Karmada
// plane): its template, where the tier sent it, whether it runs there, and
// what the tier said. It is read as the tier reads bindings.
type View struct {
	Namespace, Name string
	UID             types.UID
	// Kind and Template name its resource template.
	Kind, Template string
	SchedulerName  string
	Created        time.Time
	// Queue is the queue the tier charged a dispatched binding to
	// (QueueAnnotation), "" before.
	Queue string
	// Member is spec.clusters[0], "" while it waits.
	Member string
	// Started: its quorum runs or has succeeded in Member; Done: it
	// finished there (from the aggregated status, as the tier reads it).
	Started, Done bool
	// Scheduled is the Scheduled condition, nil before any decision.
	Scheduled *metav1.Condition
}

// ViewOf reads a ResourceBinding.
func ViewOf(u *unstructured.Unstructured) (*View, error) {
	b := &binding{}
	if err := fromUnstructured(u, b); err != nil {
		return nil, err
	}
	v := &View{
		Namespace: b.Namespace, Name: b.Name, UID: b.UID,
		Kind: b.Spec.Resource.Kind, Template: b.Spec.Resource.Name,
		SchedulerName: b.Spec.SchedulerName, Created: b.CreationTimestamp.Time,
		Queue:     b.Annotations[QueueAnnotation],
		Scheduled: apimeta.FindStatusCondition(b.Status.Conditions, ScheduledCondition),
	}
	if len(b.Spec.Clusters) > 0 {
		v.Member = b.Spec.Clusters[0].Name
		v.Started, v.Done = progress(b, v.Member)
	}
	return v, nil
}
