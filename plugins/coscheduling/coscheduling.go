// Package coscheduling is the Coscheduling plugin: all-or-nothing gangs from
// scheduler-plugins PodGroups, planned as a whole before anything is reserved.
// It adapts the framework's extension points to internal/gang.
package coscheduling

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/phalanx-sched/phalanx/apis/config"
	configv1 "github.com/phalanx-sched/phalanx/apis/config/v1"
	"github.com/phalanx-sched/phalanx/apis/config/validation"
	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/gang"
	"github.com/phalanx-sched/phalanx/internal/resources"
	"github.com/phalanx-sched/phalanx/plugins/shared"
)

// Name is the plugin name used in the scheduler configuration.
const Name = "Coscheduling"

// DependsOnAnnotation on a PodGroup names gangs (same namespace) that must be
// running or done before its pods are scheduled.
const DependsOnAnnotation = phalanxv1alpha1.DependsOnAnnotation

const stateKey fwk.StateKey = "phalanx.dev/" + Name

// podGroupEvents is the dynamic-informer resource of PodGroups.
const podGroupEvents fwk.EventResource = "podgroups.v1alpha1.scheduling.x-k8s.io"

// Coscheduling implements gang scheduling over the shared gang manager.
type Coscheduling struct {
	h       fwk.Handle
	s       *shared.State
	timeout time.Duration

	mu sync.Mutex
	// failed holds gangs whose last plan failed; they are woken when holds
	// are dropped, since that frees capacity without any API event.
	failed map[string]bool
	// podEvents dedups the per-pod events of PreEnqueue.
	podEvents map[types.UID]string
}

var (
	_ fwk.PreEnqueuePlugin  = &Coscheduling{}
	_ fwk.QueueSortPlugin   = &Coscheduling{}
	_ fwk.PreFilterPlugin   = &Coscheduling{}
	_ fwk.FilterPlugin      = &Coscheduling{}
	_ fwk.PostFilterPlugin  = &Coscheduling{}
	_ fwk.ReservePlugin     = &Coscheduling{}
	_ fwk.PermitPlugin      = &Coscheduling{}
	_ fwk.EnqueueExtensions = &Coscheduling{}
)

// New builds the plugin from validated args.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, err := decodeArgs(obj)
	if err != nil {
		return nil, err
	}
	if err := validation.ValidateCoschedulingArgs(field.NewPath("pluginConfig").Key(Name).Child("args"), args); err != nil {
		return nil, fmt.Errorf("profile %q: %w", h.ProfileName(), err)
	}
	s, err := shared.Get(ctx, h)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	registerMetrics()
	pl := &Coscheduling{
		h:         h,
		s:         s,
		timeout:   time.Duration(args.DefaultScheduleTimeoutSeconds) * time.Second,
		failed:    map[string]bool{},
		podEvents: map[types.UID]string{},
	}
	s.OnCapacityFreed(pl.wakeFailedGangs)
	s.OnPodGroupChange(pl.wakeGangAndDependents)
	return pl, nil
}

func decodeArgs(obj runtime.Object) (*config.CoschedulingArgs, error) {
	if obj == nil {
		return &config.CoschedulingArgs{DefaultScheduleTimeoutSeconds: configv1.DefaultScheduleTimeoutSeconds}, nil
	}
	args, ok := obj.(*config.CoschedulingArgs)
	if !ok {
		return nil, fmt.Errorf("want args of type CoschedulingArgs, got %T", obj)
	}
	return args, nil
}

// Name returns the plugin name.
func (pl *Coscheduling) Name() string { return Name }

// cycleState carries what PreFilter learned to Filter and Reserve.
type cycleState struct {
	gangKey string
	shape   string
	request resources.List
	// planning is set when this cycle must plan the gang. Filter plugins can
	// only be run once every PreFilter has finished (plugins that skipped are
	// known then), so the first Filter call of the cycle plans, once.
	planning *planning
	// nested marks the state of the planner's own filter runs.
	nested bool
}

