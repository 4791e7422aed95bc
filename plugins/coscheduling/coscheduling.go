// Package coscheduling is the Coscheduling plugin: all-or-nothing gangs,
// planned as a whole before anything is reserved, bound together, and never
// left waiting forever. It adapts the framework's extension points to the
// gang lifecycle of internal/gang, through the process runtime.
package coscheduling

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/apis/config"
	configv1 "github.com/phalanx-sched/phalanx/apis/config/v1"
	"github.com/phalanx-sched/phalanx/apis/config/validation"
	"github.com/phalanx-sched/phalanx/internal/gang"
	"github.com/phalanx-sched/phalanx/internal/gang/consolidate"
	"github.com/phalanx-sched/phalanx/internal/gang/expected"
	"github.com/phalanx-sched/phalanx/internal/gang/fragment"
	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/lifecycle"
	"github.com/phalanx-sched/phalanx/internal/resources"
	"github.com/phalanx-sched/phalanx/internal/status"
	"github.com/phalanx-sched/phalanx/plugins/internal/ports"
	"github.com/phalanx-sched/phalanx/plugins/probe"
	"github.com/phalanx-sched/phalanx/plugins/runtime"
	"github.com/phalanx-sched/phalanx/plugins/runtime/gangs"
)

// Name is the plugin name used in the scheduler configuration.
const Name = gangs.GangPlugin

const (
	stateKey      fwk.StateKey = "phalanx.dev/" + Name
	scoreStateKey fwk.StateKey = "phalanx.dev/" + Name + "-score"
)

// sweepEvery is how often partly bound gangs are looked for.
const sweepEvery = 5 * time.Second

// Coscheduling implements gang scheduling over the process runtime.
type Coscheduling struct {
	h     fwk.Handle
	rt    *runtime.Runtime
	gangs *gangs.Gangs
	// m decides for the gangs; this plugin translates extension points into
	// its calls and implements its prober port.
	m *gang.Manager
	// binds bounds gang members' binds in flight, for the whole process.
	binds *BindSlots
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
	_ fwk.PreScorePlugin    = &Coscheduling{}
	_ fwk.ScorePlugin       = &Coscheduling{}
)

// Factory returns the plugin factory over the process runtime.
func Factory(rt *runtime.Runtime) func(context.Context, k8sruntime.Object, fwk.Handle) (fwk.Plugin, error) {
	// One bound on binds in flight for the process: every profile's.
	binds := NewBindSlots(GangBindConcurrency)
	return func(ctx context.Context, obj k8sruntime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return New(ctx, obj, h, rt, binds)
	}
}

// New builds the plugin from validated args.
func New(ctx context.Context, obj k8sruntime.Object, h fwk.Handle, rt *runtime.Runtime, binds *BindSlots) (*Coscheduling, error) {
	args, err := decodeArgs(obj)
	if err != nil {
		return nil, err
	}
	if err := validation.ValidateCoschedulingArgs(field.NewPath("pluginConfig").Key(Name).Child("args"), args); err != nil {
		return nil, fmt.Errorf("profile %q: %w", h.ProfileName(), err)
	}
	gangs, err := rt.Gangs(ports.Of(h))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	pl := &Coscheduling{h: h, rt: rt, gangs: gangs, m: gangs.Manager, binds: binds}
	pl.m.Timeout = time.Duration(args.DefaultScheduleTimeoutSeconds) * time.Second
	pl.m.ReserveAfter = time.Duration(args.ReservationAfterSeconds) * time.Second
	pl.m.Consolidation = consolidate.Config{
		After:         time.Duration(args.ConsolidationAfterSeconds) * time.Second,
		MinRuntime:    time.Duration(args.ConsolidationMinRuntimeSeconds) * time.Second,
		PerHour:       int(args.ConsolidationsPerHour),
		EvictionGrace: time.Duration(args.ConsolidationEvictionGraceSeconds) * time.Second,
	}
	gangs.TrackWorkload(time.Duration(args.FragmentationHalfLifeSeconds) * time.Second)
	// phalanx-scheduler's recorders pass every event until told otherwise;
	// a framework built elsewhere (tests, another binary) keeps them all.
	if r, ok := h.EventRecorder().(*status.EventRecorder); ok && args.ScheduledEvents == configv1.ScheduledEventsPerGang {
		r.SkipScheduled(func(pod *v1.Pod) bool {
			_, member := gangs.RefOf(pod)
			return member
		})
	}
	gangs.StartSweeper(pl.m.Timeout, sweepEvery)
	return pl, nil
}

