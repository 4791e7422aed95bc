// Package capacityqueue is the CapacityQueue plugin: weighted, hierarchical
// queues (Queue, scheduling.phalanx.dev/v1alpha1) with guarantees, limits and
// gang-aware reclaim. It adapts the framework to internal/queue: admission at
// PreFilter (a gang enters only if its whole minimum fits its queue's
// allowance), ordering through Coscheduling's QueueSort, accounting at
// Reserve, and reclaim of whole gangs at PostFilter.
package capacityqueue

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
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/phalanx-sched/phalanx/apis/config"
	"github.com/phalanx-sched/phalanx/apis/config/validation"
	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/queue"
	"github.com/phalanx-sched/phalanx/internal/resources"
	phalanxclientset "github.com/phalanx-sched/phalanx/pkg/generated/clientset/versioned"
	phalanxinformers "github.com/phalanx-sched/phalanx/pkg/generated/informers/externalversions"
	phalanxlisters "github.com/phalanx-sched/phalanx/pkg/generated/listers/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/plugins/shared"
)

// Name is the plugin name used in the scheduler configuration.
const Name = "CapacityQueue"

// reclaimGrace is how long a gang waits for its victims to go before it may
// reclaim again.
const reclaimGrace = 30 * time.Second

// CapacityQueue admits, orders and reclaims by queue.
type CapacityQueue struct {
	h            fwk.Handle
	s            *shared.State
	client       phalanxclientset.Interface
	defaultQueue string
	reclaim      bool
	queues       phalanxlisters.QueueLister
	namespaces   corelisters.NamespaceLister
	nodes        corelisters.NodeLister
	ledger       *ledger

	mu         sync.Mutex
	tree       *queue.Tree
	problems   []queue.QueueError
	total      resources.List
	treeStale  bool
	totalStale bool
	reclaiming map[string]time.Time
	// ordering is the snapshot QueueSort compares with, refreshed at most
	// every orderingMaxAge: Less runs inside every queue operation.
	ordering   *snapshot
	orderingAt time.Time
	metricsAt  time.Time
}

const orderingMaxAge = 50 * time.Millisecond

var (
	_ fwk.PreFilterPlugin   = &CapacityQueue{}
	_ fwk.PostFilterPlugin  = &CapacityQueue{}
	_ fwk.ReservePlugin     = &CapacityQueue{}
	_ fwk.EnqueueExtensions = &CapacityQueue{}
	_ shared.QueueOrder     = &CapacityQueue{}
)

// New builds the plugin from validated args.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, ok := obj.(*config.CapacityQueueArgs)
	if !ok {
		return nil, fmt.Errorf("want args of type CapacityQueueArgs, got %T", obj)
	}
	if err := validation.ValidateCapacityQueueArgs(field.NewPath("pluginConfig").Key(Name).Child("args"), args); err != nil {
		return nil, fmt.Errorf("profile %q: %w", h.ProfileName(), err)
	}
	s, err := shared.Get(ctx, h)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	cfg := shared.CRDConfig(h.KubeConfig())
	if err := shared.RequireAPI(cfg, phalanxv1alpha1.SchemeGroupVersion.String(), "queues"); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	client, err := phalanxclientset.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	registerMetrics()
	factory := phalanxinformers.NewSharedInformerFactory(client, 0)
	queueInformer := factory.Scheduling().V1alpha1().Queues()
	pl := &CapacityQueue{
		h: h, s: s, client: client,
		defaultQueue: args.DefaultQueue, reclaim: args.EnableReclaim,
		queues:     queueInformer.Lister(),
		namespaces: h.SharedInformerFactory().Core().V1().Namespaces().Lister(),
		nodes:      h.SharedInformerFactory().Core().V1().Nodes().Lister(),
		ledger:     newLedger(),
		treeStale:  true,
		totalStale: true,
		reclaiming: map[string]time.Time{},
	}
	if _, err := queueInformer.Informer().AddEventHandler(stale(&pl.mu, &pl.treeStale)); err != nil {
		return nil, err
	}
	if _, err := h.SharedInformerFactory().Core().V1().Nodes().Informer().AddEventHandler(stale(&pl.mu, &pl.totalStale)); err != nil {
		return nil, err
	}
	if _, err := h.SharedInformerFactory().Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    pl.onPod,
		UpdateFunc: func(_, newObj any) { pl.onPod(newObj) },
		DeleteFunc: pl.onPodDelete,
	}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	pl.ensureDefaultQueue(ctx)
	s.SetQueueOrder(pl)
	return pl, nil
}

