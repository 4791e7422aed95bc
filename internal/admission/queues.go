// Package admission is CapacityQueue's live queue accounting in the
// scheduler: a queue.Cache fed from pod, node, namespace, Queue and device
// events, the resolution of a pod's queue, the snapshot a cycle admits on,
// and the gangs and pods waiting refused admission, woken when shares move.
// The policy (shares, order, admission, reclaim) is internal/queue's; this
// package keeps it current and answers the plugins.
package admission

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/devices"
	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/queue"
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

// Options are the CapacityQueue args the process's queues are built with;
// every profile must give the same.
type Options struct {
	// DefaultQueue takes pods that name no queue.
	DefaultQueue string
	// UsageHalfLife turns decayed fair share on (0: off).
	UsageHalfLife time.Duration
}

// Gangs is what the accounting reads of the gang directory.
type Gangs interface {
	GangOf(pod *v1.Pod) (ident.Ref, *gangspec.Spec, bool, error)
	RefOf(pod *v1.Pod) (ident.Ref, bool)
	Spec(ref ident.Ref) (*gangspec.Spec, error)
	Members(ref ident.Ref) []*v1.Pod
	Pending(ref ident.Ref) []*v1.Pod
}

// Holds is what the accounting reads of the gang lifecycle (gang.Lifecycle).
type Holds interface {
	IsPlaced(ref ident.Ref, uid types.UID) bool
	HeldByGang() map[ident.Ref]resources.List
	Stalled() []ident.Ref
}

// Ports are what the accounting takes from the process.
type Ports struct {
	Gangs Gangs
	Holds Holds
	// Demand is what a pod asks its queue for (gang.Manager.Demand).
	Demand func(pod *v1.Pod) resources.List
	// Order is the queue sort's key of a pod, ordered by these queues.
	Order func(pod *v1.Pod, q *Queues) ident.Order
	// OrderChanged drops the queue sort's cached keys (a queue resolution moved).
	OrderChanged func()
	// WakeLead sends a gang back to the queue through one member.
	WakeLead func(reason string, ref ident.Ref)
	// Activate moves pods back to the scheduling queue, past any backoff.
	Activate func(reason string, pods map[string]*v1.Pod)

	Namespaces corelisters.NamespaceLister
	Pods       corelisters.PodLister
	Queues     phalanxlisters.QueueLister
	// Client creates the default queue.
	Client phalanxclientset.Interface
	// Slices counts devices in the cluster total; nil without DRA.
	Slices *devices.NodeSlices
	Node   func(name string) (*v1.Node, error)
	Clock  clock.WithDelayedExecution
}

// Queues is the queue accounting of the process.
type Queues struct {
	ports Ports
	opts  Options
	cache *queue.Cache
	// feed turns nodes, slices, queues and pods into cache's accounting.
	feed *queue.Feed

	mu              sync.Mutex
	ordering        *queue.Snapshot
	orderingAt      time.Time
	orderingVersion uint64
	metricsAt       time.Time
	// blocked: gangs and plain pods refused admission; woken when queues or
	// capacity change.
	blocked    map[ident.Ref]bool
	blockedPod map[string]*v1.Pod
	// wakePending: a wake of the refused is scheduled (Block).
	wakePending bool
	// gone: deleted queues whose metric series are still to be removed.
	gone []string
	// left is closed when a pod's charge is given back, if AwaitLeft waits.
	left chan struct{}
}

// New returns the accounting; its handlers are to be registered on the
// informers (PodHandler, NodeHandler, QueueHandler, NamespaceHandler and,
// with DRA, the device handlers).
func New(ports Ports, opts Options) *Queues {
	q := &Queues{
		ports: ports, opts: opts, cache: queue.NewCache(),
		blocked:    map[ident.Ref]bool{},
		blockedPod: map[string]*v1.Pod{},
	}
	q.cache.DecayUsage(opts.UsageHalfLife, ports.Clock)
	q.feed = queue.NewFeed(q.cache, ports.Slices, ports.Node)
	return q
}

// Options returns the args the queues were built with.
func (q *Queues) Options() Options { return q.opts }

// Run does the background work until ctx ends: with decayed fair share,
// the gangs refused admission are retried as usage decays.
func (q *Queues) Run(ctx context.Context) {
	if q.opts.UsageHalfLife > 0 {
		go q.wakeAsUsageDecays(ctx)
	}
}

// wakeAsUsageDecays retries the gangs refused admission every sixteenth
// of the half-life (at least decayWakeMin): with decayed fair share, shares
// move as recent usage decays, with no event to say so.
func (q *Queues) wakeAsUsageDecays(ctx context.Context) {
	every := max(decayWakeMin, q.opts.UsageHalfLife/16)
	for {
		select {
		case <-ctx.Done():
			return
		case <-q.ports.Clock.After(every):
			q.wakeBlocked()
		}
	}
}

// decayWakeMin bounds how often wakeAsUsageDecays retries.
const decayWakeMin = 5 * time.Second