func decodeArgs(obj k8sruntime.Object) (*config.CoschedulingArgs, error) {
	if obj == nil {
		return &config.CoschedulingArgs{
			DefaultScheduleTimeoutSeconds:     configv1.DefaultScheduleTimeoutSeconds,
			ReservationAfterSeconds:           configv1.DefaultReservationAfterSeconds,
			FragmentationHalfLifeSeconds:      configv1.DefaultFragmentationHalfLifeSeconds,
			ScheduledEvents:                   configv1.DefaultScheduledEvents,
			ConsolidationMinRuntimeSeconds:    configv1.DefaultConsolidationMinRuntimeSeconds,
			ConsolidationsPerHour:             configv1.DefaultConsolidationsPerHour,
			ConsolidationEvictionGraceSeconds: configv1.DefaultConsolidationEvictionGraceSeconds,
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
	ref      ident.Ref
	spec     *gangspec.Spec
	shape    string
	request  resources.List
	priority int32
	// ends is when the pod is sure to be gone if it starts now (its
	// activeDeadlineSeconds; zero: no limit): it may backfill reservations.
	ends time.Time
	// planning is set when this cycle plans the gang (see ensurePlanned).
	planning *planning
	// steered: the member was sent to its planned node.
	steered bool
}

// planning is one cycle's plan of a gang, made once (ensurePlanned) and
// shared by every copy of the cycle's state: the framework copies the state
// to filter a node with its nominated pods added, and that copy may ask
// first.
type planning struct {
	once    sync.Once
	nodes   []fwk.NodeInfo
	attempt *gang.Attempt
	node    string
	err     error
}

// Clone copies the cycle's facts and shares its planning.
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

// Less orders the scheduling queue (gangs.Less): by queue share when
// CapacityQueue is enabled in the profile, then incomplete gangs, priority
// and gang age, keeping each gang's members together. Keys come from the
// runtime's cache; nothing here writes to the API.
//
// Since Kubernetes 1.37 the queue sorts entities, not pods: a pod, or, only
// when the scheduler runs with the GenericWorkload gate (off by default, and
// phalanx sets none), a whole Workload API pod group. A group is ordered by
// the key of one of its queued members (queuedPod): every member of a gang
// has the same gang key.
func (pl *Coscheduling) Less(a, b fwk.QueuedEntityInfo) bool {
	pa, pb := queuedPod(a), queuedPod(b)
	if pa == nil || pb == nil {
		// An entity without a pod (an empty group): PrioritySort's order.
		return a.GetPriority() > b.GetPriority() ||
			(a.GetPriority() == b.GetPriority() && a.GetTimestamp().Before(b.GetTimestamp()))
	}
	queues := pl.rt.QueuesOrdering(pl.h.ProfileName())
	ka := pl.gangs.OrderKey(pa, a.GetTimestamp(), queues)
	kb := pl.gangs.OrderKey(pb, b.GetTimestamp(), queues)
	return gangs.Less(ka, kb, queues)
}

// queuedPod is the pod a queued entity is ordered by: the pod of a pod
// entity (what 1.36's QueuedPodInfo.GetPodInfo gave), else the oldest
// unscheduled member of a pod group entity (GetUnscheduledPods gathers a
// composite group's from its leaves); nil if there is none.
func queuedPod(e fwk.QueuedEntityInfo) *v1.Pod {
	if p, ok := e.(interface{ GetPodInfo() fwk.PodInfo }); ok {
		if pi := p.GetPodInfo(); pi != nil {
			return pi.GetPod()
		}
		return nil
	}
	if g, ok := e.(fwk.PodGroupInfo); ok {
		return ident.Oldest(g.GetUnscheduledPods())
	}
	return nil
}

// PreEnqueue keeps a gang's pods out of the active queue until its group
// object exists, its dependencies run, and minMember members exist.
func (pl *Coscheduling) PreEnqueue(ctx context.Context, pod *v1.Pod) *fwk.Status {
	if msg, ok := pl.gangs.Ready(pod); !ok {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	return nil
}

// PreFilter steers a planned member to its planned node, turns away members
// of a gang whose last plan failed while nothing changed, and marks the cycle
// that must plan the gang. Pods outside gangs only pass through to Filter,
// which keeps them off capacity that plans and reservations hold.
func (pl *Coscheduling) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	// Only the leading replica runs scheduling cycles.
	pl.rt.Leader.CycleRan()
	ref, spec, ok, err := pl.gangs.GangOf(pod)
	cs := &cycleState{request: pl.m.Demand(pod), priority: spec.PriorityOf(pod), ends: expected.EndsBy(pod, spec.GroupAnnotations(), pl.m.Now())}
	if !ok {
		state.Write(stateKey, cs)
		if !pl.m.HoldsAnywhere() {
			// Nothing to filter; PostFilter still runs for preemption.
			return nil, fwk.NewStatus(fwk.Skip)
		}
		return nil, nil
	}
	if err != nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, pl.gangs.Missing(ref, err))
	}
	cs.ref, cs.spec, cs.shape = ref, spec, gangspec.MemberShape(spec, pod)
	state.Write(stateKey, cs)

	switch route := pl.m.Route(ref, spec, cs.shape); {
	case route.Node != "":
		cs.steered = true
		return &fwk.PreFilterResult{NodeNames: sets.New(route.Node)}, nil
	case route.Refusal != "":
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, route.Refusal)
	case !route.Plan:
		return nil, nil
	}
	// A new plan first lets the members released before it start binding:
	// run-ahead binds nothing sooner and holds memory (BindBacklog).
	if waited := pl.binds.WaitForBacklog(ctx, BindBacklog, BacklogMaxWait); waited > time.Millisecond {
		klog.FromContext(ctx).V(5).Info("Plan waited for released members to start binding", "pod", klog.KObj(pod), "waited", waited)
	}
	cs.planning = &planning{nodes: nodes}
	return nil, nil
}

