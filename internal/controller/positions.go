package controller

import (
	"context"
	"reflect"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/queue"
	"github.com/phalanx-sched/phalanx/internal/workload"
)

// Pending is one gang waiting to start, as positions are computed from it.
type Pending struct {
	ident.Order
	// Kind of its group object (GangPosition.Kind).
	Kind string
	// ExpectedStart is the scheduler's, from the group object (nil:
	// unknown).
	ExpectedStart *metav1.Time
}

// Positions places every pending gang: sorted by gang.Compare (the
// scheduler's queue sort) with byQueue, the queues' order now, and returned
// per namespace. Each object lists at most MaxGangPositions gangs and counts
// the rest. The result depends only on the gangs and the queues' order — no
// clock — so an unchanged cluster writes nothing.
func Positions(pending []Pending, byQueue func(a, b string) int) map[string]*phalanxv1alpha1.QueuePositions {
	sorted := append([]Pending(nil), pending...)
	sort.SliceStable(sorted, func(i, j int) bool {
		c, _ := ident.Compare(sorted[i].Order, sorted[j].Order, byQueue)
		return c < 0
	})
	queueLen := map[string]int32{}
	for _, p := range sorted {
		queueLen[p.Queue]++
	}
	out := map[string]*phalanxv1alpha1.QueuePositions{}
	inQueue := map[string]int32{}
	last := map[string]*Pending{}
	for i := range sorted {
		p := &sorted[i]
		inQueue[p.Queue]++
		qp := out[p.Namespace]
		if qp == nil {
			qp = &phalanxv1alpha1.QueuePositions{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: phalanxv1alpha1.QueuePositionsName}}
			qp.ClusterPendingGangs = int32(len(sorted))
			out[p.Namespace] = qp
		}
		qp.PendingGangs++
		prev := last[p.Queue]
		last[p.Queue] = p
		if len(qp.Gangs) >= phalanxv1alpha1.MaxGangPositions {
			continue
		}
		pos := phalanxv1alpha1.GangPosition{
			Name: p.Name, Kind: p.Kind, Queue: p.Queue, Priority: p.Priority,
			Submitted:         metav1.NewTime(p.Created.UTC().Truncate(time.Second)),
			PositionInQueue:   inQueue[p.Queue],
			QueueLength:       queueLen[p.Queue],
			PositionInCluster: int32(i + 1),
			ExpectedStart:     p.ExpectedStart,
		}
		if prev != nil {
			_, d := ident.Compare(prev.Order, p.Order, byQueue)
			ahead := &phalanxv1alpha1.GangAhead{Reason: ident.Why(prev.Order, p.Order, d)}
			if prev.Namespace == p.Namespace {
				ahead.Name = prev.Name
			}
			pos.Ahead = ahead
		}
		qp.Gangs = append(qp.Gangs, pos)
	}
	return out
}

// expectedStart reads the scheduler's expected-start annotation (nil when
// absent or unreadable).
func expectedStart(annotations map[string]string) *metav1.Time {
	raw, ok := annotations[phalanxv1alpha1.ExpectedStartAnnotation]
	if !ok {
		return nil
	}
	t, err := time.Parse(time.RFC3339, raw)
	if err != nil {
		return nil
	}
	return &metav1.Time{Time: t.UTC()}
}

// kindOf names a gang source as GangPosition.Kind does.
func kindOf(s ident.Source) string {
	switch s {
	case ident.SourceWorkload:
		return "Workload"
	case ident.SourceComposite:
		return "CompositePodGroup"
	}
	return "PodGroup"
}

