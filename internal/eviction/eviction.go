// Package eviction removes pods the scheduler evicts — always whole gangs —
// by deleting them, or, for a gang moved by consolidation whose pods name
// responders, by asking them to leave through EvictionRequests first.
package eviction

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/internal/gang"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
)

const (
	// Requester is spec.requester of the EvictionRequests phalanx
	// makes for a gang moved by consolidation.
	Requester = "scheduling.phalanx.dev/consolidation"
	// GroupLabel, on those requests, is the UID of the moved
	// gang's first pod: the requests of one move share it.
	GroupLabel = "scheduling.phalanx.dev/eviction-group"
	// DeadlineAnnotation, on those requests, is when the move's
	// pods still running are deleted (RFC 3339).
	DeadlineAnnotation = "scheduling.phalanx.dev/delete-after"
)

// Evictor deletes evicted pods and asks the pods of a gang moved by consolidation to leave
// through Kubernetes 1.37's EvictionRequest API (lifecycle.k8s.io/v1alpha1,
// alpha), so that the responder the pods name in spec.evictionResponders (a
// training operator) may checkpoint first. The API works pod by pod, and
// nothing in 1.37 completes a request by itself (its evictionrequest
// controller is not in kube-controller-manager yet), so phalanx bounds the
// wait: once one member has left, or after the grace, the rest are deleted,
// and the requests are removed once every pod is gone. What is pending lives
// in the requests themselves (label, deadline), so a new leader after a
// crash finishes what the last one started.
type Evictor struct {
	Client kubernetes.Interface
	Events events.EventRecorder
	// Pods reads the pods the requests name.
	Pods corelisters.PodLister
	// Served reports whether the API server serves a resource.
	Served func(groupVersion, resource string) (bool, error)
	Clock  clock.PassiveClock
	// Grace is consolidation's evictionGraceSeconds (0: no requests), read
	// at each eviction.
	Grace func() time.Duration

	mu sync.Mutex
	// outstanding: requests of phalanx's may exist (true at start, for a
	// previous leader's), so the sweep lists them.
	outstanding bool
}

// New returns an evictor that looks, at its first sweep, for requests a
// previous leader left.
func New(client kubernetes.Interface, recorder events.EventRecorder, pods corelisters.PodLister,
	served func(groupVersion, resource string) (bool, error), clk clock.PassiveClock, grace func() time.Duration) *Evictor {
	return &Evictor{Client: client, Events: recorder, Pods: pods, Served: served, Clock: clk, Grace: grace, outstanding: true}
}

// Evict deletes pods — always every pod of a whole gang — and says why on
// each. It deletes rather than evicts through the Eviction API: a
// PodDisruptionBudget refusing one member would leave a partial gang. A gang
// moved by consolidation whose pods name responders is first asked to leave
// through EvictionRequests, with a deadline (Sweep completes it).
func (e *Evictor) Evict(ctx context.Context, pods []*v1.Pod, reason, message string) {
	if e.request(ctx, pods, reason, message) {
		return
	}
	e.deletePods(ctx, pods, reason, message)
}

func (e *Evictor) deletePods(ctx context.Context, pods []*v1.Pod, reason, message string) {
	for _, p := range pods {
		e.Events.Eventf(p, nil, v1.EventTypeNormal, reason, "Evicting", "%s", message)
		uid := p.UID
		err := e.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			klog.FromContext(ctx).Error(err, "Evicting pod", "pod", klog.KObj(p), "reason", reason)
		}
	}
}