// attempt is the manager's question for this cycle, with the other
// plugins' parts of the cycle: read once every PreFilter has run.
func (pl *Coscheduling) attempt(state fwk.CycleState, pod *v1.Pod, cs *cycleState, prober gang.Prober) *gang.Attempt {
	return withCycleParts(state, &gang.Attempt{Pod: pod, Ref: cs.ref, Spec: cs.spec, Priority: cs.priority, Prober: prober})
}

// ensurePlanned is where a gang is planned: once per cycle, by the manager.
// It cannot run in PreFilter: the framework learns which Filter plugins skip
// the pod only after the last PreFilter, and the plan asks every Filter
// plugin. So the cycle's first Filter call (Coscheduling is first among
// Filter plugins in the canonical profile) or else PostFilter runs it.
func (pl *Coscheduling) ensurePlanned(ctx context.Context, state fwk.CycleState, pod *v1.Pod, cs *cycleState) (string, error) {
	p := cs.planning
	p.once.Do(func() {
		var skip []string
		if d := pl.gangs.Devices; d != nil && d.Asks(pod) {
			skip = append(skip, probe.DRAPlugins...)
		}
		p.attempt = pl.attempt(state, pod, cs, probe.Filters(pl.h, Name, state, p.nodes, skip...))
		p.node, p.err = pl.m.Plan(ctx, p.attempt)
		p.nodes = nil
	})
	return p.node, p.err
}

