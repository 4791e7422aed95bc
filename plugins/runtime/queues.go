package runtime

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/devices"
	"github.com/phalanx-sched/phalanx/internal/gang"
	"github.com/phalanx-sched/phalanx/internal/informersync"
	"github.com/phalanx-sched/phalanx/internal/metrics"
	"github.com/phalanx-sched/phalanx/internal/queue"
	"github.com/phalanx-sched/phalanx/internal/requeue"
	"github.com/phalanx-sched/phalanx/internal/resources"
	phalanxclientset "github.com/phalanx-sched/phalanx/pkg/generated/clientset/versioned"
	phalanxlisters "github.com/phalanx-sched/phalanx/pkg/generated/listers/scheduling/v1alpha1"
)

// orderingMaxAge bounds how stale the snapshot QueueSort compares with may
// be: Less runs inside every queue operation, a snapshot costs O(queues).
const orderingMaxAge = 50 * time.Millisecond

// orderingMaxAgeDecaying bounds how long an unchanged cache's order is
// reused with decayed fair share (half-lives are minutes to days).
const orderingMaxAgeDecaying = time.Second

// Queues is the queue accounting of the process: a queue.Cache fed from the
// scheduler's pod and node informers and the Queue informer, the resolution
// of a pod's queue, and the gangs waiting for queue admission.
type Queues struct {
	// feed turns nodes, slices, queues and pods into cache's accounting.
	feed *queue.Feed

	rt         *Runtime
	gangs      *Gangs
	opts       QueueOptions
	cache      *queue.Cache
	queues     phalanxlisters.QueueLister
	namespaces corelisters.NamespaceLister
	pods       corelisters.PodLister
	client     phalanxclientset.Interface

	mu              sync.Mutex
	ordering        *queue.Snapshot
	orderingAt      time.Time
	orderingVersion uint64
	metricsAt       time.Time
	// blocked: gangs and plain pods refused admission; woken when queues or
	// capacity change.
	blocked    map[gang.Ref]bool
	blockedPod map[string]*v1.Pod
	// wakePending: a wake of the refused is scheduled (Block).
	wakePending bool
	// gone: deleted queues whose metric series are still to be removed.
	gone []string
	// left is closed when a pod's charge is given back, if AwaitLeft waits.
	left chan struct{}
}

// QueueOptions are the CapacityQueue args the process's queues are built
// with; every profile must give the same.
type QueueOptions struct {
	// DefaultQueue takes pods that name no queue.
	DefaultQueue string
	// UsageHalfLife turns decayed fair share on (0: off).
	UsageHalfLife time.Duration
}

func newQueues(r *Runtime, gangs *Gangs, opts QueueOptions) (*Queues, error) {
	ctx, fw := r.ctx, r.ports()
	if err := r.require(phalanxv1alpha1.SchemeGroupVersion.String(), "queues"); err != nil {
		return nil, err
	}
	client, err := r.phalanxClient()
	if err != nil {
		return nil, err
	}
	q := &Queues{
		rt: r, gangs: gangs, opts: opts, cache: queue.NewCache(), client: client,
		namespaces: fw.Informers.Core().V1().Namespaces().Lister(),
		pods:       fw.Informers.Core().V1().Pods().Lister(),
		blocked:    map[gang.Ref]bool{},
		blockedPod: map[string]*v1.Pod{},
	}
	q.cache.DecayUsage(opts.UsageHalfLife, r.clock)
	// Devices published in ResourceSlices count in the cluster total as
	// their classes' queue resources (without a DRA manager, none).
	var slices *devices.NodeSlices
	if gangs.Devices != nil {
		slices = devices.NewNodeSlices(gangs.Devices)
	}
	q.feed = queue.NewFeed(q.cache, slices, fw.Informers.Core().V1().Nodes().Lister().Get)
	r.addPodHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    q.onPod,
		UpdateFunc: func(_, newObj any) { q.onPod(newObj) },
		DeleteFunc: q.onPodDelete,
	})
	if _, err := fw.Informers.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    q.onNode,
		UpdateFunc: func(_, newObj any) { q.onNode(newObj) },
		DeleteFunc: q.onNodeDelete,
	}); err != nil {
		return nil, err
	}
	if err := q.watchSlices(fw); err != nil {
		return nil, err
	}
	if _, err := fw.Informers.Core().V1().Namespaces().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*v1.Namespace)
			n, ok2 := newObj.(*v1.Namespace)
			if ok1 && ok2 && o.Labels[queue.Label] != n.Labels[queue.Label] {
				q.recharge(n.Name, nil)
			}
		},
	}); err != nil {
		return nil, err
	}
	factory, err := r.phalanxInformers()
	if err != nil {
		return nil, err
	}
	inf := factory.Scheduling().V1alpha1().Queues()
	q.queues = inf.Lister()
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    q.onQueue,
		UpdateFunc: func(_, obj any) { q.onQueue(obj) },
		DeleteFunc: q.onQueueDelete,
	}); err != nil {
		return nil, err
	}
	if err := r.syncs.Part("Queues", factory.Start, func(stop <-chan struct{}) []string {
		return informersync.Unsynced(factory.WaitForCacheSync(stop))
	}); err != nil {
		return nil, err
	}
	r.syncs.After(func() { q.ensureDefaultQueue(ctx) })
	if opts.UsageHalfLife > 0 {
		go q.wakeAsUsageDecays(ctx)
	}
	return q, nil
}