// pendingGangs lists the gangs that have not started: fewer than minMember
// members bound or done. Priority is the group's own, else a member's (as
// the scheduler reads it, gangspec.Spec.PriorityOf); the queue is the one the
// scheduler charges (queue.Of with a member).
func (u *QueueStatusUpdater) pendingGangs(ctx context.Context, groups []pgv1alpha1.PodGroup) ([]Pending, error) {
	var out []Pending
	add := func(spec *gangspec.Spec, index, name string, groupLabels map[string]string) error {
		var pods v1.PodList
		if err := u.Cache.List(ctx, &pods, client.InNamespace(spec.Namespace), client.MatchingFields{index: name}); err != nil {
			return err
		}
		started, bound := 0, 0
		var member *v1.Pod
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.DeletionTimestamp != nil {
				continue
			}
			if p.Status.Phase == v1.PodSucceeded {
				started++
				continue
			}
			if p.Status.Phase == v1.PodFailed {
				continue
			}
			if p.Spec.NodeName != "" {
				started++
				bound++
			} else if member == nil || ident.CompareMembers(p, member) < 0 {
				member = p
			}
		}
		// Started, or nothing to schedule (no pod waits: the scheduler's
		// queue has none of it).
		if started+spec.Succeeded >= spec.MinMember || spec.Finished || member == nil {
			return nil
		}
		o := ident.Order{
			Queue:      queue.Of(member, groupLabels, u.namespaceLabels(ctx, spec.Namespace), u.DefaultQueue),
			Incomplete: bound > 0,
			Created:    spec.Created,
			Namespace:  spec.Namespace, Name: spec.Name, Source: spec.Source,
		}
		switch {
		case spec.Priority != nil:
			o.Priority = *spec.Priority
		case member != nil:
			o.Priority = corev1helpers.PodPriority(member)
		}
		out = append(out, Pending{Order: o, Kind: kindOf(spec.Source), ExpectedStart: expectedStart(spec.Annotations)})
		return nil
	}
	for i := range groups {
		pg := &groups[i]
		if pg.DeletionTimestamp != nil {
			continue
		}
		switch pg.Status.Phase {
		case pgv1alpha1.PodGroupRunning, pgv1alpha1.PodGroupFinished, pgv1alpha1.PodGroupFailed:
			continue
		}
		if err := add(gangspec.SpecFromPodGroup(pg), gangField, pg.Name, pg.Labels); err != nil {
			return nil, err
		}
	}
	if !u.upstream.Load() {
		return out, nil
	}
	var upstream schedulingv1beta1.PodGroupList
	if err := u.Cache.List(ctx, &upstream); err != nil {
		return nil, err
	}
	for i := range upstream.Items {
		pg := &upstream.Items[i]
		if pg.DeletionTimestamp != nil || workload.ParentOf(pg) != "" ||
			meta.IsStatusConditionTrue(pg.Status.Conditions, schedulingv1beta1.PodGroupInitiallyScheduled) {
			continue
		}
		wl := u.workloadOf(ctx, pg)
		spec, err := workload.SpecFromUpstream(pg, wl)
		if err != nil {
			continue
		}
		if err := add(spec, upstreamGangField, pg.Name, workload.UpstreamGroupLabels(pg, wl)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// workloadOf is the upstream PodGroup's Workload, nil when unknown.
func (u *QueueStatusUpdater) workloadOf(ctx context.Context, pg *schedulingv1beta1.PodGroup) *schedulingv1beta1.Workload {
	name := workload.WorkloadOf(pg)
	if name == "" || !u.workloads.Load() {
		return nil
	}
	wl := &schedulingv1beta1.Workload{}
	if err := u.Cache.Get(ctx, types.NamespacedName{Namespace: pg.Namespace, Name: name}, wl); err != nil {
		return nil
	}
	return wl
}

// syncPositions writes every namespace's positions, at most every
// PositionsInterval (a later sync is asked for when it skips).
func (u *QueueStatusUpdater) syncPositions(ctx context.Context, groups []pgv1alpha1.PodGroup, byQueue func(a, b string) int) error {
	interval := u.PositionsInterval
	if interval <= 0 {
		interval = 2 * time.Second
	}
	if wait := interval - time.Since(u.positionsAt); wait > 0 {
		time.AfterFunc(wait, u.poke)
		return nil
	}
	pending, err := u.pendingGangs(ctx, groups)
	if err != nil {
		return err
	}
	if err := u.writePositions(ctx, Positions(pending, byQueue)); err != nil {
		return err
	}
	u.positionsAt = time.Now()
	return nil
}

// writePositions makes each namespace's QueuePositions object what want
// says: created, replaced when it differs, deleted when the namespace has
// no pending gang. Only changed namespaces are written, so the writes per
// sync are bounded by the namespaces whose gangs moved, not by the gangs.
func (u *QueueStatusUpdater) writePositions(ctx context.Context, want map[string]*phalanxv1alpha1.QueuePositions) error {
	var have phalanxv1alpha1.QueuePositionsList
	if err := u.Cache.List(ctx, &have); err != nil {
		return err
	}
	logger := log.FromContext(ctx)
	for i := range have.Items {
		cur := &have.Items[i]
		if cur.Name != phalanxv1alpha1.QueuePositionsName {
			continue
		}
		w, ok := want[cur.Namespace]
		delete(want, cur.Namespace)
		if !ok {
			if err := u.Delete(ctx, cur); client.IgnoreNotFound(err) != nil {
				return err
			}
			continue
		}
		if cur.PendingGangs == w.PendingGangs && cur.ClusterPendingGangs == w.ClusterPendingGangs && samePositions(cur.Gangs, w.Gangs) {
			continue
		}
		next := cur.DeepCopy()
		next.PendingGangs, next.ClusterPendingGangs, next.Gangs = w.PendingGangs, w.ClusterPendingGangs, w.Gangs
		if err := u.Update(ctx, next); err != nil {
			return err
		}
	}
	for _, w := range want {
		if err := u.Create(ctx, w); err != nil && !apierrors.IsAlreadyExists(err) {
			if apierrors.IsNotFound(err) {
				// The namespace is being deleted.
				logger.V(2).Info("Not writing queue positions", "namespace", w.Namespace, "err", err)
				continue
			}
			return err
		}
	}
	return nil
}

// samePositions compares two lists as the API server stores them (times
// at a second's precision).
func samePositions(a, b []phalanxv1alpha1.GangPosition) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if !x.Submitted.Time.Equal(y.Submitted.Time) {
			return false
		}
		x.Submitted, y.Submitted = metav1.Time{}, metav1.Time{}
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}
