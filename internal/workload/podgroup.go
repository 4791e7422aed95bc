package workload

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// copiedAnnotations are the gang annotations of a pod template that the
// implicit PodGroup carries, so status and tools see them on the gang.
var copiedAnnotations = []string{
	phalanxv1alpha1.TopologyRequiredAnnotation,
	phalanxv1alpha1.TopologyPreferredAnnotation,
	// Meaningful with gang-name: other gangs can name such a gang.
	phalanxv1alpha1.DependsOnAnnotation,
	phalanxv1alpha1.SubGroupSizeAnnotation,
	phalanxv1alpha1.SubGroupMinAnnotation,
	phalanxv1alpha1.SubGroupTopologyRequiredAnnotation,
	phalanxv1alpha1.SubGroupTopologyPreferredAnnotation,
}

// PodGroupFor is the scheduler-plugins PodGroup of an implicit gang, built
// from one of its pods: minMember, the owner reference, the queue label and
// the topology and dependency annotations of the pod, and the managed-by
// label that marks it as phalanx's.
func PodGroupFor(pod *v1.Pod, g Implicit) *pgv1alpha1.PodGroup {
	pg := &pgv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{
			Name:      g.Name,
			Namespace: pod.Namespace,
			Labels:    map[string]string{phalanxv1alpha1.ManagedByLabel: phalanxv1alpha1.ManagedByValue},
		},
		Spec: pgv1alpha1.PodGroupSpec{MinMember: g.MinMember},
	}
	if q := pod.Labels[phalanxv1alpha1.QueueLabel]; q != "" {
		pg.Labels[phalanxv1alpha1.QueueLabel] = q
	}
	for _, key := range copiedAnnotations {
		if v, ok := pod.Annotations[key]; ok {
			if pg.Annotations == nil {
				pg.Annotations = map[string]string{}
			}
			pg.Annotations[key] = v
		}
	}
	if g.Owner != nil {
		pg.OwnerReferences = []metav1.OwnerReference{*g.Owner}
	}
	return pg
}

// AddOwner adds ref to the PodGroup's owners unless an owner with its UID is
// there; it reports whether it changed anything. A gang named by gang-name
// can span workloads: each member's workload becomes an owner, and the API
// server's garbage collector deletes the PodGroup when the last one is gone.
func AddOwner(pg *pgv1alpha1.PodGroup, ref metav1.OwnerReference) bool {
	for _, o := range pg.OwnerReferences {
		if o.UID == ref.UID {
			return false
		}
	}
	pg.OwnerReferences = append(pg.OwnerReferences, ref)
	return true
}

// ownerRef is a garbage-collection owner reference. It is neither a
// controller reference (the workload's controller does not manage the
// PodGroup) nor blocking (blockOwnerDeletion would need update rights on
// the owner's finalizers).
func ownerRef(apiVersion, kind, name string, uid types.UID) *metav1.OwnerReference {
	return &metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid}
}

func typesUID(s string) types.UID { return types.UID(s) }