// PreFilterExtensions is nil: holds do not change when pods are added or
// removed in a simulation.
func (pl *Coscheduling) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter admits a member only on its planned node (planning first, once,
// when this cycle must) and keeps every pod off capacity that other gangs'
// plans and reservations hold.
func (pl *Coscheduling) Filter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	cs := readState(state)
	if cs == nil {
		return nil
	}
	name := nodeInfo.Node().Name
	if cs.planning != nil {
		target, err := pl.ensurePlanned(ctx, state, pod, cs)
		if err != nil {
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
		}
		if name != target {
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node is not the gang member's planned node")
		}
	}
	claimant := lifecycle.Claimant{Ref: cs.ref, Priority: cs.priority, Ends: cs.ends}
	if !pl.m.Fits(name, claimant, cs.request, func() (resources.List, int64) { return probe.FreeOn(nodeInfo) }) {
		// Unresolvable: evicting pods here would not release a hold. The
		// hold's end is no event the scheduling queue sees: the runtime
		// wakes the pod when held capacity is given up.
		pl.gangs.TurnedAway(pod)
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "capacity on the node is held for a planned or reserved gang")
	}
	return nil
}

// PostFilter runs when the pod fits no node. A member that fits none of its
// planned nodes breaks the plan: every waiting member is rejected and all
// holds are freed, once. Then the manager may make room: by preempting whole
// gangs of lower priority, by reclaiming for the pod's queue, or by
// reserving the nodes it waits for. Per-pod preemption never runs: it would
// leave victim gangs partial.
func (pl *Coscheduling) PostFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, statuses fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	// A lead refused without a failed plan lets its gang's sleepers go.
	defer pl.gangs.Refused(pod)
	cs := readState(state)
	if cs == nil {
		pl.rideClaim(ctx, pod)
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	var a *gang.Attempt
	if cs.planning != nil {
		// Every node failed a filter before this plugin's: the plan never
		// ran. Run it now, for the diagnosis and for what follows.
		if _, err := pl.ensurePlanned(ctx, state, pod, cs); err == nil {
			return nil, fwk.NewStatus(fwk.Unschedulable, "the gang was planned; its members go to their planned nodes")
		}
		a = cs.planning.attempt
	}
	if cs.spec != nil && cs.steered {
		if msg, broken := pl.m.MissedSlot(cs.ref, cs.spec, pod.Name, cs.shape); broken {
			return nil, fwk.NewStatus(fwk.Unschedulable, msg)
		}
	}
	if a == nil {
		a = pl.attempt(state, pod, cs, nil)
		if cs.spec == nil {
			a.Prober = probe.Statuses(pl.h, Name, state, statuses, a.Queue == nil || a.Queue.Admitted)
		}
	}
	room, msg := pl.m.MakeRoom(ctx, a)
	if room == nil || room.Nominate == "" {
		return nil, fwk.NewStatus(fwk.Unschedulable, msg)
	}
	nominate := &fwk.NominatingInfo{NominatedNodeName: room.Nominate, NominatingMode: fwk.ModeOverride}
	return &fwk.PostFilterResult{NominatingInfo: nominate}, fwk.NewStatus(fwk.Unschedulable, msg)
}

// rideClaim: a member turned away before this plugin's PreFilter ran (the
// DynamicResources plugin keeps it out while a claim it shares with a
// reserved member is being allocated) may be the rider that completes its
// gang's quorum; the reserved members are then let through. It may become a
// rider only after they reached Permit: the resourceclaim controller names
// a group-level claim in its status later.
func (pl *Coscheduling) rideClaim(ctx context.Context, pod *v1.Pod) {
	if len(pod.Spec.ResourceClaims) == 0 {
		return
	}
	ref, spec, ok, err := pl.gangs.GangOf(pod)
	if !ok || err != nil || len(pl.m.Reserved(ref)) == 0 {
		return
	}
	pl.release(ctx, pod, ref, spec)
}

