// Package coscheduling is the Coscheduling plugin: all-or-nothing gangs,
// planned as a whole before anything is reserved, bound together, and never
// left waiting forever. It adapts the framework's extension points to the
// gang lifecycle of internal/gang, through the process runtime.
package coscheduling

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/phalanx-sched/phalanx/apis/config"
	configv1 "github.com/phalanx-sched/phalanx/apis/config/v1"
	"github.com/phalanx-sched/phalanx/apis/config/validation"
	"github.com/phalanx-sched/phalanx/internal/gang"
	"github.com/phalanx-sched/phalanx/internal/resources"
	"github.com/phalanx-sched/phalanx/plugins/runtime"
)

// Name is the plugin name used in the scheduler configuration.
const Name = runtime.GangPlugin

const stateKey fwk.StateKey = "phalanx.dev/" + Name

// capacityQueue is the plugin whose queue shares order the queue when it is
// enabled in the profile.
const capacityQueue = "CapacityQueue"

// sweepEvery is how often partly bound gangs are looked for.
const sweepEvery = 5 * time.Second

// Coscheduling implements gang scheduling over the process runtime.
type Coscheduling struct {
	h            fwk.Handle
	rt           *runtime.Runtime
	gangs        *runtime.Gangs
	lc           *gang.Lifecycle
	timeout      time.Duration
	reserveAfter time.Duration

	// queueOrder is resolved on first use: whether CapacityQueue is enabled
	// in this profile (known only once every plugin is built).
	queueOrderOnce sync.Once
	queueOrder     bool
}

var (
	_ fwk.PreEnqueuePlugin  = &Coscheduling{}
	_ fwk.QueueSortPlugin   = &Coscheduling{}
	_ fwk.PreFilterPlugin   = &Coscheduling{}
	_ fwk.FilterPlugin      = &Coscheduling{}
	_ fwk.PostFilterPlugin  = &Coscheduling{}
	_ fwk.ReservePlugin     = &Coscheduling{}
	_ fwk.PermitPlugin      = &Coscheduling{}
	_ fwk.PreBindPlugin     = &Coscheduling{}
	_ fwk.PostBindPlugin    = &Coscheduling{}
	_ fwk.EnqueueExtensions = &Coscheduling{}
)

// Factory returns the plugin factory over the process runtime.
func Factory(rt *runtime.Runtime) func(context.Context, k8sruntime.Object, fwk.Handle) (fwk.Plugin, error) {
	return func(ctx context.Context, obj k8sruntime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return New(ctx, obj, h, rt)
	}
}

// New builds the plugin from validated args.
func New(ctx context.Context, obj k8sruntime.Object, h fwk.Handle, rt *runtime.Runtime) (*Coscheduling, error) {
	args, err := decodeArgs(obj)
	if err != nil {
		return nil, err
	}
	if err := validation.ValidateCoschedulingArgs(field.NewPath("pluginConfig").Key(Name).Child("args"), args); err != nil {
		return nil, fmt.Errorf("profile %q: %w", h.ProfileName(), err)
	}
	gangs, err := rt.Gangs(ctx, h)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	pl := &Coscheduling{
		h: h, rt: rt, gangs: gangs, lc: gangs.Lifecycle,
		timeout:      time.Duration(args.DefaultScheduleTimeoutSeconds) * time.Second,
		reserveAfter: time.Duration(args.ReservationAfterSeconds) * time.Second,
	}
	gangs.StartSweeper(ctx, pl.timeout, sweepEvery)
	return pl, nil
}

func decodeArgs(obj k8sruntime.Object) (*config.CoschedulingArgs, error) {
	if obj == nil {
		return &config.CoschedulingArgs{
			DefaultScheduleTimeoutSeconds: configv1.DefaultScheduleTimeoutSeconds,
			ReservationAfterSeconds:       configv1.DefaultReservationAfterSeconds,
		}, nil
	}
	args, ok := obj.(*config.CoschedulingArgs)
	if !ok {
		return nil, fmt.Errorf("want args of type CoschedulingArgs, got %T", obj)
	}
	return args, nil
}

// Name returns the plugin name.
func (pl *Coscheduling) Name() string { return Name }

