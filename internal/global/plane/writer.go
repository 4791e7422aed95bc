package plane

import (
	"context"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
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
		gen, rv, err := w.dispatch(ctx, b, v.Member)
		if err != nil {
			return err
		}
		b.Generation, b.ResourceVersion = gen, rv
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
// karmada-scheduler does; it returns the new generation and version.
func (w *writer) dispatch(ctx context.Context, b *binding, member string) (int64, string, error) {
	placement, err := json.Marshal(b.Spec.Placement)
	if err != nil {
		return 0, "", err
	}
	patch := map[string]any{
		"metadata": map[string]any{
			"resourceVersion": b.ResourceVersion,
			"annotations":     map[string]string{appliedPlacementAnnotation: string(placement)},
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
	conds := append([]metav1.Condition(nil), b.Status.Conditions...)
	cond.ObservedGeneration = b.Generation
	cond.LastTransitionTime = metav1.NewTime(w.clock.Now())
	apimeta.SetStatusCondition(&conds, cond)
	status := map[string]any{"conditions": conds, "schedulerObservedGeneration": b.Generation}
	if scheduled {
		status["lastScheduledTime"] = metav1.NewTime(w.clock.Now())
	}
	raw, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": b.ResourceVersion}, "status": status})
	if err != nil {
		return err
	}
	if _, err := w.client.Resource(ResourceBindings).Namespace(b.Namespace).Patch(ctx, b.Name, types.MergePatchType, raw, metav1.PatchOptions{FieldManager: FieldManager}, "status"); err != nil {
		return fmt.Errorf("writing the Scheduled condition of ResourceBinding %s/%s: %w", b.Namespace, b.Name, err)
	}
	return nil
}

// FieldManager names the tier's writes.
const FieldManager = "phalanx-global"

func refOf(b *binding) *v1.ObjectReference {
	return &v1.ObjectReference{APIVersion: ResourceBindings.GroupVersion().String(), Kind: "ResourceBinding",
		Namespace: b.Namespace, Name: b.Name, UID: b.UID, ResourceVersion: b.ResourceVersion}
}