// Name returns the plugin name.
func (pl *CapacityQueue) Name() string { return Name }

// ensureDefaultQueue creates the queue of pods that name none, if missing.
func (pl *CapacityQueue) ensureDefaultQueue(ctx context.Context) {
	if _, err := pl.queues.Get(pl.defaultQueue); err == nil {
		return
	}
	q := &phalanxv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: pl.defaultQueue}}
	if _, err := pl.client.SchedulingV1alpha1().Queues().Create(ctx, q, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		klog.FromContext(ctx).Error(err, "Creating the default queue; pods that name no queue wait until it exists", "queue", pl.defaultQueue)
	}
}

// stale returns handlers that set *flag on any event.
func stale(mu *sync.Mutex, flag *bool) cache.ResourceEventHandlerFuncs {
	set := func() {
		mu.Lock()
		*flag = true
		mu.Unlock()
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { set() },
		UpdateFunc: func(any, any) { set() },
		DeleteFunc: func(any) { set() },
	}
}

// QueueOf returns a pod's queue: its label, its PodGroup's label, its
// namespace's label, else the default queue.
func (pl *CapacityQueue) QueueOf(pod *v1.Pod) string {
	if q := pod.Labels[queue.Label]; q != "" {
		return q
	}
	var pgLabels, nsLabels map[string]string
	if key := shared.GangKey(pod); key != "" {
		if pg, err := pl.s.PodGroup(key); err == nil {
			pgLabels = pg.Labels
		}
	}
	if ns, err := pl.namespaces.Get(pod.Namespace); err == nil {
		nsLabels = ns.Labels
	}
	return queue.Resolve(pod.Labels, pgLabels, nsLabels, pl.defaultQueue)
}

func (pl *CapacityQueue) onPod(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	if terminal(pod) || pod.DeletionTimestamp != nil {
		pl.ledger.remove(pod.UID)
	} else {
		gang := shared.GangKey(pod)
		if gang == "" {
			// A plain pod is its own gang of one for reclaim.
			gang = "pod:" + pod.Namespace + "/" + pod.Name
		}
		placed := pod.Spec.NodeName != "" || pl.s.Gangs.IsReserved(shared.GangKey(pod), pod.UID)
		pl.ledger.set(pod.UID, charge{queue: pl.QueueOf(pod), req: resources.PodRequests(pod), placed: placed, gang: gang})
	}
}

func (pl *CapacityQueue) onPodDelete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if pod, ok := obj.(*v1.Pod); ok {
		pl.ledger.remove(pod.UID)
	}
}

// snapshot is the queue state the extension points read.
type snapshot struct {
	tree     *queue.Tree
	problems []queue.QueueError
	total    resources.List
	// allocated: placed pods plus capacity held by planned gangs.
	allocated, pending, deserved map[string]resources.List
}