// cycleState is what PreFilter learned for the rest of the cycle.
type cycleState struct {
	// ref and spec are zero for a pod outside gangs.
	ref      gang.Ref
	spec     *gang.Spec
	shape    string
	request  resources.List
	priority int32
	// planning is set when this cycle plans the gang (see Filter).
	planning *planning
	// steered: the member was sent to its planned node.
	steered bool
}

// Clone shares the cycle's planning: the framework clones the state to
// filter a node with its nominated pods added, and that pass may be the
// cycle's first Filter call. The plan is made once per cycle, from the
// cycle's own snapshot, whichever copy asks first.
func (c *cycleState) Clone() fwk.StateData {
	out := *c
	return &out
}

func readState(state fwk.CycleState) *cycleState {
	d, err := state.Read(stateKey)
	if err != nil {
		return nil
	}
	c, _ := d.(*cycleState)
	return c
}

// Less orders the scheduling queue: by queue share when CapacityQueue is
// enabled in the profile (the queue furthest below its deserved share first),
// then gangs that are partly placed (they hold capacity they cannot use until
// complete — after a crash in the middle of their binds, say), then
// priority, then gang age, keeping each gang's members together so they are
// scheduled back to back.
func (pl *Coscheduling) Less(a, b fwk.QueuedPodInfo) bool {
	var queues *runtime.Queues
	if pl.ordersByQueue() {
		queues = pl.rt.QueuesIfBuilt()
	}
	ka, kb := pl.orderKeyOf(a, queues), pl.orderKeyOf(b, queues)
	if queues != nil {
		if c := queues.Ordering().Compare(ka.queue, kb.queue); c != 0 {
			return c < 0
		}
	}
	if ka.incomplete != kb.incomplete {
		return ka.incomplete
	}
	if ka.priority != kb.priority {
		return ka.priority > kb.priority
	}
	if !ka.created.Equal(kb.created) {
		return ka.created.Before(kb.created)
	}
	if ka.namespace != kb.namespace {
		return ka.namespace < kb.namespace
	}
	if ka.name != kb.name {
		return ka.name < kb.name
	}
	if ka.source != kb.source {
		return ka.source < kb.source
	}
	return a.GetTimestamp().Before(b.GetTimestamp())
}

// orderKey is what Less compares of one pod: its gang (or the pod itself,
// outside gangs) looked up once per comparison, not once per criterion.
type orderKey struct {
	queue      string
	incomplete bool
	priority   int32
	created    time.Time
	// namespace, name and source name the gang, or the pod outside gangs.
	namespace, name string
	source          gang.Source
}

func (pl *Coscheduling) orderKeyOf(qp fwk.QueuedPodInfo, queues *runtime.Queues) orderKey {
	pod := qp.GetPodInfo().GetPod()
	k := orderKey{priority: corev1helpers.PodPriority(pod), created: qp.GetTimestamp(), namespace: pod.Namespace, name: pod.Name}
	ref, spec, ok, err := pl.gangs.GangOf(pod)
	if ok {
		k.incomplete = pl.lc.Incomplete(ref)
	}
	if ok && err == nil {
		k.created, k.name, k.source = spec.Created, ref.Name, ref.Source
		k.priority = spec.PriorityOf(pod)
		if queues != nil {
			k.queue = queues.QueueOfGang(spec, pod)
		}
	} else if queues != nil {
		k.queue = queues.QueueOf(pod)
	}
	return k
}

// ordersByQueue reports whether CapacityQueue is enabled in this profile.
func (pl *Coscheduling) ordersByQueue() bool {
	pl.queueOrderOnce.Do(func() {
		lister, ok := pl.h.(interface{ ListPlugins() *schedconfig.Plugins })
		if !ok {
			return
		}
		if plugins := lister.ListPlugins(); plugins != nil {
			for _, p := range plugins.PreFilter.Enabled {
				if p.Name == capacityQueue {
					pl.queueOrder = true
				}
			}
		}
	})
	return pl.queueOrder
}

