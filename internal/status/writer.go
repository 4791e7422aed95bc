package status

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pgclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	"github.com/phalanx-sched/phalanx/internal/gang"
	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/lifecycle"
)

// ConditionScheduled is the PodGroup condition in which the scheduler says
// whether, and why not, the gang is scheduled.
const ConditionScheduled = "Scheduled"

// Reasons of the Scheduled condition (the lifecycle's own reasons are in
// internal/gang).
const (
	ReasonOrderedStartup    = "OrderedStartup"
	ReasonPodGroupMissing   = "PodGroupNotFound"
	ReasonDependencyPending = "WaitingForDependency"
	ReasonDependencyMissing = "DependencyNotFound"
	ReasonQueue             = "QueueAdmission"
	ReasonScheduled         = "Scheduled"
)

// The conditions of upstream (scheduling.k8s.io/v1beta1) PodGroups that
// kube-scheduler writes, so kubectl describe and the operators read the same
// status from phalanx as from kube-scheduler. phalanx's own Scheduled
// condition (its reasons: MembersPending, Reserving, ...) is written beside
// them.
const (
	// upstreamScheduled: False with reason Unschedulable while the gang has
	// not started; True with reason Scheduled once it has, and then for good
	// (the API defines it as terminal).
	upstreamScheduled = schedulingv1beta1.PodGroupInitiallyScheduled
	// upstreamDisruption: True when phalanx evicts the gang to make room
	// (reason PreemptionByScheduler), or because it was left partly bound.
	upstreamDisruption = schedulingv1beta1.DisruptionTarget
)

// compositeScheduled is a CompositePodGroup's counterpart of
// PodGroupInitiallyScheduled (v1alpha3 documents it; no constant names it).
const compositeScheduled = "CompositePodGroupInitiallyScheduled"

// upstreamConditions merges phalanx's condition of a gang into an upstream
// PodGroup's conditions; false when nothing changed.
func upstreamConditions(conds *[]metav1.Condition, cond metav1.Condition) bool {
	return upstreamConditionsAs(conds, cond, upstreamScheduled)
}

// upstreamConditionsAs is upstreamConditions with the "initially
// scheduled" condition of the given type.
func upstreamConditionsAs(conds *[]metav1.Condition, cond metav1.Condition, upstreamScheduled string) bool {
	changed := setCondition(conds, cond)
	initially := metav1.Condition{Type: upstreamScheduled, Status: cond.Status, ObservedGeneration: cond.ObservedGeneration,
		LastTransitionTime: cond.LastTransitionTime, Reason: schedulingv1beta1.PodGroupReasonUnschedulable, Message: cond.Message}
	if cond.Status == metav1.ConditionTrue {
		initially.Reason = ReasonScheduled
	}
	if existing := meta.FindStatusCondition(*conds, upstreamScheduled); existing == nil || existing.Status != metav1.ConditionTrue {
		changed = setCondition(conds, initially) || changed
	}
	disruption := metav1.Condition{Type: upstreamDisruption, Status: metav1.ConditionTrue, ObservedGeneration: cond.ObservedGeneration,
		LastTransitionTime: cond.LastTransitionTime, Reason: cond.Reason, Message: cond.Message}
	switch cond.Reason {
	case gang.ReasonPreempted, gang.ReasonReclaimed:
		disruption.Reason = schedulingv1beta1.PodGroupReasonPreemptionByScheduler
		changed = setCondition(conds, disruption) || changed
	case lifecycle.ReasonStranded:
		changed = setCondition(conds, disruption) || changed
	case ReasonScheduled:
		// Placed again: no longer a disruption target.
		if meta.IsStatusConditionTrue(*conds, upstreamDisruption) {
			disruption.Status = metav1.ConditionFalse
			changed = setCondition(conds, disruption) || changed
		}
	}
	return changed
}

// Condition is what the scheduler says about one gang.
type Condition struct {
	Status          metav1.ConditionStatus
	Reason, Message string
}

