// Package gangs is the gang part of the scheduler process's runtime: it
// builds the gang directory (internal/workload), lifecycle and manager
// (internal/gang), readiness gate, waker (internal/requeue) and status writer
// (internal/status) once, wires them to each other, and keeps them current
// from the informers' events. plugins/runtime builds it over the
// framework's ports; the plugins read it.
package gangs

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/dynamic"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/utils/clock"
	pgclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	pginformers "sigs.k8s.io/scheduler-plugins/pkg/generated/informers/externalversions"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/admission"
	"github.com/phalanx-sched/phalanx/internal/devices"
	"github.com/phalanx-sched/phalanx/internal/devices/schedulerdra"
	"github.com/phalanx-sched/phalanx/internal/eviction"
	"github.com/phalanx-sched/phalanx/internal/gang"
	"github.com/phalanx-sched/phalanx/internal/gang/fragment"
	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/lifecycle"
	"github.com/phalanx-sched/phalanx/internal/inflight"
	"github.com/phalanx-sched/phalanx/internal/informersync"
	"github.com/phalanx-sched/phalanx/internal/leadership"
	"github.com/phalanx-sched/phalanx/internal/metrics"
	"github.com/phalanx-sched/phalanx/internal/requeue"
	"github.com/phalanx-sched/phalanx/internal/status"
	"github.com/phalanx-sched/phalanx/internal/workload"
	"github.com/phalanx-sched/phalanx/internal/workload/apifollow"
	"github.com/phalanx-sched/phalanx/internal/workload/implicitpg"
	"github.com/phalanx-sched/phalanx/internal/workload/readiness"
	"github.com/phalanx-sched/phalanx/plugins/internal/ports"
)

// GangPlugin is the plugin whose Permit holds gang members; teardowns reject
// waiting members in its name.
const GangPlugin = "Coscheduling"

// Gangs is the gang directory and lifecycle of the process: which gang a pod
// belongs to, each gang's definition (from a scheduler-plugins PodGroup or an
// upstream PodGroup), its members, and the lifecycle that plans, holds and
// releases it.
type Gangs struct {
	host      Host
	fw        *ports.Framework
	Lifecycle *lifecycle.Lifecycle
	// Manager decides for the gangs (plan, reserve, make room, dry runs)
	// over Lifecycle, through this directory and the runtime's effects.
	Manager *gang.Manager
	Status  *status.Writer

	// Directory: which gang a pod belongs to, its definition, its members.
	*workload.Directory
	// Gate: whether a member may enter the active queue, and what a gang
	// short of members waits for.
	*readiness.Gate
	pgClient pgclientset.Interface
	pods     corelisters.PodLister
	// groupEvents handles every adapter's group-object events.
	groupEvents cache.ResourceEventHandlerFuncs
	workloadAPI *apifollow.Follower
	// implicitPGs makes the PodGroups of implicit gangs.
	implicitPGs *implicitpg.Maker

	// Devices is the DRA device view plans allocate from; nil without DRA.
	Devices *devices.Devices

	mu sync.Mutex
	// wakes decides when waiting pods and gangs go back to the queue.
	wakes *requeue.Waker
	// podEvents dedups per-pod events.
	podEvents map[types.UID]string
	// inFlight: background work in flight (a stale nomination, a wake), so
	// each runs once at a time (inBackground).
	inFlight     inflight.Keys
	sweeperOnce  sync.Once
	workloadOnce sync.Once
	// evictor deletes evicted gangs, or asks consolidation's moved gangs to leave.
	evictor *eviction.Evictor
	// order caches the queue sort's keys.
	order orderKeys
}