// view returns the queue state: the tree is rebuilt only when queues
// changed and the cluster total only when nodes changed; usage and deserved
// shares are recomputed each time, in O(queues + planned gangs).
func (pl *CapacityQueue) view() *snapshot {
	pl.mu.Lock()
	if pl.treeStale {
		pl.treeStale = false
		objs, _ := pl.queues.List(labels.Everything())
		qs := make([]queue.Queue, 0, len(objs))
		for _, o := range objs {
			qs = append(qs, queue.FromAPI(o))
		}
		pl.tree, pl.problems = queue.Build(qs)
	}
	if pl.totalStale {
		pl.totalStale = false
		pl.total = resources.List{}
		if nodes, err := pl.nodes.List(labels.Everything()); err == nil {
			for _, n := range nodes {
				if !n.Spec.Unschedulable {
					pl.total.Add(resources.FromResourceList(n.Status.Allocatable))
				}
			}
		}
	}
	snap := &snapshot{tree: pl.tree, problems: pl.problems, total: pl.total}
	pl.mu.Unlock()

	placed, pending := pl.ledger.totals()
	// Capacity that planned gangs hold counts against their queue.
	for key, held := range pl.s.Gangs.OpenRequests() {
		if members := pl.s.Members(key); len(members) > 0 {
			q := pl.QueueOf(members[0])
			if placed[q] == nil {
				placed[q] = resources.List{}
			}
			placed[q].Add(held)
		}
	}
	demand := map[string]resources.List{}
	for q, l := range placed {
		demand[q] = l.Clone()
	}
	for q, l := range pending {
		if demand[q] == nil {
			demand[q] = resources.List{}
		}
		demand[q].Add(l)
	}
	snap.allocated, snap.pending = placed, pending
	snap.deserved = snap.tree.Deserved(snap.total, demand)
	pl.mu.Lock()
	if time.Since(pl.metricsAt) > time.Second {
		pl.metricsAt = time.Now()
		pl.mu.Unlock()
		recordMetrics(snap)
	} else {
		pl.mu.Unlock()
	}
	return snap
}

// Compare orders two pods by their queues' shares (QueueOrder).
func (pl *CapacityQueue) Compare(a, b *v1.Pod) int {
	qa, qb := pl.QueueOf(a), pl.QueueOf(b)
	if qa == qb {
		return 0
	}
	pl.mu.Lock()
	snap := pl.ordering
	fresh := snap != nil && time.Since(pl.orderingAt) < orderingMaxAge
	pl.mu.Unlock()
	if !fresh {
		snap = pl.view()
		pl.mu.Lock()
		pl.ordering, pl.orderingAt = snap, time.Now()
		pl.mu.Unlock()
	}
	return snap.tree.Compare(qa, qb, snap.allocated, snap.deserved)
}

// request is what a pod asks its queue for: the gang's remaining minimum for
// a gang member whose gang is not admitted yet, its own request otherwise.
// admitted reports that the gang already has a plan or its quorum.
func (pl *CapacityQueue) request(pod *v1.Pod) (need resources.List, pg *pgv1alpha1.PodGroup, admitted bool) {
	key := shared.GangKey(pod)
	if key == "" {
		return resources.PodRequests(pod), nil, false
	}
	pg, err := pl.s.PodGroup(key)
	if err != nil {
		return resources.PodRequests(pod), nil, false
	}
	if pl.s.Gangs.Live(key) {
		return nil, pg, true
	}
	members := pl.s.Members(key)
	reserved := pl.s.Gangs.ReservedUIDs(key)
	placed := 0
	var waiting []*v1.Pod
	for _, m := range members {
		switch {
		case m.DeletionTimestamp != nil:
		case m.Spec.NodeName != "" || reserved.Has(m.UID):
			placed++
		default:
			waiting = append(waiting, m)
		}
	}
	if placed >= int(pg.Spec.MinMember) {
		return nil, pg, true
	}
	// The members that will be planned: this pod first, then the oldest.
	sort.SliceStable(waiting, func(i, j int) bool {
		if waiting[i].UID == pod.UID {
			return true
		}
		if waiting[j].UID == pod.UID {
			return false
		}
		return waiting[i].CreationTimestamp.Before(&waiting[j].CreationTimestamp)
	})
	need = resources.List{}
	for i := 0; i < int(pg.Spec.MinMember)-placed && i < len(waiting); i++ {
		need.Add(resources.PodRequests(waiting[i]))
	}
	return need, pg, false
}

// admit applies the queue's allowance and fairness to a request.
func (pl *CapacityQueue) admit(snap *snapshot, q string, need resources.List) (bool, string) {
	if _, ok := snap.tree.Get(q); !ok {
		for _, p := range snap.problems {
			if p.Queue == q {
				return false, fmt.Sprintf("queue %s is invalid: %s", q, p.Reason)
			}
		}
		return false, fmt.Sprintf("queue %s does not exist", q)
	}
	if !snap.tree.IsLeaf(q) {
		return false, fmt.Sprintf("queue %s has child queues; only leaf queues take pods", q)
	}
	if ok, reason := snap.tree.Admit(q, need, snap.total, snap.allocated); !ok {
		return false, reason
	}
	// Work-conserving fairness: a queue may go above its deserved share only
	// while no other queue waits below its own.
	if r, over := exceeds(snap.allocated[q], need, snap.deserved[q]); over {
		if other := pl.starvedOther(snap, q); other != "" {
			return false, fmt.Sprintf("queue %s would go above its deserved share (%s) while queue %s waits below its share", q, r, other)
		}
	}
	return true, ""
}

