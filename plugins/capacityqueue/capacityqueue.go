// Package capacityqueue is the CapacityQueue plugin: weighted, hierarchical
// queues (Queue, scheduling.phalanx.dev/v1alpha1) with guarantees, limits and
// reclaim. It adapts the framework to internal/queue: a queue snapshot taken
// once per cycle, admission at PreFilter (a gang enters only if its whole
// remaining minimum fits its queue's allowance), accounting at Reserve. The
// queue order is Coscheduling's QueueSort, and reclaim is Coscheduling's
// whole-gang eviction, both on this plugin's policy.
package capacityqueue

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/apis/config"
	"github.com/phalanx-sched/phalanx/apis/config/validation"
	"github.com/phalanx-sched/phalanx/internal/gang"
	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/lifecycle"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
	"github.com/phalanx-sched/phalanx/internal/queue"
	"github.com/phalanx-sched/phalanx/internal/resources"
	"github.com/phalanx-sched/phalanx/internal/status"
	"github.com/phalanx-sched/phalanx/plugins/internal/ports"
	"github.com/phalanx-sched/phalanx/plugins/runtime"
	"github.com/phalanx-sched/phalanx/plugins/runtime/gangs"
)

// Name is the plugin name used in the scheduler configuration.
const Name = "CapacityQueue"

// CapacityQueue admits by queue and keeps the queue accounting current.
type CapacityQueue struct {
	h          fwk.Handle
	rt         *runtime.Runtime
	gangs      *gangs.Gangs
	queues     *runtime.Queues
	reclaim    bool
	minRuntime time.Duration
}

var (
	_ fwk.PreFilterPlugin   = &CapacityQueue{}
	_ fwk.ReservePlugin     = &CapacityQueue{}
	_ fwk.EnqueueExtensions = &CapacityQueue{}
)

// Factory returns the plugin factory over the process runtime.
func Factory(rt *runtime.Runtime) func(context.Context, k8sruntime.Object, fwk.Handle) (fwk.Plugin, error) {
	return func(ctx context.Context, obj k8sruntime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return New(ctx, obj, h, rt)
	}
}

// New builds the plugin from validated args.
func New(ctx context.Context, obj k8sruntime.Object, h fwk.Handle, rt *runtime.Runtime) (*CapacityQueue, error) {
	args, ok := obj.(*config.CapacityQueueArgs)
	if !ok {
		return nil, fmt.Errorf("want args of type CapacityQueueArgs, got %T", obj)
	}
	if err := validation.ValidateCapacityQueueArgs(field.NewPath("pluginConfig").Key(Name).Child("args"), args); err != nil {
		return nil, fmt.Errorf("profile %q: %w", h.ProfileName(), err)
	}
	fw := ports.Of(h)
	gangs, err := rt.Gangs(fw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	queues, err := rt.Queues(fw, h.ProfileName(), runtime.QueueOptions{
		DefaultQueue: args.DefaultQueue, UsageHalfLife: time.Duration(args.UsageHalfLifeSeconds) * time.Second})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	return &CapacityQueue{h: h, rt: rt, gangs: gangs, queues: queues, reclaim: args.EnableReclaim,
		minRuntime: time.Duration(args.MinRuntimeSeconds) * time.Second}, nil
}

// Name returns the plugin name.
func (pl *CapacityQueue) Name() string { return Name }

// PreFilter takes the cycle's queue snapshot and admits a gang (its whole
// remaining minimum: exactly the members the planner places) or a plain pod
// against its queue. Nothing is planned or reserved for what is refused. A
// refusal that reclaim may cure lets the cycle reach PostFilter.
func (pl *CapacityQueue) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	// Only the leading replica runs scheduling cycles; from the first on,
	// a gang's members sleep behind a lead (gangs.Gangs).
	pl.rt.Leader.CycleRan()
	ref, spec, need, admitted := pl.need(pod)
	name := pl.queues.QueueOf(pod)
	newCycle := func() *gang.Admission {
		qc := gang.NewAdmission(func() *queue.Snapshot { return pl.queues.Snapshot(queue.Want{Queue: name, Need: need}) })
		qc.Queue, qc.QueueOf, qc.Reclaim, qc.MinRuntime, qc.Need = name, pl.queues.QueueOf, pl.reclaim, pl.minRuntime, need
		state.Write(stateKey, &cycleState{qc})
		return qc
	}
	qc := newCycle()
	if admitted {
		qc.Admitted = true
		return nil, nil
	}
	snap := qc.Snapshot()
	qc.Admitted, qc.Refusal = snap.AdmitInOrder(qc.Queue, need, pl.queues.RefusedAhead(pod, snap))
	if _, over := snap.Exceeds(qc.Queue, need); qc.Admitted && over && pl.queues.AwaitLeft(ctx, nodes, snap, qc.Queue) {
		// Above its share on an accounting behind the cycle's snapshot: a
		// queue that seemed at its share may wait below it.
		qc = newCycle()
		snap = qc.Snapshot()
		qc.Admitted, qc.Refusal = snap.AdmitInOrder(qc.Queue, need, pl.queues.RefusedAhead(pod, snap))
	}
	if qc.Admitted {
		pl.queues.Unblock(ref, pod)
		return nil, nil
	}
	if spec != nil {
		pl.gangs.Status.Set(spec, status.Condition{Status: metav1.ConditionFalse, Reason: status.ReasonQueue, Message: qc.Refusal})
	} else {
		pl.gangs.PodEvent(pod, status.ReasonQueue, qc.Refusal)
	}
	pl.queues.Block(ref, pod)
	if pl.reclaim && snap.Curable(qc.Queue, need) {
		return nil, fwk.NewStatus(fwk.Unschedulable, qc.Refusal)
	}
	return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, qc.Refusal)
}

