// Package controller keeps the status of PodGroups (and, later, Queues) from
// the pods the cluster runs. The scheduler owns the Scheduled condition; this
// controller owns the phase and the counts.
package controller

import (
	"context"
	"encoding/json"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/phalanx-sched/phalanx/internal/workload"
)

// PodGroupStatus is what the controller computes for a PodGroup. Scheduled is
// a phalanx addition to the upstream status (the CRD in manifests/crds has it).
type PodGroupStatus struct {
	Phase             pgv1alpha1.PodGroupPhase `json:"phase"`
	Scheduled         int32                    `json:"scheduled"`
	Running           int32                    `json:"running"`
	Succeeded         int32                    `json:"succeeded"`
	Failed            int32                    `json:"failed"`
	ScheduleStartTime *metav1.Time             `json:"scheduleStartTime,omitempty"`
}

// ComputePodGroupStatus derives the status from the gang's pods and the
// previous status. Finished is final once reached: finished pods may be
// garbage-collected later, and gangs that depend on this one must not wait
// again. Pods being deleted (evicted, reclaimed) do not count as failures.
func ComputePodGroupStatus(minMember int32, pods []v1.Pod, prev pgv1alpha1.PodGroupStatus) PodGroupStatus {
	var st PodGroupStatus
	active := int32(0) // not finished: pending, bound or running
	for i := range pods {
		p := &pods[i]
		terminating := p.DeletionTimestamp != nil
		switch p.Status.Phase {
		case v1.PodSucceeded:
			st.Succeeded++
		case v1.PodFailed:
			if !terminating {
				st.Failed++
			}
		default:
			if terminating {
				continue
			}
			active++
			if p.Status.Phase == v1.PodRunning {
				st.Running++
			}
			if p.Spec.NodeName != "" {
				st.Scheduled++
			}
		}
	}
	switch {
	case active == 0 && (st.Succeeded >= minMember || prev.Phase == pgv1alpha1.PodGroupFinished):
		st.Phase = pgv1alpha1.PodGroupFinished
		if prev.Succeeded > st.Succeeded {
			st.Succeeded = prev.Succeeded
		}
	case st.Failed > 0 && active+st.Succeeded < minMember:
		st.Phase = pgv1alpha1.PodGroupFailed
	case st.Running+st.Succeeded >= minMember:
		st.Phase = pgv1alpha1.PodGroupRunning
	case st.Scheduled+st.Succeeded > 0:
		st.Phase = pgv1alpha1.PodGroupScheduling
	default:
		st.Phase = pgv1alpha1.PodGroupPending
	}
	if !prev.ScheduleStartTime.IsZero() {
		start := prev.ScheduleStartTime
		st.ScheduleStartTime = &start
	} else if st.Phase != pgv1alpha1.PodGroupPending {
		now := metav1.Now()
		st.ScheduleStartTime = &now
	}
	return st
}

// PodGroupReconciler writes PodGroup status.
type PodGroupReconciler struct {
	client.Client
	// lastWritten avoids rewriting unchanged status after a resync.
	lastWritten map[types.NamespacedName]PodGroupStatus
}

// Reconcile recomputes one PodGroup's status.
func (r *PodGroupReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pg := &pgv1alpha1.PodGroup{}
	if err := r.Get(ctx, req.NamespacedName, pg); err != nil {
		if apierrors.IsNotFound(err) {
			delete(r.lastWritten, req.NamespacedName)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	pods := &v1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(pg.Namespace), client.MatchingFields{gangField: pg.Name}); err != nil {
		return reconcile.Result{}, err
	}
	st := ComputePodGroupStatus(pg.Spec.MinMember, pods.Items, pg.Status)
	if prev, ok := r.lastWritten[req.NamespacedName]; ok && prev.Scheduled == st.Scheduled && sameCounts(st, pg.Status) {
		return reconcile.Result{}, nil
	}
	body, err := json.Marshal(map[string]any{"status": st})
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := r.Status().Patch(ctx, pg, client.RawPatch(types.MergePatchType, body)); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	r.lastWritten[req.NamespacedName] = st
	log.FromContext(ctx).V(1).Info("PodGroup status", "phase", st.Phase, "scheduled", st.Scheduled, "running", st.Running, "succeeded", st.Succeeded)
	return reconcile.Result{}, nil
}

func sameCounts(st PodGroupStatus, cur pgv1alpha1.PodGroupStatus) bool {
	return st.Phase == cur.Phase && st.Running == cur.Running && st.Succeeded == cur.Succeeded &&
		st.Failed == cur.Failed && (st.ScheduleStartTime == nil) == cur.ScheduleStartTime.IsZero()
}

// gangField indexes pods by the scheduler-plugins PodGroup of their gang: the
// pod-group label or an implicit gang's PodGroup (workload.GangOf, as the
// scheduler finds it).
const gangField = "phalanx.gang"

// podGroupOf is the name of the scheduler-plugins PodGroup a pod belongs to,
// "" for none (and for Workload API gangs, whose PodGroups are upstream's).
func podGroupOf(obj client.Object) string {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return ""
	}
	ref, err := workload.GangOf(pod)
	if err != nil || (ref.Source != workload.SourcePodGroupLabel && ref.Source != workload.SourceImplicit) {
		return ""
	}
	return ref.Name
}

// upstreamGangField indexes pods by the upstream (Workload API) PodGroup of
// their gang, so a change of its queue label recharges its pods.
const upstreamGangField = "phalanx.upstreamGang"

// upstreamPodGroupOf is the name of the upstream PodGroup a pod's gang is,
// "" for none.
func upstreamPodGroupOf(obj client.Object) string {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return ""
	}
	ref, err := workload.GangOf(pod)
	if err != nil || ref.Source != workload.SourceWorkloadAPI {
		return ""
	}
	return ref.Name
}

// SetupPodGroups registers the reconciler: PodGroups, and pods by their gang.
func SetupPodGroups(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1.Pod{}, gangField, func(obj client.Object) []string {
		if name := podGroupOf(obj); name != "" {
			return []string{name}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1.Pod{}, upstreamGangField, func(obj client.Object) []string {
		if name := upstreamPodGroupOf(obj); name != "" {
			return []string{name}
		}
		return nil
	}); err != nil {
		return err
	}
	r := &PodGroupReconciler{Client: mgr.GetClient(), lastWritten: map[types.NamespacedName]PodGroupStatus{}}
	return ctrl.NewControllerManagedBy(mgr).
		Named("podgroup-status").
		For(&pgv1alpha1.PodGroup{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1.Pod{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
			name := podGroupOf(obj)
			if name == "" {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}}
		})).
		Complete(r)
}