// exceeds reports the first resource of need for which used+need > deserved.
func exceeds(used, need, deserved resources.List) (string, bool) {
	names := make([]string, 0, len(need))
	for r := range need {
		names = append(names, string(r))
	}
	sort.Strings(names)
	for _, n := range names {
		r := v1.ResourceName(n)
		if need[r] > 0 && used[r]+need[r] > deserved[r] {
			return fmt.Sprintf("%s %s of %s", n, amount(r, used[r]+need[r]), amount(r, deserved[r])), true
		}
	}
	return "", false
}

func amount(r v1.ResourceName, v int64) string {
	if r == v1.ResourceCPU {
		return fmt.Sprintf("%dm", v)
	}
	return fmt.Sprint(v)
}

// starvedOther returns a leaf queue other than q that has pending demand and
// is below its deserved share on a resource it asks for.
func (pl *CapacityQueue) starvedOther(snap *snapshot, q string) string {
	var names []string
	for other, pending := range snap.pending {
		if other == q || pending.IsZero() || !snap.tree.IsLeaf(other) {
			continue
		}
		for r, v := range pending {
			if v > 0 && snap.allocated[other][r] < snap.deserved[other][r] {
				names = append(names, other)
				break
			}
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

// PreFilter admits a gang (its whole remaining minimum) or a plain pod
// against its queue; nothing is planned or reserved for what is refused.
func (pl *CapacityQueue) PreFilter(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	need, pg, admitted := pl.request(pod)
	if admitted {
		return nil, nil
	}
	q := pl.QueueOf(pod)
	if ok, reason := pl.admit(pl.view(), q, need); !ok {
		if pg != nil {
			pl.s.Status.Set(pg, metav1.ConditionFalse, shared.ReasonQueue, reason)
		} else {
			pl.h.EventRecorder().Eventf(pod, nil, v1.EventTypeWarning, shared.ReasonQueue, "Scheduling", "%s", reason)
		}
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, reason)
	}
	return nil, nil
}

// PreFilterExtensions returns nil.
func (pl *CapacityQueue) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Reserve charges the pod to its queue at once, before it is bound.
func (pl *CapacityQueue) Reserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) *fwk.Status {
	gang := shared.GangKey(pod)
	if gang == "" {
		gang = "pod:" + pod.Namespace + "/" + pod.Name
	}
	pl.ledger.set(pod.UID, charge{queue: pl.QueueOf(pod), req: resources.PodRequests(pod), placed: true, gang: gang})
	return nil
}

// Unreserve gives the charge back.
func (pl *CapacityQueue) Unreserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	pl.ledger.markPlaced(pod.UID, false)
}

