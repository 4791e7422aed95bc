package plane

import (
	"context"
	"strings"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/global"
)

// QueuePositionsResource is phalanx's QueuePositions, which the tier writes
// on the Karmada plane for the bindings that wait there. Its CRD
// (manifests/crds/scheduling.phalanx.dev_queuepositions.yaml) is applied on
// the plane with the Queue CRD; the tier runs without it, writing none.
var QueuePositionsResource = phalanxv1alpha1.SchemeGroupVersion.WithResource("queuepositions")

// BindingKind is GangPosition.Kind of a binding waiting on the plane.
const BindingKind = "ResourceBinding"

const (
	// positionsRefresh: the plane's objects are listed again at least this
	// often, so one deleted or changed by someone else is written again.
	positionsRefresh = time.Minute
	// positionsRetry: an unserved QueuePositions is looked for again after
	// this long (the CRD may be applied later).
	positionsRetry = 5 * time.Minute
)

// positionsOf places every job still waiting after a pass, in the pass's
// order (the verdicts' order), per namespace: at most MaxGangPositions
// entries each, the rest counted. It depends only on the verdicts, so an
// unchanged plane writes nothing.
func positionsOf(verdicts []global.Verdict) map[string]*phalanxv1alpha1.QueuePositions {
	var waiting []*global.Verdict
	queueLen := map[string]int32{}
	for i := range verdicts {
		if v := &verdicts[i]; v.Member == "" && !v.Move {
			waiting = append(waiting, v)
			queueLen[v.Job.Queue]++
		}
	}
	out := map[string]*phalanxv1alpha1.QueuePositions{}
	last := map[string]*global.Job{}
	for _, v := range waiting {
		j := v.Job
		ns, name := bindingKey(j)
		qp := out[ns]
		if qp == nil {
			qp = &phalanxv1alpha1.QueuePositions{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: phalanxv1alpha1.QueuePositionsName},
				ClusterPendingGangs: int32(len(waiting))}
			out[ns] = qp
		}
		qp.PendingGangs++
		prev := last[j.Queue]
		last[j.Queue] = j
		if len(qp.Gangs) >= phalanxv1alpha1.MaxGangPositions {
			continue
		}
		pos := phalanxv1alpha1.GangPosition{
			Name: name, Kind: BindingKind, Queue: j.Queue, Priority: j.Priority,
			Submitted:         metav1.NewTime(j.Created.UTC().Truncate(time.Second)),
			PositionInQueue:   int32(v.Position),
			QueueLength:       queueLen[j.Queue],
			PositionInCluster: int32(v.ClusterPosition),
		}
		if prev != nil {
			ahead := &phalanxv1alpha1.GangAhead{Reason: aheadReason(prev, j)}
			if prevNS, prevName := bindingKey(prev); prevNS == ns {
				ahead.Name = prevName
			}
			pos.Ahead = ahead
		}
		qp.Gangs = append(qp.Gangs, pos)
	}
	return out
}

// aheadReason says why first goes before second in their queue, in the
// words phalanx-controller uses for gangs: the tier orders one queue's jobs
// by priority, then submission, then the binding's key.
func aheadReason(first, second *global.Job) string {
	d := ident.ByName
	switch {
	case first.Priority != second.Priority:
		d = ident.ByPriority
	case !first.Created.Equal(second.Created):
		d = ident.ByCreated
	}
	order := func(j *global.Job) ident.Order {
		return ident.Order{Queue: j.Queue, Priority: j.Priority, Created: j.Created}
	}
	return ident.Why(order(first), order(second), d)
}

// bindingKey splits Job.Key into the binding's namespace and name.
func bindingKey(j *global.Job) (string, string) {
	ns, name, ok := strings.Cut(j.Key, "/")
	if !ok {
		return j.Namespace, j.Key
	}
	return ns, name
}

// positionsWriter makes each namespace's QueuePositions object on the plane
// what a pass says. It remembers what the plane holds (listed at first, then
// every positionsRefresh and after a failed write), so a pass that changes
// no position makes no request.
type positionsWriter struct {
	client   dynamic.Interface
	resource schema.GroupVersionResource
	clock    clock.PassiveClock

	have     map[string]*unstructured.Unstructured
	listedAt time.Time
	// unserved: QueuePositions was not served at retryAt's look; logged
	// once.
	unserved bool
	retryAt  time.Time
}