// Host is what the gang part takes from the runtime that builds it.
type Host struct {
	Ctx       context.Context
	Clock     clock.WithDelayedExecution
	Framework *ports.Framework
	// PodGroups is the scheduler-plugins PodGroup client (the CRD is served).
	PodGroups pgclientset.Interface
	// Dynamic reads workloads of other API groups (JobSet, LeaderWorkerSet)
	// whose startup policy can keep a gang from forming; nil: not read.
	Dynamic dynamic.Interface
	// Served reports whether the API server serves a resource.
	Served func(groupVersion, resource string) (bool, error)
	Leader *leadership.Leadership
	Syncs  *informersync.Syncs
	// PodEvents delivers the scheduler's pod events.
	PodEvents *ports.PodEvents
	// Queues is the queue accounting once a profile built it, else nil.
	Queues func() *admission.Queues
	// Activate moves pods to the active queue, counted under reason.
	Activate func(reason string, pods map[string]*v1.Pod)
	// AwaitQueue returns once the scheduling queue's event pass under way is over.
	AwaitQueue func()
}

// New builds the gang part over its host and starts its informers (through
// the host's Syncs) and background work (on the host's context).
func New(h Host) (*Gangs, error) {
	ctx, fw, pgClient := h.Ctx, h.Framework, h.PodGroups
	metrics.Register()
	g := &Gangs{
		host: h, fw: fw, pgClient: pgClient,
		pods:      fw.Informers.Core().V1().Pods().Lister(),
		podEvents: map[types.UID]string{},
	}
	g.Lifecycle = lifecycle.NewLifecycle(h.Clock, g)
	g.wakes = requeue.New(requeue.Ports{Directory: directory{g}, Lifecycle: g.Lifecycle, Clock: h.Clock,
		Activate: h.Activate, AwaitQueue: h.AwaitQueue, LoopStarted: h.Leader.LoopStarted,
		QueueRefused: func(ref ident.Ref) bool {
			q := h.Queues()
			return q != nil && q.Blocked(ref)
		}})
	g.Devices = schedulerdra.New(fw.DRA, fw.Client)
	g.Manager = gang.NewManager(g.Lifecycle, g, effects{g}, g.Devices)
	// Off until a Coscheduling profile sets its half-life (TrackWorkload).
	g.Manager.Workload = fragment.NewShapeHistory(0)
	if g.Devices != nil {
		if err := g.watchDevices(fw); err != nil {
			return nil, err
		}
	}
	g.Status = status.NewWriter(pgClient, fw.Client, fw.Events, trackPending)
	g.Status.Leading = h.Leader.Leading
	g.Status.Clock = h.Clock
	h.Leader.OnLead(g.Status.RequeueAll)
	h.Leader.OnLead(g.clearStaleHeld)

	factory := pginformers.NewSharedInformerFactoryWithOptions(pgClient, 0, pginformers.WithTransform(informersync.TrimManagedFields))
	pgInformer := factory.Scheduling().V1alpha1().PodGroups()
	dir, err := workload.NewDirectory(fw.Informers.Core().V1().Pods().Informer(), pgInformer.Informer(),
		workload.PodGroups{Lister: pgInformer.Lister()}, g.Lifecycle.PlacedUIDs)
	if err != nil {
		return nil, err
	}
	g.Directory = dir
	g.Gate = readiness.New(readiness.Ports{Directory: dir, Lifecycle: g.Lifecycle, Conditions: g.Status, Quorum: g.wakes,
		Workloads: readiness.APIWorkloads{Kube: fw.Client, Dynamic: h.Dynamic}, PodEvent: g.PodEvent,
		InBackground: g.inFlight.Go, WorkloadAPIRecheck: func() time.Duration { return apifollow.Recheck },
		Clock: h.Clock, Ctx: h.Ctx})
	g.implicitPGs = implicitpg.New(implicitpg.Ports{Ctx: ctx, Leading: h.Leader.Leading, Directory: dir,
		Pods: g.pods, Client: pgClient, PodGroups: pgInformer.Lister(), PodEvent: g.PodEvent})
	h.PodEvents.Add(cache.ResourceEventHandlerFuncs{
		AddFunc:    g.onPodAdd,
		UpdateFunc: g.onPodUpdate,
		DeleteFunc: g.onPodDelete,
	})
	// A node change voids cached plan failures and wakes the failed gangs:
	// the scheduling queue's own node event may retry a member before this
	// handler ran, while the failure still stood.
	if _, err := fw.Informers.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    g.nodeChanged,
		UpdateFunc: g.onNodeUpdate,
		DeleteFunc: func(any) { g.wakes.CapacityChanged() },
	}); err != nil {
		return nil, err
	}

	g.groupEvents = cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { g.onGroup(nil, g.SpecOf(obj)) },
		UpdateFunc: func(oldObj, obj any) { g.onGroup(g.SpecOf(oldObj), g.SpecOf(obj)) },
		DeleteFunc: func(obj any) { g.onGroupDelete(g.SpecOf(obj)) },
	}
	if _, err := pgInformer.Informer().AddEventHandler(g.groupEvents); err != nil {
		return nil, err
	}
	if err := h.Syncs.Part("PodGroups", factory.Start, func(stop <-chan struct{}) []string {
		return informersync.Unsynced(factory.WaitForCacheSync(stop))
	}); err != nil {
		return nil, err
	}

	// The upstream Workload API, where served (beta in 1.37 but off by
	// default): looked for now and every apifollow.Recheck.
	g.workloadAPI = apifollow.New(apifollow.Ports{Client: fw.Client, Served: h.Served,
		Transform: informersync.TrimManagedFields, Publish: g.ServeWorkloadAPI, Events: g.groupEvents})
	// Consolidation's own args (Coscheduling's), as the manager reads them.
	g.evictor = eviction.New(g.fw.Client, g.fw.Events, g.pods, h.Served, h.Clock,
		func() time.Duration { return g.Manager.Consolidation.EvictionGrace })
	g.workloadAPI.Check(ctx)
	go g.workloadAPI.Run(ctx)
	h.Leader.OnLead(g.implicitPGs.EnsureAll)
	h.Syncs.After(g.clearStaleHeld) // held annotations of an earlier incarnation
	go g.Status.Run(ctx)
	return g, nil
}