// wakeAsUsageDecays retries the gangs refused admission every sixteenth
// of the half-life (at least decayWakeMin): with decayed fair share, shares move as recent usage
// decays, with no event to say so.
func (q *Queues) wakeAsUsageDecays(ctx context.Context) {
	every := max(decayWakeMin, q.opts.UsageHalfLife/16)
	for {
		select {
		case <-ctx.Done():
			return
		case <-q.rt.clock.After(every):
			q.wakeBlocked()
		}
	}
}

// decayWakeMin bounds how often wakeAsUsageDecays retries.
const decayWakeMin = 5 * time.Second

// ensureDefaultQueue creates the queue of pods that name none, if missing.
func (q *Queues) ensureDefaultQueue(ctx context.Context) {
	if _, err := q.queues.Get(q.opts.DefaultQueue); err == nil {
		return
	}
	obj := &phalanxv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: q.opts.DefaultQueue}}
	if _, err := q.client.SchedulingV1alpha1().Queues().Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		klog.FromContext(ctx).Error(err, "Creating the default queue; pods that name no queue wait until it exists", "queue", q.opts.DefaultQueue)
	}
}

// QueueOf returns a pod's queue with queue.Of, the resolution the
// controller shares: its label, its gang's group object's label (for an
// upstream PodGroup, the PodGroup's else its Workload's), its namespace's
// label, else the default queue.
func (q *Queues) QueueOf(pod *v1.Pod) string {
	if name := pod.Labels[queue.Label]; name != "" {
		return name
	}
	var groupLabels, nsLabels map[string]string
	if _, spec, ok, err := q.gangs.GangOf(pod); ok && err == nil {
		groupLabels = spec.Labels
	}
	if ns, err := q.namespaces.Get(pod.Namespace); err == nil {
		nsLabels = ns.Labels
	}
	return queue.Of(pod, groupLabels, nsLabels, q.opts.DefaultQueue)
}

// QueueOfGang returns the queue of a gang with the given member (nil: none
// at hand).
func (q *Queues) QueueOfGang(spec *gang.Spec, member *v1.Pod) string {
	var nsLabels map[string]string
	if ns, err := q.namespaces.Get(spec.Namespace); err == nil {
		nsLabels = ns.Labels
	}
	return queue.Of(member, spec.Labels, nsLabels, q.opts.DefaultQueue)
}

func (q *Queues) charge(pod *v1.Pod) {
	ref, isMember := q.gangs.RefOf(pod)
	reserved := isMember && q.gangs.Lifecycle.IsPlaced(ref, pod.UID)
	if q.feed.ChargePod(pod, q.QueueOf(pod), q.gangs.Manager.Demand(pod), reserved) {
		q.gaveBack() // a finished pod gave its queue's share back
	}
}

func (q *Queues) onPod(obj any) {
	if pod, ok := obj.(*v1.Pod); ok {
		q.charge(pod)
	}
}

func (q *Queues) onPodDelete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if pod, ok := obj.(*v1.Pod); ok {
		if q.feed.DeletePod(pod.UID) {
			q.gaveBack()
		}
		// A gang whose last member is gone waits for nothing (the informer's
		// index no longer holds the deleted pod).
		ref, isMember := q.gangs.RefOf(pod)
		gone := isMember && len(q.gangs.Members(ref)) == 0
		q.mu.Lock()
		delete(q.blockedPod, pod.Namespace+"/"+pod.Name)
		if gone {
			delete(q.blocked, ref)
		}
		q.mu.Unlock()
	}
}

// recharge resolves the queue of a namespace's pods again (its label
// changed), or of a gang's members when ref is set.
func (q *Queues) recharge(namespace string, ref *gang.Ref) {
	q.gangs.order.changed()
	var pods []*v1.Pod
	if ref != nil {
		pods = q.gangs.Members(*ref)
	} else if list, err := q.pods.Pods(namespace).List(labels.Everything()); err == nil {
		pods = list
	}
	for _, p := range pods {
		q.charge(p)
	}
}

func (q *Queues) onNode(obj any) {
	if n, ok := obj.(*v1.Node); ok {
		q.feed.SetNode(n)
	}
}

