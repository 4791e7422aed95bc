package plane

import (
	"context"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/phalanx-sched/phalanx/internal/global"
)

// writer writes verdicts on bindings. Every write carries the binding's
// resourceVersion: a binding changed since it was read is decided again on
// the next pass, never written over.
type writer struct {
	client   dynamic.Interface
	recorder record.EventRecorder
	clock    clock.PassiveClock
}

// apply writes one verdict on b. Dispatching sets spec.clusters to the one
// member with every replica, then the Scheduled condition; waiting only
// updates the condition, and only when it says something new.
func (w *writer) apply(ctx context.Context, b *binding, v global.Verdict) error {
	logger := klog.FromContext(ctx).WithValues("binding", klog.KRef(b.Namespace, b.Name))
	cond := metav1.Condition{Type: ScheduledCondition, Status: metav1.ConditionFalse, Reason: string(v.Reason), Message: v.Message}
	if v.Member != "" {
		cond.Status = metav1.ConditionTrue
		gen, rv, err := w.dispatch(ctx, b, v.Member, v.Job.Queue)
		if err != nil {
			return err
		}
		b.Generation, b.ResourceVersion = gen, rv
		b.Spec.Clusters = []targetCluster{{Name: v.Member, Replicas: b.Spec.Replicas}}
		logger.V(2).Info("Dispatched", "member", v.Member, "move", v.Move, "queue", v.Job.Queue)
	}
	old := apimeta.FindStatusCondition(b.Status.Conditions, ScheduledCondition)
	if v.Member == "" && old != nil && old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message {
		return nil
	}
	if err := w.writeStatus(ctx, b, cond, v.Member != ""); err != nil {
		return err
	}
	if old == nil || old.Reason != cond.Reason || v.Move {
		eventType := v1.EventTypeNormal
		if v.Member == "" && v.Reason != global.NoMemberFitsNow && v.Reason != global.QueueAboveShare && v.Reason != global.DependencyWaiting {
			eventType = v1.EventTypeWarning
		}
		reason := cond.Reason
		if v.Move {
			reason = "Moved"
		}
		w.recorder.Event(refOf(b), eventType, reason, v.Message)
	}
	return nil
}

// dispatch sets spec.clusters and the applied-placement annotation, as
// karmada-scheduler does, and the queue charged (QueueAnnotation); it
// returns the new generation and version.
func (w *writer) dispatch(ctx context.Context, b *binding, member, queueName string) (int64, string, error) {
	placement, err := json.Marshal(b.Spec.Placement)
	if err != nil {
		return 0, "", err
	}
	patch := map[string]any{
		"metadata": map[string]any{
			"resourceVersion": b.ResourceVersion,
			"annotations":     map[string]string{appliedPlacementAnnotation: string(placement), QueueAnnotation: queueName},
		},
		"spec": map[string]any{"clusters": []targetCluster{{Name: member, Replicas: b.Spec.Replicas}}},
	}
	raw, err := json.Marshal(patch)
	if err != nil {
		return 0, "", err
	}
	got, err := w.client.Resource(ResourceBindings).Namespace(b.Namespace).Patch(ctx, b.Name, types.MergePatchType, raw, metav1.PatchOptions{FieldManager: FieldManager})
	if err != nil {
		return 0, "", fmt.Errorf("dispatching ResourceBinding %s/%s to %s: %w", b.Namespace, b.Name, member, err)
	}
	return got.GetGeneration(), got.GetResourceVersion(), nil
}