// PriorityOf is the priority a pod counts with: its gang's own (an upstream
// PodGroup's spec.priority), else its own.
func (g *Gangs) PriorityOf(pod *v1.Pod) int32 {
	var spec *gangspec.Spec
	if ref, ok := g.RefOf(pod); ok {
		spec, _ = g.Spec(ref)
	}
	return spec.PriorityOf(pod)
}

// clearNomination removes a nomination that no plan of this scheduler
// stands behind: one a scheduler left on a member it had reserved when it
// died. The framework counts nominated pods on their node, so the stale
// nomination would make the node look taken to every plan.
func (g *Gangs) clearNomination(pod *v1.Pod) {
	if !g.host.Leader.Leading() {
		// The leader's nominations are not a standby's to clear.
		return
	}
	g.inFlight.Go("nomination/"+string(pod.UID), func() {
		body := []byte(`{"status":{"nominatedNodeName":null}}`)
		_, err := g.fw.Client.CoreV1().Pods(pod.Namespace).Patch(g.host.Ctx, pod.Name, types.MergePatchType, body, metav1.PatchOptions{}, "status")
		if err != nil {
			if !apierrors.IsNotFound(err) {
				klog.FromContext(g.host.Ctx).V(2).Info("Clearing a stale nomination", "pod", klog.KObj(pod), "err", err)
			}
			return
		}
		// The room the nomination seemed to take is free: plans that failed
		// for it may succeed now.
		g.CapacityChanged()
	})
}

// CapacityChanged is the one change signal: capacity or constraints may
// have changed without an event the scheduling queue sees, so cached plan
// failures are void and the gangs that failed to plan are woken (paced).
func (g *Gangs) CapacityChanged() { g.wakes.CapacityChanged() }

// WakeLead wakes one member to plan the gang (requeue.Waker.WakeLead).
func (g *Gangs) WakeLead(reason string, ref ident.Ref) { g.wakes.WakeLead(reason, ref) }

// Wake moves the pending members of the gangs back to the active queue.
func (g *Gangs) Wake(refs ...ident.Ref) { g.wakes.Wake(metrics.WokenPlanned, refs...) }

// TurnedAway remembers a plain pod a phalanx plugin rejected for a reason
// that changes without an event the scheduling queue sees, so Changed wakes it.
func (g *Gangs) TurnedAway(pod *v1.Pod) { g.wakes.TurnedAway(pod) }