// need is what a pod asks its queue for: a gang's remaining minimum — the
// members the planner would place (gang.GroupForPlan) — or a plain pod's own
// request. admitted: the gang already has a plan, a reservation or its quorum,
// so its capacity is charged already.
func (pl *CapacityQueue) need(pod *v1.Pod) (ref ident.Ref, spec *gangspec.Spec, need resources.List, admitted bool) {
	ref, spec, ok, err := pl.gangs.GangOf(pod)
	if !ok || err != nil {
		return ident.Ref{}, nil, pl.gangs.Manager.Demand(pod), false
	}
	lc := pl.gangs.Lifecycle
	if phase := lc.Phase(ref); phase == lifecycle.PhasePlanned || phase == lifecycle.PhaseReserving {
		return ref, spec, nil, true
	}
	placed := lc.Placed(ref)
	if placed >= gangspec.Quorum(spec) {
		return ref, spec, pl.gangs.Manager.Demand(pod), true
	}
	bound, _ := gangspec.BoundBySubGroup(spec, pl.gangs.Members(ref), nil, -1)
	groups, _ := gangspec.GroupForPlan(spec, pod, pl.gangs.Pending(ref), gangspec.Quorum(spec)-placed, pl.gangs.Manager.Demand, bound)
	return ref, spec, planner.Demand(groups), false
}

// PreFilterExtensions returns nil.
func (pl *CapacityQueue) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Reserve charges the pod to its queue at once, before it is bound.
func (pl *CapacityQueue) Reserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) *fwk.Status {
	pl.queues.Reserved(pod)
	return nil
}

// Unreserve gives the charge back.
func (pl *CapacityQueue) Unreserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	pl.queues.Unreserved(pod)
}

// EventsToRegister: capacity freed. Queue changes wake refused pods through
// the runtime's Queue informer. A refused gang is retried through its lead
// (the runtime's wakeBlocked); its members asleep behind the lead are not
// moved by the events (Gangs.CapacityHint): without a hint every pod that
// finished moved every member of every refused gang, each to be refused
// again in its own cycle.
func (pl *CapacityQueue) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}, QueueingHintFn: pl.gangs.CapacityHint},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable}, QueueingHintFn: pl.gangs.CapacityHint},
	}, nil
}