// planning is one cycle's plan of a gang, computed at most once.
type planning struct {
	once    sync.Once
	state   fwk.CycleState
	pod     *v1.Pod
	pg      *pgv1alpha1.PodGroup
	members []*v1.Pod
	placed  map[types.UID]bool
	nodes   []fwk.NodeInfo

	open   sets.Set[string]
	status *fwk.Status
}

func (c *cycleState) Clone() fwk.StateData { return c }

func readState(state fwk.CycleState) *cycleState {
	d, err := state.Read(stateKey)
	if err != nil {
		return nil
	}
	c, _ := d.(*cycleState)
	return c
}

// Less orders by queue share (with CapacityQueue: the queue furthest below
// its deserved share first), then priority, then gang age, keeping each
// gang's members together so they are scheduled back to back.
func (pl *Coscheduling) Less(a, b fwk.QueuedPodInfo) bool {
	pa, pb := a.GetPodInfo().GetPod(), b.GetPodInfo().GetPod()
	if qo := pl.s.QueueOrder(); qo != nil {
		if c := qo.Compare(pa, pb); c != 0 {
			return c < 0
		}
	}
	if prioA, prioB := corev1helpers.PodPriority(pa), corev1helpers.PodPriority(pb); prioA != prioB {
		return prioA > prioB
	}
	ta, ka := pl.groupOrder(a)
	tb, kb := pl.groupOrder(b)
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	if ka != kb {
		return ka < kb
	}
	return a.GetTimestamp().Before(b.GetTimestamp())
}

func (pl *Coscheduling) groupOrder(qp fwk.QueuedPodInfo) (time.Time, string) {
	pod := qp.GetPodInfo().GetPod()
	if key := shared.GangKey(pod); key != "" {
		if pg, err := pl.s.PodGroup(key); err == nil {
			return pg.CreationTimestamp.Time, key
		}
	}
	return qp.GetTimestamp(), pod.Namespace + "/" + pod.Name
}