// Reserve charges the member to its gang's plan.
func (pl *Coscheduling) Reserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	if cs := readState(state); cs != nil && cs.spec != nil {
		pl.m.MemberReserved(cs.ref, pod.UID, nodeName, cs.shape)
	}
	return nil
}

// Unreserve runs when a member is rejected, times out in Permit or fails to
// bind. Before the quorum that tears the whole gang down, once.
func (pl *Coscheduling) Unreserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) {
	pl.binds.Release(pod.UID)
	if ref, ok := pl.gangs.RefOf(pod); ok {
		pl.m.MemberUnreserved(ref, pod.UID, pod.Name)
	}
}

// Permit lets members through only together: it waits until minMember
// members are placed, then allows all of them at once.
func (pl *Coscheduling) Permit(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) (*fwk.Status, time.Duration) {
	cs := readState(state)
	if cs == nil || cs.spec == nil {
		return nil, 0
	}
	reached, placed := pl.release(ctx, pod, cs.ref, cs.spec)
	if !reached {
		wait := pl.m.Remaining(cs.ref)
		if wait <= 0 {
			return fwk.NewStatus(fwk.Unschedulable, "the gang's plan ended before this member was placed; replanning"), 0
		}
		return fwk.NewStatus(fwk.Wait, fmt.Sprintf("%d of %d members placed", placed, gangspec.Quorum(cs.spec))), wait
	}
	return nil, 0
}

// release lets the gang's reserved members through once its quorum is
// reached. Members that share a reserved member's claim cannot reserve
// before it binds (its allocation is in flight); they count toward the
// quorum. Only a member with claims can hold one (counting walks the gang).
func (pl *Coscheduling) release(ctx context.Context, pod *v1.Pod, ref ident.Ref, spec *gangspec.Spec) (reached bool, placed int) {
	riders := 0
	if len(pod.Spec.ResourceClaims) > 0 {
		riders = pl.gangs.ClaimRiders(ref)
	}
	reached, first, placed := pl.m.Quorum(ref, gangspec.Quorum(spec)-riders)
	if !reached {
		return false, placed
	}
	if first {
		pl.gangs.Started(ctx, spec, placed)
	}
	for _, uid := range pl.m.Reserved(ref) {
		if wp := pl.h.GetWaitingPod(uid); wp != nil {
			wp.Allow(Name)
		}
	}
	return true, placed
}

// PreBindPreFlight takes gang members only: plain pods bind one at a time
// as they are scheduled, gang members all at once when the quorum is reached.
func (pl *Coscheduling) PreBindPreFlight(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) (*fwk.PreBindPreFlightResult, *fwk.Status) {
	if cs := readState(state); cs == nil || cs.spec == nil {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return &fwk.PreBindPreFlightResult{AllowParallel: true}, nil
}

// PreBind waits for a bind slot (GangBindConcurrency): a gang
// released together binds through a bounded number of requests in flight,
// not a new API connection per request over the HTTP/2 stream limit. It
// sees plain pods too: PreBindPreFlight runs only under the
// NominatedNodeNameForExpectation gate (off in phalanx).
func (pl *Coscheduling) PreBind(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	if cs := readState(state); cs == nil || cs.spec == nil {
		return nil
	}
	if err := pl.binds.Acquire(ctx, pod.UID); err != nil {
		return fwk.AsStatus(fmt.Errorf("waiting to bind: %w", err))
	}
	return nil
}

// PostBind frees the member's bind slot.
func (pl *Coscheduling) PostBind(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) {
	pl.binds.Release(pod.UID)
}

// EventsToRegister lists the cluster events that can make a rejected member
// schedulable. Changes of the phalanx and PodGroup objects are not listed:
// the runtime's own informers wake the affected pods once their listers
// are current (the framework would watch the same objects a second time).
// Capacity events do not retry a failed gang: the runtime wakes it, paced.
// No pod event but a deletion is listed: a pod waiting at PreEnqueue is
// checked against every event its gating plugin registered, under the
// scheduling queue's lock, and a gang's members wait there in thousands.
// What a member waits for among pods the runtime's pod handler sees itself:
// siblings created (it counts members and wakes the gang at its quorum,
// memberArrived) and a dependency's members starting to run
// (dependencyStarted). Listed, every pod created and every kubelet status
// write in the cluster made the queue check each waiting member.
func (pl *Coscheduling) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	capacity := pl.gangs.CapacityHint
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}, QueueingHintFn: capacity},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint},
			QueueingHintFn: capacity},
		// Devices published, freed or reclassified (DRA).
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceSlice, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: capacity},
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceClaim, ActionType: fwk.Update | fwk.Delete}, QueueingHintFn: capacity},
		{Event: fwk.ClusterEvent{Resource: fwk.DeviceClass, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: capacity},
	}, nil
}