// PreEnqueue keeps a gang's pods out of the active queue until its group
// object exists, its dependencies run, and minMember members exist.
func (pl *Coscheduling) PreEnqueue(ctx context.Context, pod *v1.Pod) *fwk.Status {
	ref, spec, ok, err := pl.gangs.GangOf(pod)
	if !ok {
		return nil
	}
	if err != nil {
		msg := missing(ref, err, pl.gangs.WatchesWorkloadAPI())
		pl.gangs.PodEvent(pod, runtime.ReasonPodGroupMissing, msg)
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	if st := pl.checkDependencies(spec); st != nil {
		return st
	}
	members := pl.gangs.MemberCount(spec)
	if members < quorum(spec) {
		cond := pl.gangs.MembersShort(spec, members, quorum(spec))
		// A member the informer shows late must not put a gang that already
		// started (or is being placed) back to MembersPending.
		if pl.lc.Placed(ref) == 0 && pl.lc.Phase(ref) == gang.PhaseIdle {
			pl.gangs.Status.Set(spec, cond)
		}
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, cond.Message)
	}
	return nil
}

// missing says why a pod's gang cannot be read: its group object does not
// exist (yet), or the pod's gang annotations are invalid.
func missing(ref gang.Ref, err error, watchesWorkloadAPI bool) string {
	if apierrors.IsNotFound(err) {
		if ref.Source == gang.SourceWorkload && !watchesWorkloadAPI {
			return fmt.Sprintf("PodGroup %s/%s (scheduling.k8s.io): phalanx-scheduler does not watch the Workload API, which the API server did not serve when it started; restart phalanx-scheduler", ref.Namespace, ref.Name)
		}
		if ref.Source == gang.SourceWorkload {
			return fmt.Sprintf("PodGroup %s/%s (scheduling.k8s.io) does not exist; the pod waits until it is created", ref.Namespace, ref.Name)
		}
		return fmt.Sprintf("PodGroup %s/%s does not exist; the pod waits until it is created", ref.Namespace, ref.Name)
	}
	return err.Error() + "; the pod is not scheduled until this is fixed"
}

// quorum is the number of members that must be placed together.
func quorum(spec *gang.Spec) int { return max(spec.MinMember, 1) }

func (pl *Coscheduling) checkDependencies(spec *gang.Spec) *fwk.Status {
	for _, dep := range spec.DependsOn() {
		set := func(reason, msg string) *fwk.Status {
			pl.gangs.Status.Set(spec, runtime.Condition{Status: metav1.ConditionFalse, Reason: reason, Message: msg})
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
		}
		if dep == spec.Name && spec.Ref.Source == gang.SourcePodGroup {
			return set(runtime.ReasonDependencyMissing, "PodGroup depends on itself ("+dependsOn(spec)+")")
		}
		dspec, err := pl.gangs.Spec(gang.Ref{Namespace: spec.Namespace, Name: dep})
		if err != nil {
			return set(runtime.ReasonDependencyMissing, fmt.Sprintf("dependency PodGroup %s/%s does not exist", spec.Namespace, dep))
		}
		if done, need := pl.gangs.DependencyProgress(dspec); done < need {
			return set(runtime.ReasonDependencyPending, fmt.Sprintf("waiting for gang %s: %d of %d members running or succeeded", dep, done, need))
		}
	}
	return nil
}

// PreFilter steers a planned member to its planned node, turns away members
// of a gang whose last plan failed while nothing changed, and marks the cycle
// that must plan the gang. Pods outside gangs only pass through to Filter,
// which keeps them off capacity that plans and reservations hold.
func (pl *Coscheduling) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	// Only the leading replica runs scheduling cycles.
	pl.rt.MarkLeading()
	ref, spec, ok, err := pl.gangs.GangOf(pod)
	cs := &cycleState{request: resources.PodRequests(pod), priority: spec.PriorityOf(pod)}
	if !ok {
		state.Write(stateKey, cs)
		if !pl.lc.HoldsAnywhere() {
			// Nothing to filter; PostFilter still runs for preemption.
			return nil, fwk.NewStatus(fwk.Skip)
		}
		return nil, nil
	}
	if err != nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, missing(ref, err, pl.gangs.WatchesWorkloadAPI()))
	}
	cs.ref, cs.spec, cs.shape = ref, spec, gang.ShapeKey(pod)
	state.Write(stateKey, cs)

	if pl.lc.Placed(ref) >= quorum(spec) {
		// Quorum reached: further members schedule as capacity allows.
		return nil, nil
	}
	if node, live := pl.lc.NextSlot(ref, cs.shape); live {
		if node != "" {
			cs.steered = true
			return &fwk.PreFilterResult{NodeNames: setOf(node)}, nil
		}
		// Siblings of other shapes complete the plan; this one is extra.
		return nil, nil
	}
	if reason, failed := pl.lc.Failed(ref); failed {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, reason)
	}
	cs.planning = newPlanning(nodes)
	return nil, nil
}