func (q *Queues) onNodeDelete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if n, ok := obj.(*v1.Node); ok {
		q.feed.DeleteNode(n.Name)
	}
}

func (q *Queues) onQueue(obj any) {
	if o, ok := obj.(*phalanxv1alpha1.Queue); ok {
		q.feed.SetQueue(o)
		q.wakeBlocked()
	}
}

func (q *Queues) onQueueDelete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if o, ok := obj.(*phalanxv1alpha1.Queue); ok {
		q.feed.DeleteQueue(o.Name)
		q.mu.Lock()
		q.gone = append(q.gone, o.Name)
		q.mu.Unlock()
		q.wakeBlocked()
	}
}

// Reserved charges a pod to its queue as placed, before it is bound.
func (q *Queues) Reserved(pod *v1.Pod) {
	q.cache.MarkPlaced(pod.UID, true, queue.Charge{Queue: q.QueueOf(pod), Request: q.gangs.Manager.Demand(pod)})
}

// Unreserved gives the charge back.
func (q *Queues) Unreserved(pod *v1.Pod) { q.cache.MarkPlaced(pod.UID, false) }

// Snapshot is the queue state for one scheduling cycle: capacity that plans
// and reservations hold counts against their gangs' queues (queue.ChargeHeld,
// as the controller counts the held annotation the status.Writer publishes). A request being decided counts as
// demand of its queue (wanting), even before the informer has charged every
// member that asks for it.
func (q *Queues) Snapshot(wanting ...queue.Want) *queue.Snapshot {
	held := queue.ChargeHeld(q.gangs.Lifecycle.HeldByGang(), func(ref gang.Ref) (string, bool) {
		spec, err := q.gangs.Spec(ref)
		if err != nil {
			return "", false
		}
		return q.QueueOfGang(spec, gang.Oldest(q.gangs.Members(ref))), true
	})
	snap := q.cache.Snapshot(held, wanting...)
	snap.Stalled = q.stalled()
	snap.Blocked = q.blockedDemand()
	q.mu.Lock()
	record := time.Since(q.metricsAt) > time.Second
	var gone []string
	if record {
		q.metricsAt = time.Now()
		gone, q.gone = q.gone, nil
	}
	q.mu.Unlock()
	if record {
		metrics.RecordQueues(snap.Allocated, snap.Deserved, snap.Recent, snap.Pending, gone)
	}
	return snap
}

// stalled sums, by queue, the demand of pending members of gangs that
// cannot start on the room free now (queue.Snapshot.Stalled).
func (q *Queues) stalled() map[string]resources.List {
	return q.demandOf(q.gangs.Lifecycle.Stalled(), nil)
}

// blockedDemand sums, by queue, the demand of what waits refused admission
// (queue.Snapshot.Blocked).
func (q *Queues) blockedDemand() map[string]resources.List {
	q.mu.Lock()
	refs := make([]gang.Ref, 0, len(q.blocked))
	for ref := range q.blocked {
		refs = append(refs, ref)
	}
	pods := make([]*v1.Pod, 0, len(q.blockedPod))
	for _, p := range q.blockedPod {
		pods = append(pods, p)
	}
	q.mu.Unlock()
	return q.demandOf(refs, pods)
}

// demandOf sums, by queue, the demand of the pending members of gangs refs
// and of pods.
func (q *Queues) demandOf(refs []gang.Ref, pods []*v1.Pod) map[string]resources.List {
	out := map[string]resources.List{}
	add := func(name string, p *v1.Pod) {
		if out[name] == nil {
			out[name] = resources.List{}
		}
		out[name].Add(q.gangs.Manager.Demand(p))
	}
	for _, ref := range refs {
		spec, err := q.gangs.Spec(ref)
		pending := q.gangs.Pending(ref)
		if err != nil || len(pending) == 0 {
			continue
		}
		name := q.QueueOfGang(spec, gang.Oldest(pending))
		for _, p := range pending {
			add(name, p)
		}
	}
	for _, p := range pods {
		add(q.QueueOf(p), p)
	}
	return out
}

// Ordering is the snapshot QueueSort compares with: reused while the cache is
// unchanged, and at most orderingMaxAge old otherwise.
func (q *Queues) Ordering() *queue.Snapshot {
	version := q.cache.Version()
	q.mu.Lock()
	snap := q.ordering
	age := time.Since(q.orderingAt)
	// With decayed fair share an unchanged cache still ages: its order is
	// reused for orderingMaxAgeDecaying at most.
	fresh := snap != nil && (age < orderingMaxAge || (q.orderingVersion == version && (q.opts.UsageHalfLife == 0 || age < orderingMaxAgeDecaying)))
	q.mu.Unlock()
	if fresh {
		return snap
	}
	snap = q.Snapshot()
	q.mu.Lock()
	q.ordering, q.orderingAt, q.orderingVersion = snap, time.Now(), version
	q.mu.Unlock()
	return snap
}