// PreEnqueue keeps a gang's pods out of the active queue until the PodGroup
// exists, its dependencies run, and minMember members exist.
func (pl *Coscheduling) PreEnqueue(ctx context.Context, pod *v1.Pod) *fwk.Status {
	key := shared.GangKey(pod)
	if key == "" {
		return nil
	}
	pg, err := pl.s.PodGroup(key)
	if err != nil {
		msg := fmt.Sprintf("PodGroup %q does not exist; the pod waits until it is created", key)
		pl.podEvent(pod, shared.ReasonPodGroupMissing, msg)
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	if st := pl.checkDependencies(pg); st != nil {
		return st
	}
	members := 0
	for _, m := range pl.s.Members(key) {
		if m.DeletionTimestamp == nil {
			members++
		}
	}
	members += int(pg.Status.Succeeded)
	if members < int(pg.Spec.MinMember) {
		msg := fmt.Sprintf("%d of %d members exist; waiting for the rest before scheduling any", members, pg.Spec.MinMember)
		pl.s.Status.Set(pg, metav1.ConditionFalse, shared.ReasonMembersPending, msg)
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	return nil
}

func (pl *Coscheduling) checkDependencies(pg *pgv1alpha1.PodGroup) *fwk.Status {
	deps := dependencies(pg)
	for _, dep := range deps {
		if dep == pg.Name {
			msg := fmt.Sprintf("PodGroup depends on itself (%s=%q)", DependsOnAnnotation, pg.Annotations[DependsOnAnnotation])
			pl.s.Status.Set(pg, metav1.ConditionFalse, shared.ReasonDependencyMissing, msg)
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
		}
		dpg, err := pl.s.PodGroups.PodGroups(pg.Namespace).Get(dep)
		if err != nil {
			msg := fmt.Sprintf("dependency PodGroup %s/%s does not exist", pg.Namespace, dep)
			pl.s.Status.Set(pg, metav1.ConditionFalse, shared.ReasonDependencyMissing, msg)
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
		}
		if done, need := pl.dependencyProgress(dpg); done < need {
			msg := fmt.Sprintf("waiting for gang %s: %d of %d members running or succeeded", dep, done, need)
			pl.s.Status.Set(pg, metav1.ConditionFalse, shared.ReasonDependencyPending, msg)
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
		}
	}
	return nil
}

func dependencies(pg *pgv1alpha1.PodGroup) []string {
	raw := pg.Annotations[DependsOnAnnotation]
	if raw == "" {
		return nil
	}
	var out []string
	for _, d := range strings.Split(raw, ",") {
		if d = strings.TrimSpace(d); d != "" {
			out = append(out, d)
		}
	}
	return out
}

// dependencyProgress counts members running (from the informer, which is
// fresh) or succeeded (from the controller's status: the scheduler does not
// watch finished pods).
func (pl *Coscheduling) dependencyProgress(dpg *pgv1alpha1.PodGroup) (done, need int) {
	running := 0
	for _, m := range pl.s.Members(dpg.Namespace + "/" + dpg.Name) {
		if m.Status.Phase == v1.PodRunning {
			running++
		}
	}
	if int(dpg.Status.Running) > running {
		running = int(dpg.Status.Running)
	}
	if dpg.Status.Phase == pgv1alpha1.PodGroupFinished {
		return int(dpg.Spec.MinMember), int(dpg.Spec.MinMember)
	}
	return running + int(dpg.Status.Succeeded), int(dpg.Spec.MinMember)
}

func (pl *Coscheduling) podEvent(pod *v1.Pod, reason, msg string) {
	pl.mu.Lock()
	if pl.podEvents[pod.UID] == msg {
		pl.mu.Unlock()
		return
	}
	pl.podEvents[pod.UID] = msg
	pl.mu.Unlock()
	pl.h.EventRecorder().Eventf(pod, nil, v1.EventTypeWarning, reason, "Scheduling", "%s", msg)
}

// PreFilter plans the whole gang at its first member and steers every member
// to its planned nodes. Pods outside gangs only pass through to Filter, which
// keeps them off capacity that plans hold.
func (pl *Coscheduling) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	key := shared.GangKey(pod)
	if key == "" {
		if !pl.s.Gangs.HoldsAnywhere() {
			return nil, fwk.NewStatus(fwk.Skip)
		}
		state.Write(stateKey, &cycleState{request: resources.PodRequests(pod)})
		return nil, nil
	}
	pg, err := pl.s.PodGroup(key)
	if err != nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("PodGroup %q does not exist", key))
	}
	cs := &cycleState{gangKey: key, shape: gang.ShapeKey(pod), request: resources.PodRequests(pod)}
	state.Write(stateKey, cs)

	members := pl.s.Members(key)
	placed := pl.placed(key, members)
	if len(placed) >= int(pg.Spec.MinMember) {
		// Quorum reached: further members schedule as capacity allows.
		return nil, nil
	}
	if open, live := pl.s.Gangs.OpenNodes(key, cs.shape); live {
		if open.Len() > 0 {
			return &fwk.PreFilterResult{NodeNames: open}, nil
		}
		// Siblings of other shapes complete the plan; this one is extra.
		return nil, nil
	}
	if reason, failed := pl.s.Gangs.Failed(key); failed {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, reason)
	}
	cs.planning = &planning{state: state, pod: pod, pg: pg, members: members, placed: placed, nodes: nodes}
	return nil, nil
}

// placed returns the members that count toward the quorum: bound by the
// informer's view, or reserved in this scheduler, each counted once.
func (pl *Coscheduling) placed(key string, members []*v1.Pod) map[types.UID]bool {
	out := map[types.UID]bool{}
	for _, m := range members {
		if m.Spec.NodeName != "" && m.DeletionTimestamp == nil {
			out[m.UID] = true
		}
	}
	for uid := range pl.s.Gangs.ReservedUIDs(key) {
		out[uid] = true
	}
	return out
}