// request asks the pods of one moved gang to leave, and reports whether it
// did; if not, the caller deletes them. It asks only when every pod names a
// responder (nobody else answers a request in 1.37) and none is in an
// upstream PodGroup (which the API refuses), on a server that serves the API.
func (e *Evictor) request(ctx context.Context, pods []*v1.Pod, reason, message string) bool {
	if reason != gang.ReasonConsolidated || len(pods) == 0 {
		return false
	}
	for _, p := range pods {
		if len(p.Spec.EvictionResponders) == 0 || p.Spec.SchedulingGroup != nil {
			return false
		}
	}
	grace := e.Grace()
	if grace <= 0 {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	logger := klog.FromContext(ctx)
	if served, err := e.Served(lifecyclev1alpha1.SchemeGroupVersion.String(), "evictionrequests"); !served || err != nil {
		logger.V(2).Info("EvictionRequests are not served; deleting the moved gang's pods", "err", err)
		return false
	}
	group := string(ident.Oldest(pods).UID)
	deadline := e.Clock.Now().Add(grace).UTC().Truncate(time.Second)
	for _, p := range pods {
		req := &lifecyclev1alpha1.EvictionRequest{
			ObjectMeta: metav1.ObjectMeta{
				Name:        "phalanx-" + string(p.UID),
				Namespace:   p.Namespace,
				Labels:      map[string]string{GroupLabel: group},
				Annotations: map[string]string{DeadlineAnnotation: deadline.Format(time.RFC3339)},
				// Gone with its pod, should phalanx not be there to clean up.
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID}},
			},
			Spec: lifecyclev1alpha1.EvictionRequestSpec{
				Target:    lifecyclev1alpha1.EvictionRequestTarget{Pod: &lifecyclev1alpha1.EvictionRequestPodReference{Name: p.Name, UID: p.UID}},
				Requester: Requester,
				Intent:    lifecyclev1alpha1.EvictionRequestIntentEviction,
			},
		}
		_, err := e.Client.LifecycleV1alpha1().EvictionRequests(p.Namespace).Create(ctx, req, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			// Those made are removed by the sweep once their pods are gone.
			e.outstanding = true
			logger.Error(err, "Requesting an eviction; deleting the moved gang's pods", "pod", klog.KObj(p))
			return false
		}
	}
	e.outstanding = true
	for _, p := range pods {
		e.Events.Eventf(p, nil, v1.EventTypeNormal, reason, "Evicting",
			"%s; asked to leave through EvictionRequest phalanx-%s (its responders may checkpoint first), deleted at %s if still running",
			message, p.UID, deadline.Format(time.RFC3339))
	}
	return true
}

// Sweep deletes the pods of a move that one member has left, or whose
// deadline passed, and removes the requests of moves whose pods are all gone.
func (e *Evictor) Sweep(ctx context.Context) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.outstanding {
		return
	}
	logger := klog.FromContext(ctx)
	client := e.Client.LifecycleV1alpha1()
	list, err := client.EvictionRequests(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: GroupLabel})
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		// Not served, or not allowed (RBAC older than this binary): no
		// request could have been made.
		e.outstanding = false
		return
	}
	if err != nil {
		logger.V(2).Info("Listing phalanx's EvictionRequests; trying again at the next sweep", "err", err)
		return
	}
	e.outstanding = len(list.Items) > 0
	groups := map[string][]*lifecyclev1alpha1.EvictionRequest{}
	for i := range list.Items {
		r := &list.Items[i]
		groups[r.Labels[GroupLabel]] = append(groups[r.Labels[GroupLabel]], r)
	}
	now := e.Clock.Now()
	for _, reqs := range groups {
		var running []*v1.Pod
		left := false
		for _, r := range reqs {
			if p := e.target(r); p != nil {
				running = append(running, p)
			} else {
				left = true
			}
		}
		if len(running) == 0 {
			for _, r := range reqs {
				err := client.EvictionRequests(r.Namespace).Delete(ctx, r.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(r.UID)}})
				if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
					logger.Error(err, "Removing an EvictionRequest whose pod is gone", "evictionRequest", klog.KObj(r))
				}
			}
			continue
		}
		deadline, err := time.Parse(time.RFC3339, reqs[0].Annotations[DeadlineAnnotation])
		overdue := err != nil || !now.Before(deadline)
		if !left && !overdue {
			continue
		}
		why := fmt.Sprintf("%d of %d members left after the EvictionRequest", len(reqs)-len(running), len(reqs))
		if !left {
			why = "the EvictionRequest's grace ended with no member gone"
		}
		logger.Info("Deleting the rest of a moved gang", "pods", len(running), "why", why)
		e.deletePods(ctx, running, gang.ReasonConsolidated, "moved by consolidation: "+why+"; the rest of the gang is deleted")
	}
}

// target is the request's pod while it still runs as the one named (nil
// once it is gone, being deleted or finished).
func (e *Evictor) target(r *lifecyclev1alpha1.EvictionRequest) *v1.Pod {
	ref := r.Spec.Target.Pod
	if ref == nil {
		return nil
	}
	p, err := e.Pods.Pods(r.Namespace).Get(ref.Name)
	if err != nil || p.UID != ref.UID || p.DeletionTimestamp != nil || podutil.IsPodTerminal(p) {
		return nil
	}
	return p
}