// PostFilter reclaims: a pod (or gang) admitted by its queue, below its
// deserved share, that found no room evicts whole gangs of reclaimable queues
// above their share — lowest priority first, fewest victims.
func (pl *CapacityQueue) PostFilter(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, statuses fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	if !pl.reclaim {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	need, pg, admitted := pl.request(pod)
	if admitted || need.IsZero() {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	q := pl.QueueOf(pod)
	snap := pl.view()
	admissible, _ := pl.admit(snap, q, need)
	if _, over := exceeds(snap.allocated[q], need, snap.deserved[q]); over {
		return nil, fwk.NewStatus(fwk.Unschedulable, "queue is at its deserved share; nothing to reclaim")
	}
	key := shared.GangKey(pod)
	if key == "" {
		key = "pod:" + pod.Namespace + "/" + pod.Name
	}
	pl.mu.Lock()
	if since, ok := pl.reclaiming[key]; ok && time.Since(since) < reclaimGrace {
		pl.mu.Unlock()
		return nil, fwk.NewStatus(fwk.Unschedulable, "waiting for reclaimed capacity")
	}
	pl.mu.Unlock()

	var running []queue.Gang
	for gk, c := range pl.ledger.gangUsage() {
		running = append(running, queue.Gang{Key: gk, Queue: c.queue, Priority: pl.priorityOf(gk), Usage: c.req})
	}
	sort.Slice(running, func(i, j int) bool { return running[i].Key < running[j].Key })
	victims, why := snap.tree.PlanReclaim(q, need, running, snap.allocated, snap.deserved)
	if len(victims) == 0 {
		if !admissible {
			return nil, fwk.NewStatus(fwk.Unschedulable)
		}
		return nil, fwk.NewStatus(fwk.Unschedulable, "nothing to reclaim: "+why)
	}
	// A queue refused by an ancestor's capability, which a sibling above its
	// deserved share fills, is admitted once the victims are gone; any other
	// refusal (closed queue, capability of its own) reclaim cannot cure.
	if !admissible && !admitsWithout(snap, q, need, victims) {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	pl.mu.Lock()
	pl.reclaiming[key] = time.Now()
	pl.mu.Unlock()
	names := make([]string, 0, len(victims))
	for _, v := range victims {
		names = append(names, v.Key+" ("+v.Queue+")")
		pl.evict(ctx, v, q, key)
	}
	msg := fmt.Sprintf("queue %s is below its deserved share: reclaiming from %s", q, strings.Join(names, ", "))
	klog.FromContext(ctx).V(2).Info("Reclaiming whole gangs", "queue", q, "for", key, "victims", names)
	reclaims.WithLabelValues(q).Add(float64(len(victims)))
	if pg != nil {
		pl.s.Status.Set(pg, metav1.ConditionFalse, "Reclaiming", msg)
	}
	return nil, fwk.NewStatus(fwk.Unschedulable, msg)
}

// admitsWithout reports whether queue q admits need once the victims' usage
// is given back.
func admitsWithout(snap *snapshot, q string, need resources.List, victims []queue.Gang) bool {
	after := make(map[string]resources.List, len(snap.allocated))
	for name, l := range snap.allocated {
		after[name] = l.Clone()
	}
	for _, v := range victims {
		if after[v.Queue] != nil {
			after[v.Queue].Sub(v.Usage)
		}
	}
	ok, _ := snap.tree.Admit(q, need, snap.total, after)
	return ok
}

func (pl *CapacityQueue) priorityOf(gangKey string) int32 {
	for _, p := range pl.podsOf(gangKey) {
		if p.Spec.Priority != nil {
			return *p.Spec.Priority
		}
	}
	return 0
}

// podsOf lists the pods of a reclaim candidate ("ns/podgroup" or "pod:ns/name").
func (pl *CapacityQueue) podsOf(gangKey string) []*v1.Pod {
	if ref, ok := strings.CutPrefix(gangKey, "pod:"); ok {
		ns, name, _ := cache.SplitMetaNamespaceKey(ref)
		if p, err := pl.s.Pods.Pods(ns).Get(name); err == nil {
			return []*v1.Pod{p}
		}
		return nil
	}
	return pl.s.Members(gangKey)
}

// evict deletes every member of a victim gang — a whole gang, never a part —
// and says why on each pod.
func (pl *CapacityQueue) evict(ctx context.Context, v queue.Gang, forQueue, forKey string) {
	for _, p := range pl.podsOf(v.Key) {
		pl.h.EventRecorder().Eventf(p, nil, v1.EventTypeNormal, "Reclaimed", "Evicting",
			"evicted with its whole gang so that queue %s (for %s) gets its deserved share", forQueue, forKey)
		err := pl.h.ClientSet().CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			klog.FromContext(ctx).Error(err, "Evicting pod for reclaim", "pod", klog.KObj(p))
		}
	}
}

// EventsToRegister: capacity freed, queues changed.
func (pl *CapacityQueue) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable}},
		{Event: fwk.ClusterEvent{Resource: "queues.v1alpha1.scheduling.phalanx.dev", ActionType: fwk.All}},
	}, nil
}