// PreFilterExtensions is nil: holds do not change when pods are added or
// removed in a simulation.
func (pl *Coscheduling) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter plans the gang at the cycle's first call when PreFilter asked for
// it and admits only planned nodes; for every pod it keeps off capacity held
// by other gangs' plans.
func (pl *Coscheduling) Filter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	cs := readState(state)
	if cs == nil {
		return nil
	}
	if p := cs.planning; p != nil && !cs.nested {
		p.once.Do(func() { p.open, p.status = pl.plan(ctx, p, cs) })
		if p.status != nil {
			return p.status
		}
		if !p.open.Has(nodeInfo.Node().Name) {
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node is not in the gang's plan")
		}
	}
	held, heldPods := pl.s.Gangs.Held(nodeInfo.Node().Name, cs.gangKey)
	if held == nil && heldPods == 0 {
		return nil
	}
	free, freePods := freeOn(nodeInfo)
	free.Sub(held)
	if freePods-heldPods < 1 || !free.Fits(cs.request) {
		// Unresolvable: evicting pods here would not release a hold.
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "capacity on the node is held for a planned gang")
	}
	return nil
}

// freeOn is what the node has left by the scheduler's own accounting.
func freeOn(ni fwk.NodeInfo) (resources.List, int64) {
	alloc, req := ni.GetAllocatable(), ni.GetRequested()
	free := resources.List{
		v1.ResourceCPU:              alloc.GetMilliCPU() - req.GetMilliCPU(),
		v1.ResourceMemory:           alloc.GetMemory() - req.GetMemory(),
		v1.ResourceEphemeralStorage: alloc.GetEphemeralStorage() - req.GetEphemeralStorage(),
	}
	for name, v := range alloc.GetScalarResources() {
		free[name] = v - req.GetScalarResources()[name]
	}
	return free, int64(alloc.GetAllowedPodNumber() - len(ni.GetPods()))
}

// PostFilter handles a gang member that fits none of its nodes: if the gang
// has a plan, the plan is broken, so every waiting member is rejected and all
// holds are freed. Gang members never preempt one pod at a time.
func (pl *Coscheduling) PostFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	key := shared.GangKey(pod)
	if key == "" {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	pg, err := pl.s.PodGroup(key)
	if err != nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "PodGroup does not exist")
	}
	// Every node failed an earlier filter, so the plan never ran: run it now
	// for its diagnosis (which filters, how many members fit) and status.
	if cs := readState(state); cs != nil && cs.planning != nil {
		p := cs.planning
		p.once.Do(func() { p.open, p.status = pl.plan(ctx, p, cs) })
		if p.status != nil {
			return nil, p.status
		}
	}
	if _, live := pl.s.Gangs.OpenNodes(key, gang.ShapeKey(pod)); live && len(pl.placed(key, pl.s.Members(key))) < int(pg.Spec.MinMember) {
		msg := fmt.Sprintf("plan broken: member %s fits none of its planned nodes; replanning the gang", pod.Name)
		pl.tearDown(ctx, pg, shared.ReasonPlanBroken, msg)
	}
	return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "gang members are not placed by per-pod preemption")
}

// tearDown drops the gang's plan, rejects its waiting members and wakes
// gangs that were waiting for the capacity it held.
func (pl *Coscheduling) tearDown(ctx context.Context, pg *pgv1alpha1.PodGroup, reason, msg string) {
	key := pg.Namespace + "/" + pg.Name
	klog.FromContext(ctx).V(2).Info("Tearing down gang", "podGroup", key, "reason", reason, "message", msg)
	pl.s.Gangs.Drop(key)
	pl.h.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		if shared.GangKey(wp.GetPod()) == key {
			wp.Reject(Name, msg)
		}
	})
	pl.s.Status.Set(pg, metav1.ConditionFalse, reason, msg)
	planOutcomes.WithLabelValues(reason).Inc()
	pl.s.CapacityFreed()
}

// Reserve charges the member to its gang's plan.
func (pl *Coscheduling) Reserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	if cs := readState(state); cs != nil && cs.gangKey != "" {
		pl.s.Gangs.Reserve(cs.gangKey, pod.UID, nodeName, cs.shape)
	}
	return nil
}