// Writer writes the scheduler's condition on gangs' group objects and
// emits an event when a gang's reason changes. Writes are
// asynchronous and collapsed, so a scheduling cycle never waits on the API
// server and a flapping gang costs one patch per change at most.
type Writer struct {
	pgClient pgclientset.Interface
	client   kubernetes.Interface
	recorder events.EventRecorder
	// onChange hears every change of a gang's condition (metrics).
	onChange func(ref ident.Ref, old, new *Condition)
	// Leading, when set, tells whether this replica schedules: a standby
	// keeps what it would say and writes nothing (RequeueAll on leading).
	Leading func() bool
	// Clock stamps conditions' lastTransitionTime (nil: the wall clock);
	// the runtime sets its own.
	Clock clock.PassiveClock

	mu      sync.Mutex
	desired map[ident.Ref]desiredCondition
	// unsaid: gangs whose reason changed while this replica stood by.
	unsaid map[ident.Ref]*v1.ObjectReference
	// held: what gangs hold, for the held annotation (held.go).
	held  map[ident.Ref]*heldAnnotation
	queue workqueue.TypedRateLimitingInterface[ident.Ref]
	// HeldDelay collapses a burst of hold changes (a large gang's members
	// reserved one by one) into one annotation patch.
	HeldDelay time.Duration
}

type desiredCondition struct {
	cond metav1.Condition
	uid  types.UID
}

// NewWriter returns a writer; call Run to start it.
func NewWriter(pgClient pgclientset.Interface, client kubernetes.Interface, recorder events.EventRecorder, onChange func(ident.Ref, *Condition, *Condition)) *Writer {
	return &Writer{
		pgClient: pgClient, client: client, recorder: recorder, onChange: onChange,
		desired: map[ident.Ref]desiredCondition{},
		unsaid:  map[ident.Ref]*v1.ObjectReference{},
		held:    map[ident.Ref]*heldAnnotation{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[ident.Ref](),
			workqueue.TypedRateLimitingQueueConfig[ident.Ref]{Name: "phalanx-gang-status"}),
		HeldDelay: defaultHeldDelay,
	}
}

// Set records the gang's condition. It returns true when the reason or
// message changed, and emits an event on the group object when the reason did.
func (w *Writer) Set(spec *gangspec.Spec, c Condition) bool {
	w.mu.Lock()
	old, had := w.desired[spec.Ref]
	if had && old.cond.Status == c.Status && old.cond.Reason == c.Reason && old.cond.Message == c.Message {
		w.mu.Unlock()
		return false
	}
	cond := metav1.Condition{
		Type: ConditionScheduled, Status: c.Status, Reason: c.Reason, Message: c.Message,
		LastTransitionTime: metav1.NewTime(w.now()),
	}
	if had && old.cond.Status == c.Status {
		cond.LastTransitionTime = old.cond.LastTransitionTime
	}
	cond.ObservedGeneration = spec.Generation
	w.desired[spec.Ref] = desiredCondition{cond: cond, uid: spec.UID}
	w.mu.Unlock()

	if w.onChange != nil {
		var prev *Condition
		if had {
			prev = &Condition{Status: old.cond.Status, Reason: old.cond.Reason, Message: old.cond.Message}
		}
		w.onChange(spec.Ref, prev, &c)
	}
	// An event when the reason changes; a new message under the same reason
	// (one more member arrived, one more node fits) only updates the condition.
	if w.recorder != nil && (!had || old.cond.Reason != c.Reason) {
		if w.leading() {
			w.event(objectRef(spec), c)
		} else {
			// Said when this replica starts leading, if still true then.
			w.mu.Lock()
			w.unsaid[spec.Ref] = objectRef(spec)
			w.mu.Unlock()
		}
	}
	w.queue.Add(spec.Ref)
	return true
}

func (w *Writer) event(obj *v1.ObjectReference, c Condition) {
	eventType := v1.EventTypeNormal
	if c.Status != metav1.ConditionTrue && c.Reason != gang.ReasonReserving {
		eventType = v1.EventTypeWarning
	}
	w.recorder.Eventf(obj, nil, eventType, c.Reason, "Scheduling", "%s", c.Message)
}