// scoreState is the workload a pod outside gangs is scored against.
type scoreState struct {
	workload []fragment.WorkloadShape
}

// Clone shares the state: it is read-only.
func (s *scoreState) Clone() fwk.StateData { return s }

// PreScore decides whether fragmentation scores the pod: only pods outside
// gangs (a member goes to its planned node, which the planner chose with
// the same measure), and only while the workload has GPU shapes.
func (pl *Coscheduling) PreScore(_ context.Context, state fwk.CycleState, _ *v1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	cs := readState(state)
	if cs == nil || cs.spec != nil || pl.m.Workload == nil {
		return fwk.NewStatus(fwk.Skip)
	}
	workload := pl.m.Workload.Workload(pl.m.Now())
	if len(workload) == 0 {
		return fwk.NewStatus(fwk.Skip)
	}
	state.Write(scoreStateKey, &scoreState{workload: workload})
	return nil
}

// fragmentationUnit turns fragmentation deltas (GPUs) into integer scores.
const fragmentationUnit = 1000

// pointsPerFragmentedGPU is what one GPU of expected fragmentation more than
// on the best node costs, out of MaxScore. The scale is absolute, not
// stretched over the cycle's range: a small difference stays small beside
// the other scores (NetworkTopology keeping whole domains free for gangs),
// a whole fragmented GPU outweighs the resource scores' spreading.
const pointsPerFragmentedGPU = 50

// Score is minus how much the pod on the node would raise the expected GPU
// fragmentation of the workload (FGD): filling a node whose leftovers fit
// no shape costs nothing, breaking into a whole node that big shapes need
// costs the most. NormalizeScore gives the least fragmenting node MaxScore.
func (pl *Coscheduling) Score(_ context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	d, err := state.Read(scoreStateKey)
	if err != nil {
		return 0, nil
	}
	cs := readState(state)
	free, _ := probe.FreeOn(nodeInfo)
	delta := pl.m.FragmentationAfter(nodeInfo.Node().Name, free, cs.request, cs.priority, d.(*scoreState).workload)
	return -int64(math.Round(delta * fragmentationUnit)), nil
}

// ScoreExtensions normalises the scores.
func (pl *Coscheduling) ScoreExtensions() fwk.ScoreExtensions { return pl }

// NormalizeScore gives the least fragmenting node MaxScore and every other
// pointsPerFragmentedGPU less per GPU of fragmentation more, down to 0.
func (pl *Coscheduling) NormalizeScore(_ context.Context, _ fwk.CycleState, _ *v1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	if len(scores) == 0 {
		return nil
	}
	best := scores[0].Score
	for _, s := range scores {
		best = max(best, s.Score)
	}
	for i := range scores {
		behind := (best - scores[i].Score) * pointsPerFragmentedGPU / fragmentationUnit
		scores[i].Score = max(0, fwk.MaxScore-behind)
	}
	return nil
}
