package controller

import (
	"context"
	"encoding/json"
	"reflect"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/queue"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// QueueStatusUpdater keeps Queue status: allocated and deserved resources,
// pending and running gangs, and a Valid condition that says why a queue the
// scheduler ignores (cycle, missing parent, guarantee above capability) is
// invalid. It recomputes the whole tree every Interval from the cache: shares
// depend on every queue at once, so per-object reconciles would not be cheaper.
type QueueStatusUpdater struct {
	client.Client
	DefaultQueue string
	Interval     time.Duration
	last         map[string]phalanxv1alpha1.QueueStatus
}

// Start runs until ctx ends (a controller-runtime Runnable).
func (u *QueueStatusUpdater) Start(ctx context.Context) error {
	u.last = map[string]phalanxv1alpha1.QueueStatus{}
	t := time.NewTicker(u.Interval)
	defer t.Stop()
	for {
		if err := u.sync(ctx); err != nil {
			log.FromContext(ctx).V(1).Info("Queue status", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// NeedLeaderElection: only the leader writes status.
func (u *QueueStatusUpdater) NeedLeaderElection() bool { return true }

func (u *QueueStatusUpdater) sync(ctx context.Context) error {
	var queues phalanxv1alpha1.QueueList
	if err := u.List(ctx, &queues); err != nil {
		return err
	}
	var nodes v1.NodeList
	if err := u.List(ctx, &nodes); err != nil {
		return err
	}
	var pods v1.PodList
	if err := u.List(ctx, &pods); err != nil {
		return err
	}
	var namespaces v1.NamespaceList
	if err := u.List(ctx, &namespaces); err != nil {
		return err
	}
	var groups pgv1alpha1.PodGroupList
	if err := u.List(ctx, &groups); err != nil {
		return err
	}
	nsLabels := map[string]map[string]string{}
	for _, ns := range namespaces.Items {
		nsLabels[ns.Name] = ns.Labels
	}
	pgLabels := map[string]map[string]string{}
	for _, pg := range groups.Items {
		pgLabels[pg.Namespace+"/"+pg.Name] = pg.Labels
	}

	qs := make([]queue.Queue, 0, len(queues.Items))
	for i := range queues.Items {
		qs = append(qs, queue.FromAPI(&queues.Items[i]))
	}
	tree, problems := queue.Build(qs)
	total := resources.List{}
	for _, n := range nodes.Items {
		if !n.Spec.Unschedulable {
			total.Add(resources.FromResourceList(n.Status.Allocatable))
		}
	}
	allocated, demand := map[string]resources.List{}, map[string]resources.List{}
	add := func(m map[string]resources.List, q string, l resources.List) {
		if m[q] == nil {
			m[q] = resources.List{}
		}
		m[q].Add(l)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed || p.DeletionTimestamp != nil {
			continue
		}
		var pgl map[string]string
		if g := p.Labels[pgv1alpha1.PodGroupLabel]; g != "" {
			pgl = pgLabels[p.Namespace+"/"+g]
		}
		q := queue.Resolve(p.Labels, pgl, nsLabels[p.Namespace], u.DefaultQueue)
		req := resources.PodRequests(p)
		if p.Spec.NodeName != "" {
			add(allocated, q, req)
		}
		add(demand, q, req)
	}
	deserved := tree.Deserved(total, demand)
	allocated = tree.Usage(allocated)

	running, pending := map[string]int32{}, map[string]int32{}
	for _, pg := range groups.Items {
		q := queue.Resolve(nil, pg.Labels, nsLabels[pg.Namespace], u.DefaultQueue)
		switch pg.Status.Phase {
		case pgv1alpha1.PodGroupRunning:
			running[q]++
		case pgv1alpha1.PodGroupPending, pgv1alpha1.PodGroupScheduling, "":
			pending[q]++
		}
	}
	invalid := map[string]string{}
	for _, p := range problems {
		if invalid[p.Queue] == "" {
			invalid[p.Queue] = p.Reason
		}
	}
	for i := range queues.Items {
		q := &queues.Items[i]
		st := phalanxv1alpha1.QueueStatus{
			Allocated:    toResourceList(allocated[q.Name]),
			Deserved:     toResourceList(deserved[q.Name]),
			PendingGangs: pending[q.Name],
			RunningGangs: running[q.Name],
			Conditions:   append([]metav1.Condition(nil), q.Status.Conditions...),
		}
		cond := metav1.Condition{Type: "Valid", Status: metav1.ConditionTrue, Reason: "Valid", Message: "the scheduler uses this queue", ObservedGeneration: q.Generation}
		if reason, bad := invalid[q.Name]; bad {
			cond = metav1.Condition{Type: "Valid", Status: metav1.ConditionFalse, Reason: "Invalid", Message: reason + "; the scheduler ignores this queue", ObservedGeneration: q.Generation}
		}
		meta.SetStatusCondition(&st.Conditions, cond)
		if prev, ok := u.last[q.Name]; ok && reflect.DeepEqual(prev, st) {
			continue
		}
		body, err := json.Marshal(map[string]any{"status": st})
		if err != nil {
			return err
		}
		if err := u.Status().Patch(ctx, q, client.RawPatch(types.MergePatchType, body)); err != nil {
			return err
		}
		u.last[q.Name] = st
	}
	return nil
}

func toResourceList(l resources.List) v1.ResourceList {
	out := v1.ResourceList{}
	for r, v := range l {
		if v == 0 {
			continue
		}
		if r == v1.ResourceCPU {
			out[r] = *resourceMilli(v)
		} else {
			out[r] = *resourceInt(v)
		}
	}
	return out
}

func resourceMilli(v int64) *apiresource.Quantity {
	return apiresource.NewMilliQuantity(v, apiresource.DecimalSI)
}

func resourceInt(v int64) *apiresource.Quantity {
	return apiresource.NewQuantity(v, apiresource.BinarySI)
}