// Refused runs when a member's cycle ends without a node (requeue.Waker.Refused).
func (g *Gangs) Refused(pod *v1.Pod) { g.wakes.Refused(pod) }

// PodEvent records a warning on a pod, once per distinct message.
func (g *Gangs) PodEvent(pod *v1.Pod, reason, msg string) {
	if !g.host.Leader.Leading() {
		return
	}
	g.mu.Lock()
	if g.podEvents[pod.UID] == msg {
		g.mu.Unlock()
		return
	}
	g.podEvents[pod.UID] = msg
	g.mu.Unlock()
	g.fw.Events.Eventf(pod, nil, v1.EventTypeWarning, reason, "Scheduling", "%s", msg)
}

// --- teardown and eviction -----------------------------------------------

// Released implements lifecycle.Listener: a plan ended before its quorum. Its
// waiting members are rejected, the condition says why (once), and gangs
// that waited for the capacity it held are woken.
func (g *Gangs) Released(ref ident.Ref, reserved []types.UID, reason, message string) {
	klog.Background().V(2).Info("Gang released", "gang", ref, "reason", reason, "message", message)
	if g.fw.Waiting != nil {
		for _, uid := range reserved {
			g.fw.Waiting.Reject(uid, GangPlugin, message)
		}
	}
	if reason == lifecycle.ReasonTimeout {
		message += g.unplacedNote(ref, reserved)
	}
	if spec, err := g.Spec(ref); err == nil {
		g.Status.Set(spec, status.Condition{Status: metav1.ConditionFalse, Reason: reason, Message: message})
	}
	metrics.PlanOutcomes.WithLabelValues(reason).Inc()
	g.CapacityChanged()
}

// maxUnplacedNamed bounds the members a timeout message names.
const maxUnplacedNamed = 3

// unplacedNote names the members a timed-out plan waited for in vain (not
// bound, not among the released reserved ones), with what the scheduler last
// said of each, so the user sees what kept the gang from completing.
func (g *Gangs) unplacedNote(ref ident.Ref, reserved []types.UID) string {
	was := sets.New(reserved...)
	var names []string
	for _, m := range g.Members(ref) {
		if m.Spec.NodeName != "" || m.DeletionTimestamp != nil || was.Has(m.UID) {
			continue
		}
		name := m.Name
		if _, c := podutil.GetPodCondition(&m.Status, v1.PodScheduled); c != nil && c.Status == v1.ConditionFalse && c.Message != "" {
			name += " (" + c.Message + ")"
		}
		names = append(names, name)
	}
	if len(names) == 0 {
		return ""
	}
	sort.Strings(names)
	more := ""
	if len(names) > maxUnplacedNamed {
		more = fmt.Sprintf(" and %d more", len(names)-maxUnplacedNamed)
		names = names[:maxUnplacedNamed]
	}
	return "; never placed: " + strings.Join(names, ", ") + more
}

// Resumed implements lifecycle.ResumeListener: a gang paused after a timed-out
// plan may plan again, through one member (wakeLead).
func (g *Gangs) Resumed(ref ident.Ref) { g.wakes.WakeLead(metrics.WokenResumed, ref) }

// HoldsFreed implements lifecycle.FreedListener: capacity a plan or reservation
// held was given up, so the pods its hold turned away, and the gangs whose
// plans failed for it, are woken.
func (g *Gangs) HoldsFreed() { go g.wakes.CapacityChanged() }

// Evict deletes pods — always every pod of a whole gang (eviction.Evictor).
func (g *Gangs) Evict(ctx context.Context, pods []*v1.Pod, reason, message string) {
	g.evictor.Evict(ctx, pods, reason, message)
}

// TrackWorkload sets how long the GPU pod shapes seen keep half their
// weight in fragmentation-aware placement (0: off). The first profile's
// half-life holds.
func (g *Gangs) TrackWorkload(halfLife time.Duration) {
	g.workloadOnce.Do(func() { g.Manager.Workload.SetHalfLife(halfLife) })
}

