package shared

import (
	"context"
	"encoding/json"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pgclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
)

// ConditionScheduled is the PodGroup condition in which the scheduler says
// whether, and why not, the gang is scheduled.
const ConditionScheduled = "Scheduled"

// Reasons of the Scheduled condition.
const (
	ReasonMembersPending    = "MembersPending"
	ReasonPodGroupMissing   = "PodGroupNotFound"
	ReasonDependencyPending = "WaitingForDependency"
	ReasonDependencyMissing = "DependencyNotFound"
	ReasonUnschedulable     = "Unschedulable"
	ReasonPlanBroken        = "PlanBroken"
	ReasonTimeout           = "ScheduleTimeout"
	ReasonQueue             = "QueueAdmission"
	ReasonScheduled         = "Scheduled"
)

// StatusWriter writes the scheduler's conditions on PodGroups and emits an
// event when a gang's reason changes. Writes are asynchronous and collapsed, so
// a scheduling cycle never waits on the API server and a flapping gang costs
// one patch per change at most.
type StatusWriter struct {
	client   pgclientset.Interface
	recorder events.EventRecorder

	mu      sync.Mutex
	desired map[types.NamespacedName]metav1.Condition
	queue   workqueue.TypedRateLimitingInterface[types.NamespacedName]
}

// NewStatusWriter returns a writer; call Run to start it.
func NewStatusWriter(client pgclientset.Interface, recorder events.EventRecorder) *StatusWriter {
	return &StatusWriter{
		client:   client,
		recorder: recorder,
		desired:  map[types.NamespacedName]metav1.Condition{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName](),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "phalanx-podgroup-status"}),
	}
}

// Set records the gang's Scheduled condition. It returns true (and emits an
// event) when the reason or message changed.
func (w *StatusWriter) Set(pg *pgv1alpha1.PodGroup, status metav1.ConditionStatus, reason, message string) bool {
	nn := types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}
	w.mu.Lock()
	old, had := w.desired[nn]
	if had && old.Status == status && old.Reason == reason && old.Message == message {
		w.mu.Unlock()
		return false
	}
	cond := metav1.Condition{
		Type:               ConditionScheduled,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: pg.Generation,
		LastTransitionTime: metav1.Now(),
	}
	if had && old.Status == status {
		cond.LastTransitionTime = old.LastTransitionTime
	}
	w.desired[nn] = cond
	w.mu.Unlock()

	if w.recorder != nil && (!had || old.Reason != reason || old.Message != message) {
		eventType := v1.EventTypeNormal
		if status != metav1.ConditionTrue {
			eventType = v1.EventTypeWarning
		}
		ref := &v1.ObjectReference{
			APIVersion: pgv1alpha1.SchemeGroupVersion.String(), Kind: "PodGroup",
			Namespace: pg.Namespace, Name: pg.Name, UID: pg.UID,
		}
		w.recorder.Eventf(ref, nil, eventType, reason, "Scheduling", "%s", message)
	}
	w.queue.Add(nn)
	return true
}

// Get returns the last condition set for a PodGroup.
func (w *StatusWriter) Get(nn types.NamespacedName) (metav1.Condition, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c, ok := w.desired[nn]
	return c, ok
}

// Forget drops what is known about a deleted PodGroup.
func (w *StatusWriter) Forget(nn types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.desired, nn)
}

// Run patches PodGroup status until ctx ends.
func (w *StatusWriter) Run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		w.queue.ShutDown()
	}()
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		for w.processNext(ctx) {
		}
	}, 0)
}

func (w *StatusWriter) processNext(ctx context.Context) bool {
	nn, quit := w.queue.Get()
	if quit {
		return false
	}
	defer w.queue.Done(nn)
	w.mu.Lock()
	cond, ok := w.desired[nn]
	w.mu.Unlock()
	if !ok {
		w.queue.Forget(nn)
		return true
	}
	if err := w.patch(ctx, nn, cond); err != nil {
		if apierrors.IsNotFound(err) {
			w.queue.Forget(nn)
			return true
		}
		klog.FromContext(ctx).V(2).Info("Retrying PodGroup status patch", "podGroup", nn, "err", err)
		w.queue.AddRateLimited(nn)
		return true
	}
	w.queue.Forget(nn)
	return true
}

// patch merges our condition into the PodGroup's conditions. The upstream Go
// type has no conditions field, so the list is read and written as raw JSON.
func (w *StatusWriter) patch(ctx context.Context, nn types.NamespacedName, cond metav1.Condition) error {
	raw, err := w.client.SchedulingV1alpha1().RESTClient().Get().
		Namespace(nn.Namespace).Resource("podgroups").Name(nn.Name).DoRaw(ctx)
	if err != nil {
		return err
	}
	var current struct {
		Status struct {
			Conditions []metav1.Condition `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal(raw, &current); err != nil {
		return err
	}
	conds := current.Status.Conditions
	if existing := meta.FindStatusCondition(conds, cond.Type); existing != nil &&
		existing.Status == cond.Status && existing.Reason == cond.Reason && existing.Message == cond.Message {
		return nil
	}
	meta.SetStatusCondition(&conds, cond)
	body, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": conds}})
	if err != nil {
		return err
	}
	_, err = w.client.SchedulingV1alpha1().PodGroups(nn.Namespace).Patch(ctx, nn.Name, types.MergePatchType, body, metav1.PatchOptions{}, "status")
	return err
}