// Unreserve runs when a member is rejected, times out in Permit or fails to
// bind. Before the quorum that tears the whole gang down: no partial holds.
func (pl *Coscheduling) Unreserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) {
	key := shared.GangKey(pod)
	if key == "" {
		return
	}
	wasReserved := pl.s.Gangs.IsReserved(key, pod.UID)
	pl.s.Gangs.Unreserve(key, pod.UID)
	if !wasReserved || pl.s.Gangs.Permitted(key) {
		return
	}
	pg, err := pl.s.PodGroup(key)
	if err != nil {
		pl.s.Gangs.Drop(key)
		return
	}
	if pl.s.Gangs.Expired(key) {
		pl.tearDown(ctx, pg, shared.ReasonTimeout, fmt.Sprintf(
			"only %d of %d members were placed within %v; all members released", len(pl.placed(key, pl.s.Members(key))), pg.Spec.MinMember, pl.scheduleTimeout(pg)))
		return
	}
	pl.tearDown(ctx, pg, shared.ReasonPlanBroken, fmt.Sprintf("member %s was released before the gang was complete; replanning", pod.Name))
}

// Permit lets members through only together: it waits until minMember
// members are placed, then allows all of them at once.
func (pl *Coscheduling) Permit(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) (*fwk.Status, time.Duration) {
	key := shared.GangKey(pod)
	if key == "" {
		return nil, 0
	}
	pg, err := pl.s.PodGroup(key)
	if err != nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "PodGroup does not exist"), 0
	}
	placed := len(pl.placed(key, pl.s.Members(key)))
	if placed < int(pg.Spec.MinMember) {
		wait := pl.s.Gangs.Remaining(key)
		if wait <= 0 {
			wait = pl.scheduleTimeout(pg)
		}
		return fwk.NewStatus(fwk.Wait, fmt.Sprintf("%d of %d members placed", placed, pg.Spec.MinMember)), wait
	}
	if !pl.s.Gangs.Permitted(key) {
		pl.s.Gangs.SetPermitted(key, true)
		gangWait.Observe(time.Since(pg.CreationTimestamp.Time).Seconds())
		pl.s.Status.Set(pg, metav1.ConditionTrue, shared.ReasonScheduled,
			fmt.Sprintf("%d of %d members placed; the gang starts", placed, pg.Spec.MinMember))
	}
	pl.h.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		if shared.GangKey(wp.GetPod()) == key {
			wp.Allow(Name)
		}
	})
	pl.mu.Lock()
	delete(pl.failed, key)
	pl.mu.Unlock()
	return nil, 0
}

func (pl *Coscheduling) scheduleTimeout(pg *pgv1alpha1.PodGroup) time.Duration {
	if pg.Spec.ScheduleTimeoutSeconds != nil && *pg.Spec.ScheduleTimeoutSeconds > 0 {
		return time.Duration(*pg.Spec.ScheduleTimeoutSeconds) * time.Second
	}
	return pl.timeout
}

// wakeFailedGangs moves the pending members of gangs whose plan failed back
// to the active queue: held capacity was just freed without an API event.
func (pl *Coscheduling) wakeFailedGangs() {
	pl.mu.Lock()
	keys := make([]string, 0, len(pl.failed))
	for k := range pl.failed {
		keys = append(keys, k)
	}
	pl.mu.Unlock()
	pl.activatePending(keys)
}

// wakeGangAndDependents moves the pending members of a changed PodGroup, and
// of gangs that depend on it, back to the active queue, where PreEnqueue looks
// at them again.
func (pl *Coscheduling) wakeGangAndDependents(pg *pgv1alpha1.PodGroup) {
	keys := []string{pg.Namespace + "/" + pg.Name}
	if all, err := pl.s.PodGroups.PodGroups(pg.Namespace).List(labels.Everything()); err == nil {
		for _, other := range all {
			for _, d := range dependencies(other) {
				if d == pg.Name {
					keys = append(keys, other.Namespace+"/"+other.Name)
				}
			}
		}
	}
	pl.activatePending(keys)
}