// StartSweeper runs, once per process and on the runtime's context, the check for gangs left partly
// bound without a plan (a crash in the middle of a gang's binds, a member
// that failed to bind after the quorum) for longer than their timeout: their
// bound members are evicted, so that no gang holds capacity it cannot use and
// the gang can start whole later.
func (g *Gangs) StartSweeper(defaultTimeout, every time.Duration) {
	ctx := g.host.Ctx
	g.sweeperOnce.Do(func() {
		var tick func()
		tick = func() {
			if ctx.Err() != nil {
				return
			}
			if g.host.Leader.Leading() {
				g.sweep(ctx, defaultTimeout)
			}
			g.host.Clock.AfterFunc(every, func() { go tick() })
		}
		// A fake clock runs AfterFunc callbacks under its lock: the sweep,
		// which reads the clock, runs on its own goroutine.
		g.host.Clock.AfterFunc(every, func() { go tick() })
	})
}

// retryFailedAfter is how long a gang's plan failure stands without a
// capacity change before the gang is planned again; longer when the failed
// gangs' plans take longer together (failedWakes: re-planning gangs that do
// not fit takes at most about half the scheduler's time).
const retryFailedAfter = 20 * time.Second

func (g *Gangs) sweep(ctx context.Context, defaultTimeout time.Duration) {
	g.wakes.WakeOverdueLeads()
	g.wakes.ForgetGone()
	g.evictor.Sweep(ctx)
	_, cost := g.Lifecycle.FailedGangs()
	for _, ref := range g.Lifecycle.FailedBefore(max(retryFailedAfter, cost)) {
		g.wakes.RetryFailed(metrics.WokenFailedRetry, ref)
	}
	for _, ref := range g.Lifecycle.Stranded(defaultTimeout) {
		spec, err := g.Spec(ref)
		if err != nil {
			continue
		}
		bound := map[types.UID]bool{}
		for _, uid := range g.Lifecycle.BoundMembers(ref) {
			bound[uid] = true
		}
		var pods []*v1.Pod
		for _, m := range g.Members(ref) {
			if bound[m.UID] && m.DeletionTimestamp == nil {
				pods = append(pods, m)
			}
		}
		if len(pods) == 0 {
			continue
		}
		timeout := spec.Timeout
		if timeout <= 0 {
			timeout = defaultTimeout
		}
		msg := fmt.Sprintf("%d of %d members were bound without the rest of their gang for more than %v; they are evicted so the gang can start whole",
			len(pods), spec.MinMember, timeout)
		klog.FromContext(ctx).Info("Evicting a partly bound gang", "gang", ref, "bound", len(pods), "minMember", spec.MinMember)
		g.Status.Set(spec, status.Condition{Status: metav1.ConditionFalse, Reason: lifecycle.ReasonStranded, Message: msg})
		g.Evict(ctx, pods, lifecycle.ReasonStranded, msg)
		metrics.Evictions.WithLabelValues(lifecycle.ReasonStranded).Inc()
	}
}

// trackPending keeps phalanx_gang_pending: a gang counts under the reason of
// its condition while the condition is not True.
func trackPending(_ ident.Ref, old, cur *status.Condition) {
	if old != nil && old.Status != metav1.ConditionTrue {
		metrics.GangsPending.WithLabelValues(old.Reason).Dec()
	}
	if cur != nil && cur.Status != metav1.ConditionTrue {
		metrics.GangsPending.WithLabelValues(cur.Reason).Inc()
	}
}

// queueLabel is the label that names a queue on pods, groups and namespaces.
const queueLabel = phalanxv1alpha1.QueueLabel

// directory is the gang directory as the waker reads it.
type directory struct{ g *Gangs }

func (d directory) Members(ref ident.Ref) []*v1.Pod     { return d.g.Members(ref) }
func (d directory) Pending(ref ident.Ref) []*v1.Pod     { return d.g.Pending(ref) }
func (d directory) RefOf(pod *v1.Pod) (ident.Ref, bool) { return d.g.RefOf(pod) }
func (d directory) Exists(ref ident.Ref) bool           { _, err := d.g.Spec(ref); return err == nil }
