package dryrun

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/phalanx-sched/phalanx/internal/estimator/karmadapb"
)

// Unschedulable counts a workload's pending pods whose PodScheduled
// condition has said Unschedulable for longer than the threshold. Pods
// belong to the workload through their owner, or their ReplicaSet's owner
// (Deployments, which is what Karmada's descheduler asks about).
type Unschedulable struct {
	Pods        corelisters.PodLister
	ReplicaSets appslisters.ReplicaSetLister
	Now         func() time.Time
}

// Unschedulable implements estimator.Unschedulable.
func (u *Unschedulable) Unschedulable(_ context.Context, ref *karmadapb.ObjectReference, threshold time.Duration) (int, error) {
	pods, err := u.Pods.Pods(ref.GetNamespace()).List(labels.Everything())
	if err != nil {
		return 0, err
	}
	now := u.Now()
	n := 0
	for _, p := range pods {
		if p.Spec.NodeName != "" || !u.ownedBy(p, ref) {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable &&
				now.Sub(c.LastTransitionTime.Time) >= threshold {
				n++
			}
		}
	}
	return n, nil
}

func (u *Unschedulable) ownedBy(p *v1.Pod, ref *karmadapb.ObjectReference) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == ref.GetKind() && o.Name == ref.GetName() {
			return true
		}
		if o.Kind != "ReplicaSet" || u.ReplicaSets == nil {
			continue
		}
		rs, err := u.ReplicaSets.ReplicaSets(p.Namespace).Get(o.Name)
		if err != nil {
			continue
		}
		for _, ro := range rs.OwnerReferences {
			if ro.Kind == ref.GetKind() && ro.Name == ref.GetName() {
				return true
			}
		}
	}
	return false
}