func objectRef(spec *gangspec.Spec) *v1.ObjectReference {
	switch spec.Ref.Source {
	case ident.SourceWorkload:
		return &v1.ObjectReference{APIVersion: schedulingv1beta1.SchemeGroupVersion.String(), Kind: "PodGroup",
			Namespace: spec.Namespace, Name: spec.Name, UID: spec.UID}
	case ident.SourceComposite:
		return &v1.ObjectReference{APIVersion: schedulingv1alpha3.SchemeGroupVersion.String(), Kind: "CompositePodGroup",
			Namespace: spec.Namespace, Name: spec.Name, UID: spec.UID}
	}
	return &v1.ObjectReference{APIVersion: pgv1alpha1.SchemeGroupVersion.String(), Kind: "PodGroup",
		Namespace: spec.Namespace, Name: spec.Name, UID: spec.UID}
}

func (w *Writer) now() time.Time {
	if w.Clock == nil {
		return time.Now()
	}
	return w.Clock.Now()
}

func (w *Writer) leading() bool { return w.Leading == nil || w.Leading() }

// RequeueAll writes every gang's condition again, and emits the events it
// held back (a replica that starts leading says what it has seen while it
// stood by).
func (w *Writer) RequeueAll() {
	type unsaid struct {
		obj  *v1.ObjectReference
		cond Condition
	}
	w.mu.Lock()
	refs := make([]ident.Ref, 0, len(w.desired))
	var events []unsaid
	for ref, d := range w.desired {
		refs = append(refs, ref)
		if obj, ok := w.unsaid[ref]; ok {
			events = append(events, unsaid{obj, Condition{Status: d.cond.Status, Reason: d.cond.Reason, Message: d.cond.Message}})
		}
	}
	w.unsaid = map[ident.Ref]*v1.ObjectReference{}
	for ref, h := range w.held {
		// Another replica may have written since: say it again.
		h.written = false
		if _, ok := w.desired[ref]; !ok {
			refs = append(refs, ref)
		}
	}
	w.mu.Unlock()
	for _, e := range events {
		w.event(e.obj, e.cond)
	}
	for _, ref := range refs {
		w.queue.Add(ref)
	}
}

// Get returns the last condition set for a gang.
func (w *Writer) Get(ref ident.Ref) (Condition, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	d, ok := w.desired[ref]
	return Condition{Status: d.cond.Status, Reason: d.cond.Reason, Message: d.cond.Message}, ok
}

// Tracked counts what the writer keeps per gang, for tests that check
// nothing is kept for gangs gone.
func (w *Writer) Tracked() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return map[string]int{"desired": len(w.desired), "unsaid": len(w.unsaid)}
}

// Forget drops what is known about a deleted gang.
func (w *Writer) Forget(ref ident.Ref) {
	w.mu.Lock()
	d, had := w.desired[ref]
	delete(w.desired, ref)
	delete(w.unsaid, ref)
	delete(w.held, ref)
	w.mu.Unlock()
	if had && w.onChange != nil {
		w.onChange(ref, &Condition{Status: d.cond.Status, Reason: d.cond.Reason, Message: d.cond.Message}, nil)
	}
}

// forgetIfUID forgets a gang's condition if it is still the one of the group
// object with the given UID (not of one made again since under its name).
func (w *Writer) forgetIfUID(ref ident.Ref, uid types.UID) {
	w.mu.Lock()
	d, ok := w.desired[ref]
	w.mu.Unlock()
	if ok && d.uid == uid {
		w.Forget(ref)
	}
}

// Run patches status until ctx ends.
func (w *Writer) Run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		w.queue.ShutDown()
	}()
	// A few workers: gangs come and go in bursts, and one slow patch must not
	// hold back the others' conditions (a key is never patched twice at once).
	var wg sync.WaitGroup
	for i := 0; i < statusWorkers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait.UntilWithContext(ctx, func(ctx context.Context) {
				for w.processNext(ctx) {
				}
			}, 0)
		}()
	}
	wg.Wait()
}

// statusWorkers patch gang conditions (and held annotations) in parallel.
const statusWorkers = 4