// EnsureDefaultQueue creates the queue of pods that name none, if missing.
func (q *Queues) EnsureDefaultQueue(ctx context.Context) {
	if _, err := q.ports.Queues.Get(q.opts.DefaultQueue); err == nil {
		return
	}
	obj := &phalanxv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: q.opts.DefaultQueue}}
	if _, err := q.ports.Client.SchedulingV1alpha1().Queues().Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
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
	if _, spec, ok, err := q.ports.Gangs.GangOf(pod); ok && err == nil {
		groupLabels = spec.Labels
	}
	if ns, err := q.ports.Namespaces.Get(pod.Namespace); err == nil {
		nsLabels = ns.Labels
	}
	return queue.Of(pod, groupLabels, nsLabels, q.opts.DefaultQueue)
}

// QueueOfGang returns the queue of a gang with the given member (nil: none
// at hand).
func (q *Queues) QueueOfGang(spec *gangspec.Spec, member *v1.Pod) string {
	var nsLabels map[string]string
	if ns, err := q.ports.Namespaces.Get(spec.Namespace); err == nil {
		nsLabels = ns.Labels
	}
	return queue.Of(member, spec.Labels, nsLabels, q.opts.DefaultQueue)
}

// Charge charges a pod to its queue as the informer sees it now.
func (q *Queues) Charge(pod *v1.Pod) {
	ref, isMember := q.ports.Gangs.RefOf(pod)
	reserved := isMember && q.ports.Holds.IsPlaced(ref, pod.UID)
	if q.feed.ChargePod(pod, q.QueueOf(pod), q.ports.Demand(pod), reserved) {
		q.gaveBack() // a finished pod gave its queue's share back
	}
}

// PodHandler keeps pods' charges current.
func (q *Queues) PodHandler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    q.onPod,
		UpdateFunc: func(_, newObj any) { q.onPod(newObj) },
		DeleteFunc: q.onPodDelete,
	}
}

func (q *Queues) onPod(obj any) {
	if pod, ok := obj.(*v1.Pod); ok {
		q.Charge(pod)
	}
}

func (q *Queues) onPodDelete(obj any) {
	if pod, ok := deleted(obj).(*v1.Pod); ok {
		if q.feed.DeletePod(pod.UID) {
			q.gaveBack()
		}
		// A gang whose last member is gone waits for nothing (the informer's
		// index no longer holds the deleted pod).
		ref, isMember := q.ports.Gangs.RefOf(pod)
		gone := isMember && len(q.ports.Gangs.Members(ref)) == 0
		q.mu.Lock()
		delete(q.blockedPod, pod.Namespace+"/"+pod.Name)
		if gone {
			delete(q.blocked, ref)
		}
		q.mu.Unlock()
	}
}

// Recharge resolves the queue of a namespace's pods again (its label
// changed), or of a gang's members when ref is set (its group's label).
func (q *Queues) Recharge(namespace string, ref *ident.Ref) {
	q.ports.OrderChanged()
	var pods []*v1.Pod
	if ref != nil {
		pods = q.ports.Gangs.Members(*ref)
	} else if list, err := q.ports.Pods.Pods(namespace).List(labels.Everything()); err == nil {
		pods = list
	}
	for _, p := range pods {
		q.Charge(p)
	}
}

// NamespaceHandler recharges a namespace's pods when its queue label changes.
func (q *Queues) NamespaceHandler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*v1.Namespace)
			n, ok2 := newObj.(*v1.Namespace)
			if ok1 && ok2 && o.Labels[queue.Label] != n.Labels[queue.Label] {
				q.Recharge(n.Name, nil)
			}
		},
	}
}

// NodeHandler keeps the cluster total current.
func (q *Queues) NodeHandler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    q.onNode,
		UpdateFunc: func(_, newObj any) { q.onNode(newObj) },
		DeleteFunc: q.onNodeDelete,
	}
}

func (q *Queues) onNode(obj any) {
	if n, ok := obj.(*v1.Node); ok {
		q.feed.SetNode(n)
	}
}

func (q *Queues) onNodeDelete(obj any) {
	if n, ok := deleted(obj).(*v1.Node); ok {
		q.feed.DeleteNode(n.Name)
	}
}

// QueueHandler keeps the queues' definitions current; a change wakes what
// waits refused admission.
func (q *Queues) QueueHandler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    q.onQueue,
		UpdateFunc: func(_, obj any) { q.onQueue(obj) },
		DeleteFunc: q.onQueueDelete,
	}
}

func (q *Queues) onQueue(obj any) {
	if o, ok := obj.(*phalanxv1alpha1.Queue); ok {
		q.feed.SetQueue(o)
		q.wakeBlocked()
	}
}

func (q *Queues) onQueueDelete(obj any) {
	if o, ok := deleted(obj).(*phalanxv1alpha1.Queue); ok {
		q.feed.DeleteQueue(o.Name)
		q.mu.Lock()
		q.gone = append(q.gone, o.Name)
		q.mu.Unlock()
		q.wakeBlocked()
	}
}

// Reserved charges a pod to its queue as placed, before it is bound.
func (q *Queues) Reserved(pod *v1.Pod) {
	q.cache.MarkPlaced(pod.UID, true, queue.Charge{Queue: q.QueueOf(pod), Request: q.ports.Demand(pod)})
}

// Unreserved gives the charge back.
func (q *Queues) Unreserved(pod *v1.Pod) { q.cache.MarkPlaced(pod.UID, false) }

// deleted is the object of a delete event, whether the informer saw it go
// or only learned it was gone (a tombstone).
func deleted(obj any) any {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return tomb.Obj
	}
	return obj
}