// activatePending moves the unbound members of the gangs to the active queue.
func (pl *Coscheduling) activatePending(keys []string) {
	pods := map[string]*v1.Pod{}
	for _, key := range keys {
		for _, m := range pl.s.Members(key) {
			if m.Spec.NodeName == "" {
				pods[m.Namespace+"/"+m.Name] = m
			}
		}
	}
	if len(pods) > 0 {
		pl.h.Activate(klog.Background(), pods)
	}
}

// EventsToRegister lists the events that can make a rejected member
// schedulable, including those of the plugins the planner consults (a
// rejected gang is requeued only by the rejecting plugin's events).
func (pl *Coscheduling) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	var collaborators []fwk.ClusterEventWithHint
	if pl.s.NodeLimiter() != nil {
		collaborators = append(collaborators, fwk.ClusterEventWithHint{Event: fwk.ClusterEvent{
			Resource: "noderesourcetopologies.v1alpha2.topology.node.k8s.io", ActionType: fwk.Add | fwk.Update}})
	}
	if pl.s.Topology() != nil {
		collaborators = append(collaborators, fwk.ClusterEventWithHint{Event: fwk.ClusterEvent{
			Resource: "networktopologies.v1alpha1.scheduling.phalanx.dev", ActionType: fwk.All}})
	}
	return append(collaborators, []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Add}, QueueingHintFn: pl.hintSiblingAdded},
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}},
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Update}, QueueingHintFn: pl.hintDependencyProgress},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint}},
		{Event: fwk.ClusterEvent{Resource: podGroupEvents, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: pl.hintPodGroup},
	}...), nil
}

func (pl *Coscheduling) hintSiblingAdded(_ klog.Logger, pod *v1.Pod, _, newObj any) (fwk.QueueingHint, error) {
	added, ok := newObj.(*v1.Pod)
	if !ok {
		return fwk.Queue, nil
	}
	if key := shared.GangKey(pod); key != "" && key == shared.GangKey(added) {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// hintDependencyProgress requeues a gang's pods when a member of one of its
// dependencies starts running.
func (pl *Coscheduling) hintDependencyProgress(_ klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	updated, ok := newObj.(*v1.Pod)
	if !ok {
		return fwk.Queue, nil
	}
	if updated.Status.Phase != v1.PodRunning && updated.Status.Phase != v1.PodSucceeded {
		return fwk.QueueSkip, nil
	}
	if old, ok := oldObj.(*v1.Pod); ok && old.Status.Phase == updated.Status.Phase {
		return fwk.QueueSkip, nil
	}
	depName := updated.Labels[shared.PodGroupLabel]
	key := shared.GangKey(pod)
	if depName == "" || key == "" || updated.Namespace != pod.Namespace {
		return fwk.QueueSkip, nil
	}
	pg, err := pl.s.PodGroup(key)
	if err != nil {
		return fwk.QueueSkip, nil
	}
	for _, d := range dependencies(pg) {
		if d == depName {
			return fwk.Queue, nil
		}
	}
	return fwk.QueueSkip, nil
}

func (pl *Coscheduling) hintPodGroup(_ klog.Logger, pod *v1.Pod, _, newObj any) (fwk.QueueingHint, error) {
	key := shared.GangKey(pod)
	if key == "" {
		return fwk.QueueSkip, nil
	}
	meta, err := apimeta.Accessor(newObj)
	if err != nil {
		return fwk.Queue, nil
	}
	if meta.GetNamespace() != pod.Namespace {
		return fwk.QueueSkip, nil
	}
	if pod.Namespace+"/"+meta.GetName() == key {
		return fwk.Queue, nil
	}
	if pg, err := pl.s.PodGroup(key); err == nil {
		for _, d := range dependencies(pg) {
			if d == meta.GetName() {
				return fwk.Queue, nil
			}
		}
	} else if apierrors.IsNotFound(err) {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}