// PreFilterExtensions is nil: holds do not change when pods are added or
// removed in a simulation.
func (pl *Coscheduling) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter plans the gang when this cycle must (see planning), admits a
// member only on its planned node, and keeps every pod off capacity that
// other gangs' plans and reservations hold.
func (pl *Coscheduling) Filter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	cs := readState(state)
	if cs == nil {
		return nil
	}
	name := nodeInfo.Node().Name
	if p := cs.planning; p != nil {
		target, st := p.run(func() (string, *fwk.Status) { return pl.plan(ctx, state, pod, cs, p) })
		if st != nil {
			return st
		}
		if name != target {
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node is not the gang member's planned node")
		}
	}
	held, heldPods := pl.lc.Held(name, cs.ref, cs.priority)
	if held == nil && heldPods == 0 {
		return nil
	}
	free, freePods := freeOn(nodeInfo)
	free.Sub(held)
	if freePods-heldPods < 1 || !free.Fits(cs.request) {
		// Unresolvable: evicting pods here would not release a hold.
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "capacity on the node is held for a planned or reserved gang")
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

// PostFilter runs when the pod fits no node. A member that fits none of its
// planned nodes breaks the plan: every waiting member is rejected and all
// holds are freed, once. Then the pod, or its whole gang, may take room:
// by preempting whole gangs of lower priority, by reclaiming for its queue,
// or by reserving the nodes it waits for. Per-pod preemption never runs:
// it would leave victim gangs partial.
func (pl *Coscheduling) PostFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, statuses fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	cs := readState(state)
	if cs == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if p := cs.planning; p != nil {
		// Every node failed a filter before this plugin's: the plan never
		// ran. Run it now, for the diagnosis and for what follows.
		if _, st := p.run(func() (string, *fwk.Status) { return pl.plan(ctx, state, pod, cs, p) }); st == nil {
			return nil, fwk.NewStatus(fwk.Unschedulable, "the gang was planned; its members go to their planned nodes")
		}
	}
	if cs.spec != nil && cs.steered && pl.lc.Placed(cs.ref) < quorum(cs.spec) {
		node, _ := pl.lc.NextSlot(cs.ref, cs.shape)
		msg := fmt.Sprintf("plan broken: member %s does not fit its planned node %s; replanning the gang", pod.Name, node)
		pl.lc.Release(cs.ref, gang.ReasonPlanBroken, msg)
		return nil, fwk.NewStatus(fwk.Unschedulable, msg)
	}
	return pl.makeRoom(ctx, state, pod, cs, statuses)
}

// Reserve charges the member to its gang's plan.
func (pl *Coscheduling) Reserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	if cs := readState(state); cs != nil && cs.spec != nil {
		pl.lc.MemberReserved(cs.ref, pod.UID, nodeName, cs.shape)
	}
	return nil
}

// Unreserve runs when a member is rejected, times out in Permit or fails to
// bind. Before the quorum that tears the whole gang down, once.
func (pl *Coscheduling) Unreserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) {
	pl.gangs.Binds.Release(pod.UID)
	if ref, ok := pl.gangs.RefOf(pod); ok {
		pl.lc.MemberUnreserved(ref, pod.UID, pod.Name)
	}
}