// Block remembers a gang (or a plain pod, when ref is zero) refused
// admission. A gang refused for the first time wakes the others that wait
// refused: queues whose work is all refused yield to the queue first in
// order (queue.Snapshot.Admit), so two queues whose gangs each exceed
// their share do not wait on each other.
func (q *Queues) Block(ref gang.Ref, pod *v1.Pod) {
	q.mu.Lock()
	newly := false
	if !ref.IsZero() {
		newly = !q.blocked[ref]
		q.blocked[ref] = true
	} else if len(q.blockedPod) < requeue.MaxTurnedAway {
		key := pod.Namespace + "/" + pod.Name
		newly = q.blockedPod[key] == nil
		q.blockedPod[key] = pod
	}
	q.mu.Unlock()
	if newly {
		q.wakeSoon()
	}
}

// wakeSoon wakes what waits for queue admission after blockedWakeDelay,
// once for a burst of calls.
func (q *Queues) wakeSoon() {
	q.mu.Lock()
	soon := !q.wakePending
	q.wakePending = true
	q.mu.Unlock()
	if soon {
		q.rt.clock.AfterFunc(blockedWakeDelay, func() {
			go func() { // a fake clock calls back under its lock
				q.mu.Lock()
				q.wakePending = false
				q.mu.Unlock()
				q.wakeBlocked()
			}()
		})
	}
}

// blockedWakeDelay is how soon a new refusal, or a share given back,
// wakes the gangs refused before it.
const blockedWakeDelay = 500 * time.Millisecond

// Unblock forgets a gang (or a plain pod, when ref is zero) admitted since,
// or deleted.
func (q *Queues) Unblock(ref gang.Ref, pod *v1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !ref.IsZero() {
		delete(q.blocked, ref)
	} else if pod != nil {
		delete(q.blockedPod, pod.Namespace+"/"+pod.Name)
	}
}

// RefusedAhead is queue admission's view of the order for pod: whether the
// first work of queue other that waits refused admission goes before the pod's
// gang (gang.Compare on snap's queue order, as the queue sort orders them).
// It is read only when the pod's queue would go above its share.
func (q *Queues) RefusedAhead(pod *v1.Pod, snap *queue.Snapshot) func(other string) bool {
	var first map[string]gang.Order
	var mine gang.Order
	less := func(a, b gang.Order) bool { c, _ := gang.Compare(a, b, snap.Compare); return c < 0 }
	load := func() {
		mine = q.gangs.OrderKey(pod, pod.CreationTimestamp.Time, q).Order
		q.mu.Lock()
		refs := make([]gang.Ref, 0, len(q.blocked))
		for ref := range q.blocked {
			refs = append(refs, ref)
		}
		pods := make([]*v1.Pod, 0, len(q.blockedPod))
		for _, p := range q.blockedPod {
			pods = append(pods, p)
		}
		q.mu.Unlock()
		first = map[string]gang.Order{}
		consider := func(p *v1.Pod) {
			o := q.gangs.OrderKey(p, p.CreationTimestamp.Time, q).Order
			if cur, ok := first[o.Queue]; !ok || less(o, cur) {
				first[o.Queue] = o
			}
		}
		for _, ref := range refs {
			if pending := q.gangs.Pending(ref); len(pending) > 0 {
				consider(gang.Oldest(pending))
			}
		}
		for _, p := range pods {
			consider(p)
		}
	}
	return func(other string) bool {
		if first == nil {
			load()
		}
		o, ok := first[other]
		return ok && less(o, mine)
	}
}

// blockedGang reports whether the gang waits for queue admission.
func (q *Queues) blockedGang(ref gang.Ref) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.blocked[ref]
}

// wakeBlocked wakes what waits for queue admission: each gang through one
// member (admission is the whole gang's; its plan wakes the rest), the
// plain pods themselves. Woken whole, every member of every refused gang
// was refused again in its own cycle each time a pod finished anywhere,
// and the gangs admitted waited behind them.
func (q *Queues) wakeBlocked() {
	q.mu.Lock()
	refs := make([]gang.Ref, 0, len(q.blocked))
	for ref := range q.blocked {
		refs = append(refs, ref)
	}
	pods := make(map[string]*v1.Pod, len(q.blockedPod))
	for k, p := range q.blockedPod {
		pods[k] = p
	}
	q.mu.Unlock()
	gang.SortRefs(refs)
	for _, ref := range refs {
		q.gangs.wakes.WakeLead(metrics.WokenQueueAdmission, ref)
	}
	q.rt.Activate(metrics.WokenQueueAdmission, pods)
}