func (w *Writer) processNext(ctx context.Context) bool {
	ref, quit := w.queue.Get()
	if quit {
		return false
	}
	defer w.queue.Done(ref)
	w.mu.Lock()
	d, ok := w.desired[ref]
	held, heldDue := w.heldDueLocked(ref)
	w.mu.Unlock()
	if (!ok && !heldDue) || !w.leading() {
		w.queue.Forget(ref)
		return true
	}
	var err error
	if ok {
		switch ref.Source {
		case ident.SourceWorkload:
			err = w.patchUpstream(ctx, ref, d.cond)
		case ident.SourceComposite:
			err = w.patchComposite(ctx, ref, d.cond)
		default:
			err = w.patchPodGroup(ctx, ref, d.cond)
		}
	}
	if heldDue && (err == nil || apierrors.IsNotFound(err)) {
		if err == nil {
			err = w.patchHeld(ctx, ref, held)
		}
		if err == nil || apierrors.IsNotFound(err) {
			// Written, or there is nothing left to write it on.
			w.heldWritten(ref, held)
		}
	}
	if err != nil && !apierrors.IsNotFound(err) {
		klog.FromContext(ctx).V(2).Info("Retrying gang status patch", "gang", ref, "err", err)
		w.queue.AddRateLimited(ref)
		return true
	}
	if apierrors.IsNotFound(err) && ok {
		// The group object is gone: a condition set after its delete event
		// would otherwise stay.
		w.forgetIfUID(ref, d.uid)
	}
	w.queue.Forget(ref)
	return true
}

// patchPodGroup merges the condition into a scheduler-plugins PodGroup's
// conditions. The upstream Go type has no conditions field, so the list is
// read and written as raw JSON (gang.ReadConditions).
func (w *Writer) patchPodGroup(ctx context.Context, ref ident.Ref, cond metav1.Condition) error {
	var conds []metav1.Condition
	// Generated fake clientsets have no REST client: they get the condition
	// alone.
	if rc, ok := w.pgClient.SchedulingV1alpha1().RESTClient().(*rest.RESTClient); ok && rc != nil {
		raw, err := rc.Get().Namespace(ref.Namespace).Resource("podgroups").Name(ref.Name).DoRaw(ctx)
		if err != nil {
			return err
		}
		if conds, err = gangspec.ReadConditions(raw); err != nil {
			return err
		}
	}
	if !setCondition(&conds, cond) {
		return nil
	}
	body, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": conds}})
	if err != nil {
		return err
	}
	_, err = w.pgClient.SchedulingV1alpha1().PodGroups(ref.Namespace).Patch(ctx, ref.Name, types.MergePatchType, body, metav1.PatchOptions{}, "status")
	return err
}

// patchComposite writes phalanx's condition, and the upstream conditions it
// implies, on a CompositePodGroup.
func (w *Writer) patchComposite(ctx context.Context, ref ident.Ref, cond metav1.Condition) error {
	cpg, err := w.client.SchedulingV1alpha3().CompositePodGroups(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	cond.ObservedGeneration = cpg.Generation
	if !upstreamConditionsAs(&cpg.Status.Conditions, cond, compositeScheduled) {
		return nil
	}
	_, err = w.client.SchedulingV1alpha3().CompositePodGroups(ref.Namespace).UpdateStatus(ctx, cpg, metav1.UpdateOptions{})
	return err
}

// patchUpstream writes phalanx's condition, and the upstream conditions it
// implies (upstreamConditions), on an upstream PodGroup.
func (w *Writer) patchUpstream(ctx context.Context, ref ident.Ref, cond metav1.Condition) error {
	pg, err := w.client.SchedulingV1beta1().PodGroups(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	cond.ObservedGeneration = pg.Generation
	if !upstreamConditions(&pg.Status.Conditions, cond) {
		return nil
	}
	_, err = w.client.SchedulingV1beta1().PodGroups(ref.Namespace).UpdateStatus(ctx, pg, metav1.UpdateOptions{})
	return err
}

// setCondition sets cond in conds; false when it was already there as is.
func setCondition(conds *[]metav1.Condition, cond metav1.Condition) bool {
	if existing := meta.FindStatusCondition(*conds, cond.Type); existing != nil &&
		existing.Status == cond.Status && existing.Reason == cond.Reason && existing.Message == cond.Message {
		return false
	}
	meta.SetStatusCondition(conds, cond)
	return true
}
