package workload

import (
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1beta1"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pglisters "sigs.k8s.io/scheduler-plugins/pkg/generated/listers/scheduling/v1alpha1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
)

// Adapter reads the gangs of one source from informer caches into phalanx's
// one gang model (gangspec.Spec). Every way users declare gangs has one:
//   - PodGroups: scheduler-plugins PodGroups, named by the pod-group label
//     or made by phalanx for an implicit gang (pod-template annotations);
//   - Upstream: PodGroups of the Workload API (scheduling.k8s.io/v1beta1),
//     named by the pods' spec.schedulingGroup, with their Workload.
//
// Which source a pod's gang comes from is GangOf's decision (the one
// precedence, shared with phalanx-controller). Adapters only read: the group
// objects of implicit gangs are made outside scheduling cycles.
type Adapter interface {
	// Source is the kind of group object the adapter reads.
	Source() ident.Source
	// Spec reads a gang's definition: NotFound while its group object does
	// not exist (or its API is not served).
	Spec(namespace, name string) (*gangspec.Spec, error)
	// SpecOf reads a group object its informer delivered; nil when obj is
	// not of the adapter's kind.
	SpecOf(obj any) *gangspec.Spec
}

// PodGroups is the adapter of scheduler-plugins PodGroups.
type PodGroups struct {
	Lister pglisters.PodGroupLister
}

var _ Adapter = PodGroups{}

// Source implements Adapter.
func (PodGroups) Source() ident.Source { return ident.SourcePodGroup }

// Spec implements Adapter.
func (a PodGroups) Spec(namespace, name string) (*gangspec.Spec, error) {
	pg, err := a.Lister.PodGroups(namespace).Get(name)
	if err != nil {
		return nil, err
	}
	return gangspec.SpecFromPodGroup(pg), nil
}

// SpecOf implements Adapter.
func (PodGroups) SpecOf(obj any) *gangspec.Spec {
	if pg, ok := obj.(*pgv1alpha1.PodGroup); ok {
		return gangspec.SpecFromPodGroup(pg)
	}
	return nil
}

// Upstream is the adapter of the Workload API's PodGroups. Workloads is nil
// where the API server serves PodGroups without Workloads.
type Upstream struct {
	PodGroups schedulinglisters.PodGroupLister
	Workloads schedulinglisters.WorkloadLister
}

var _ Adapter = Upstream{}

// Source implements Adapter.
func (Upstream) Source() ident.Source { return ident.SourceWorkload }

// Spec implements Adapter.
func (a Upstream) Spec(namespace, name string) (*gangspec.Spec, error) {
	if a.PodGroups == nil {
		return nil, apierrors.NewNotFound(schedulingv1beta1.Resource("podgroups"), name)
	}
	pg, err := a.PodGroups.PodGroups(namespace).Get(name)
	if err != nil {
		return nil, err
	}
	return SpecFromUpstream(pg, a.workloadOf(pg))
}

// SpecOf implements Adapter. An invalid PodGroup reads as a gang of one, so
// its events still reach the scheduler (Spec reports the error).
func (a Upstream) SpecOf(obj any) *gangspec.Spec {
	pg, ok := obj.(*schedulingv1beta1.PodGroup)
	if !ok {
		return nil
	}
	if s, err := SpecFromUpstream(pg, a.workloadOf(pg)); err == nil {
		return s
	}
	return &gangspec.Spec{Ref: ident.Ref{Source: ident.SourceWorkload, Namespace: pg.Namespace, Name: pg.Name}, MinMember: 1}
}

func (a Upstream) workloadOf(pg *schedulingv1beta1.PodGroup) *schedulingv1beta1.Workload {
	name := WorkloadOf(pg)
	if name == "" || a.Workloads == nil {
		return nil
	}
	wl, _ := a.Workloads.Workloads(pg.Namespace).Get(name)
	return wl
}

// SpecFromUpstream reads an upstream PodGroup (and the Workload it was made
// from, if known) with FromUpstream: a gang policy's minCount is the quorum
// (a change of it resizes the gang), a basic policy places pods one by one
// (a quorum of one); priority, preemption policy, disruption mode, the
// topology key, the queue label and phalanx's topology annotations come
// along.
func SpecFromUpstream(pg *schedulingv1beta1.PodGroup, wl *schedulingv1beta1.Workload) (*gangspec.Spec, error) {
	up, isGang, err := FromUpstream(pg, wl)
	if err != nil {
		return nil, err
	}
	s := &gangspec.Spec{
		Ref:        ident.Ref{Source: ident.SourceWorkload, Namespace: pg.Namespace, Name: pg.Name},
		UID:        pg.UID,
		Generation: pg.Generation,
		MinMember:  1,
		Created:    pg.CreationTimestamp.Time,
		Labels:     map[string]string{},
		Annotations: map[string]string{
			phalanxv1alpha1.TopologyRequiredAnnotation:  up.TopologyRequired,
			phalanxv1alpha1.TopologyPreferredAnnotation: up.TopologyPreferred,
		},
		Priority:      pg.Spec.Priority,
		NeverPreempts: pg.Spec.PreemptionPolicy != nil && *pg.Spec.PreemptionPolicy == schedulingv1beta1.PreemptNever,
	}
	// The API defaults disruptionMode to single.
	if d := pg.Spec.DisruptionMode; d == nil || d.All == nil {
		s.Disruption = gangspec.DisruptSingle
	}
	// The queue label holds for basic policies too (up is empty for them).
	for k, v := range UpstreamGroupLabels(pg, wl) {
		s.Labels[k] = v
	}
	if isGang {
		s.MinMember = int(up.MinCount)
		s.Priority = up.Priority
	}
	if len(up.TopologyKeys) > 0 {
		s.TopologyKey = up.TopologyKeys[0]
	}
	return s, nil
}