// Permit lets members through only together: it waits until minMember
// members are placed, then allows all of them at once.
func (pl *Coscheduling) Permit(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) (*fwk.Status, time.Duration) {
	cs := readState(state)
	if cs == nil || cs.spec == nil {
		return nil, 0
	}
	reached, first, placed := pl.lc.Quorum(cs.ref, quorum(cs.spec))
	if !reached {
		wait := pl.lc.Remaining(cs.ref)
		if wait <= 0 {
			return fwk.NewStatus(fwk.Unschedulable, "the gang's plan ended before this member was placed; replanning"), 0
		}
		return fwk.NewStatus(fwk.Wait, fmt.Sprintf("%d of %d members placed", placed, quorum(cs.spec))), wait
	}
	if first {
		runtime.GangWait.Observe(time.Since(cs.spec.Created).Seconds())
		pl.gangs.Status.Set(cs.spec, runtime.Condition{Status: metav1.ConditionTrue, Reason: runtime.ReasonScheduled,
			Message: fmt.Sprintf("%d of %d members placed; the gang starts", placed, quorum(cs.spec))})
		klog.FromContext(ctx).V(3).Info("Gang reached its quorum", "gang", cs.ref, "placed", placed)
	}
	for _, uid := range pl.lc.Reserved(cs.ref) {
		if wp := pl.h.GetWaitingPod(uid); wp != nil {
			wp.Allow(Name)
		}
	}
	return nil, 0
}

// PreBindPreFlight takes gang members only: plain pods bind one at a time
// as they are scheduled, gang members all at once when the quorum is reached.
func (pl *Coscheduling) PreBindPreFlight(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) (*fwk.PreBindPreFlightResult, *fwk.Status) {
	if cs := readState(state); cs == nil || cs.spec == nil {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return &fwk.PreBindPreFlightResult{AllowParallel: true}, nil
}

// PreBind waits for a bind slot (runtime.GangBindConcurrency): a gang's
// members released together bind through a bounded number of requests in
// flight instead of one new API connection per request over the HTTP/2
// stream limit.
func (pl *Coscheduling) PreBind(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	// The framework runs PreBindPreFlight only under the
	// NominatedNodeNameForExpectation gate (off in phalanx), so PreBind sees
	// plain pods too.
	if cs := readState(state); cs == nil || cs.spec == nil {
		return nil
	}
	if err := pl.gangs.Binds.Acquire(ctx, pod.UID); err != nil {
		return fwk.AsStatus(fmt.Errorf("waiting to bind: %w", err))
	}
	return nil
}

// PostBind frees the member's bind slot.
func (pl *Coscheduling) PostBind(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) {
	pl.gangs.Binds.Release(pod.UID)
}

// EventsToRegister lists the cluster events that can make a rejected member
// schedulable. Changes of the phalanx and PodGroup objects are not listed:
// the runtime's own informers wake the affected pods once their listers
// are current (the framework would watch the same objects a second time).
func (pl *Coscheduling) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Add}, QueueingHintFn: pl.hintSiblingAdded},
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}, QueueingHintFn: pl.hintRepresentative},
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Update}, QueueingHintFn: pl.hintDependencyProgress},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint},
			QueueingHintFn: pl.hintRepresentative},
	}, nil
}

// hintRepresentative requeues, for a gang whose plan failed, only the member
// that stands for it: capacity events would otherwise retry every member,
// each failing from the cached reason with an event and a status write of
// its own. The representative's new plan wakes the others.
func (pl *Coscheduling) hintRepresentative(_ klog.Logger, pod *v1.Pod, _, _ any) (fwk.QueueingHint, error) {
	if ref, ok := pl.gangs.RefOf(pod); ok {
		if rep := pl.lc.Representative(ref); rep != "" && rep != pod.UID {
			return fwk.QueueSkip, nil
		}
	}
	return fwk.Queue, nil
}

func (pl *Coscheduling) hintSiblingAdded(_ klog.Logger, pod *v1.Pod, _, newObj any) (fwk.QueueingHint, error) {
	added, ok := newObj.(*v1.Pod)
	if !ok {
		return fwk.Queue, nil
	}
	ref, isMember := pl.gangs.RefOf(pod)
	if other, ok := pl.gangs.RefOf(added); isMember && ok && ref == other {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// hintDependencyProgress requeues a gang's pods when a member of one of its
// dependencies starts running or succeeds.
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
	depRef, ok1 := pl.gangs.RefOf(updated)
	_, spec, ok2, err := pl.gangs.GangOf(pod)
	if !ok1 || !ok2 || err != nil || updated.Namespace != pod.Namespace {
		return fwk.QueueSkip, nil
	}
	for _, d := range spec.DependsOn() {
		if d == depRef.Name {
			return fwk.Queue, nil
		}
	}
	return fwk.QueueSkip, nil
}

func dependsOn(spec *gang.Spec) string {
	return fmt.Sprintf("%v", spec.DependsOn())
}