func (w *writer) writeStatus(ctx context.Context, b *binding, cond metav1.Condition, scheduled bool) error {
	for attempt := 0; ; attempt++ {
		err := w.patchStatus(ctx, b, cond, scheduled)
		if err == nil || !apierrors.IsConflict(err) || attempt == 2 {
			if err != nil {
				return fmt.Errorf("writing the Scheduled condition of ResourceBinding %s/%s: %w", b.Namespace, b.Name, err)
			}
			return nil
		}
		// Another controller wrote the binding between the tier's read
		// (or its dispatch) and this write, typically its labels or
		// finalizers. The condition still holds if the binding still goes
		// where the verdict says: read it again and retry; otherwise the
		// next pass decides anew.
		fresh, ferr := w.get(ctx, b.Namespace, b.Name)
		if ferr != nil {
			return fmt.Errorf("writing the Scheduled condition of ResourceBinding %s/%s: %w (and reading it again: %v)", b.Namespace, b.Name, err, ferr)
		}
		if !sameTargets(fresh.Spec.Clusters, b.Spec.Clusters) {
			return fmt.Errorf("writing the Scheduled condition of ResourceBinding %s/%s: %w; its spec.clusters changed meanwhile", b.Namespace, b.Name, err)
		}
		*b = *fresh
	}
}

func (w *writer) patchStatus(ctx context.Context, b *binding, cond metav1.Condition, scheduled bool) error {
	conds := append([]metav1.Condition(nil), b.Status.Conditions...)
	cond.ObservedGeneration = b.Generation
	cond.LastTransitionTime = metav1.NewTime(w.clock.Now())
	apimeta.SetStatusCondition(&conds, cond)
	status := map[string]any{"conditions": conds}
	if cond.Status == metav1.ConditionTrue {
		// As karmada-scheduler: the generation is observed once placed.
		// Karmada's graceful eviction reads an observed generation with
		// no member as "placed nowhere, nothing to wait for" and deletes
		// the evicted copy at once.
		status["schedulerObservedGeneration"] = b.Generation
	}
	if scheduled {
		status["lastScheduledTime"] = metav1.NewTime(w.clock.Now())
	}
	raw, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": b.ResourceVersion}, "status": status})
	if err != nil {
		return err
	}
	_, err = w.client.Resource(ResourceBindings).Namespace(b.Namespace).Patch(ctx, b.Name, types.MergePatchType, raw, metav1.PatchOptions{FieldManager: FieldManager}, "status")
	return err
}

// confirm writes Scheduled=True on a binding the tier dispatched whose
// condition does not say so: the status write after the dispatch failed,
// or the tier stopped between the two. The dispatch itself stands.
func (w *writer) confirm(ctx context.Context, b *binding) error {
	if c := apimeta.FindStatusCondition(b.Status.Conditions, ScheduledCondition); len(b.Spec.Clusters) != 1 || (c != nil && c.Status == metav1.ConditionTrue) {
		return nil
	}
	member := b.Spec.Clusters[0].Name
	cond := metav1.Condition{Type: ScheduledCondition, Status: metav1.ConditionTrue, Reason: string(global.Dispatched),
		Message: "dispatched whole to member " + member}
	if err := w.writeStatus(ctx, b, cond, false); err != nil {
		return err
	}
	w.recorder.Event(refOf(b), v1.EventTypeNormal, cond.Reason, cond.Message)
	return nil
}

func (w *writer) get(ctx context.Context, namespace, name string) (*binding, error) {
	u, err := w.client.Resource(ResourceBindings).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	b := &binding{}
	return b, fromUnstructured(u, b)
}

func sameTargets(a, b []targetCluster) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// QueueAnnotation on a dispatched binding names the queue the tier charges
// it to (kubectl phalanx shows it; a waiting binding's queue is in its
// QueuePositions entry and its Scheduled message).
const QueueAnnotation = "scheduling.phalanx.dev/queue"

// FieldManager names the tier's writes.
const FieldManager = "phalanx-global"

func refOf(b *binding) *v1.ObjectReference {
	return &v1.ObjectReference{APIVersion: ResourceBindings.GroupVersion().String(), Kind: "ResourceBinding",
		Namespace: b.Namespace, Name: b.Name, UID: b.UID, ResourceVersion: b.ResourceVersion}
}