// write applies want: created, replaced when it differs, deleted where no
// job waits. Errors are logged; the next pass writes again.
func (w *positionsWriter) write(ctx context.Context, want map[string]*phalanxv1alpha1.QueuePositions) {
	logger := klog.FromContext(ctx)
	now := w.clock.Now()
	if w.unserved && now.Before(w.retryAt) {
		return
	}
	if w.have == nil || now.Sub(w.listedAt) >= positionsRefresh {
		if !w.list(ctx) {
			return
		}
	}
	ri := w.client.Resource(w.resource)
	for ns, cur := range w.have {
		if _, ok := want[ns]; ok {
			continue
		}
		if err := ri.Namespace(ns).Delete(ctx, cur.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			logger.Error(err, "Deleting queue positions; retried on the next pass", "namespace", ns)
			w.have = nil
			return
		}
		delete(w.have, ns)
	}
	for ns, qp := range want {
		if err := w.put(ctx, qp); err != nil {
			logger.Error(err, "Writing queue positions; retried on the next pass", "namespace", ns)
			w.have = nil
			return
		}
	}
}

// list reads the plane's QueuePositions objects; false when they cannot be
// read (not served: logged once, looked for again after positionsRetry).
func (w *positionsWriter) list(ctx context.Context) bool {
	logger := klog.FromContext(ctx)
	list, err := w.client.Resource(w.resource).List(ctx, metav1.ListOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			if !w.unserved {
				logger.Info("The Karmada plane does not serve QueuePositions: positions of waiting bindings are not written; apply manifests/crds/scheduling.phalanx.dev_queuepositions.yaml on the plane to get them",
					"resource", w.resource.String())
			}
			w.unserved, w.retryAt = true, w.clock.Now().Add(positionsRetry)
			return false
		}
		logger.Error(err, "Listing queue positions; retried on the next pass")
		return false
	}
	if w.unserved {
		logger.Info("The Karmada plane serves QueuePositions now: writing positions")
	}
	w.unserved = false
	w.have = map[string]*unstructured.Unstructured{}
	for i := range list.Items {
		if u := &list.Items[i]; u.GetName() == phalanxv1alpha1.QueuePositionsName {
			w.have[u.GetNamespace()] = u
		}
	}
	w.listedAt = w.clock.Now()
	return true
}

// put creates or replaces one namespace's object, unless it holds qp
// already.
func (w *positionsWriter) put(ctx context.Context, qp *phalanxv1alpha1.QueuePositions) error {
	ri := w.client.Resource(w.resource).Namespace(qp.Namespace)
	cur := w.have[qp.Namespace]
	if cur != nil {
		var old phalanxv1alpha1.QueuePositions
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(cur.Object, &old); err == nil &&
			old.PendingGangs == qp.PendingGangs && old.ClusterPendingGangs == qp.ClusterPendingGangs && apiequality.Semantic.DeepEqual(old.Gangs, qp.Gangs) {
			return nil
		}
	}
	next := qp.DeepCopy()
	next.TypeMeta = metav1.TypeMeta{APIVersion: phalanxv1alpha1.SchemeGroupVersion.String(), Kind: "QueuePositions"}
	if cur != nil {
		next.ResourceVersion = cur.GetResourceVersion()
	}
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(next)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: raw}
	var got *unstructured.Unstructured
	if cur != nil {
		got, err = ri.Update(ctx, u, metav1.UpdateOptions{FieldManager: FieldManager})
	} else {
		got, err = ri.Create(ctx, u, metav1.CreateOptions{FieldManager: FieldManager})
	}
	if err != nil {
		if apierrors.IsNotFound(err) && cur == nil {
			// The namespace is being deleted.
			klog.FromContext(ctx).V(2).Info("Not writing queue positions", "namespace", qp.Namespace, "err", err)
			return nil
		}
		return err
	}
	w.have[qp.Namespace] = got
	return nil
}
