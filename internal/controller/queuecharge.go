package controller

// What the queue status updater charges: each pod to its queue (resolved as
// the scheduler resolves it), nodes and queues into the accounting feed.

import (
	"context"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/queue"
	"github.com/phalanx-sched/phalanx/internal/workload"
)

// queueOf resolves a pod's queue with queue.Of, as the scheduler does.
func (u *QueueStatusUpdater) queueOf(ctx context.Context, p *v1.Pod) string {
	var nsLabels map[string]string
	ns := &v1.Namespace{}
	if err := u.Cache.Get(ctx, types.NamespacedName{Name: p.Namespace}, ns); err == nil {
		nsLabels = ns.Labels
	}
	return queue.Of(p, u.groupLabels(ctx, p), nsLabels, u.DefaultQueue)
}

// groupLabels are the labels of the group object of a pod's gang, whatever
// its source (workload.GangOf), as the scheduler reads them: a
// scheduler-plugins PodGroup's labels, or an upstream PodGroup's queue label,
// else its Workload's (workload.UpstreamGroupLabels). nil for a pod in no
// gang, a group not (yet) in the cache, or an API that is not served.
func (u *QueueStatusUpdater) groupLabels(ctx context.Context, p *v1.Pod) map[string]string {
	ref, err := workload.GangOf(p)
	if err != nil {
		return nil
	}
	key := types.NamespacedName{Namespace: p.Namespace, Name: ref.Name}
	switch ref.Source {
	case workload.SourcePodGroupLabel, workload.SourceImplicit:
		pg := &pgv1alpha1.PodGroup{}
		if err := u.Cache.Get(ctx, key, pg); err == nil {
			return pg.Labels
		}
	case workload.SourceWorkloadAPI:
		if !u.upstream.Load() {
			return nil
		}
		pg := &schedulingv1beta1.PodGroup{}
		if err := u.Cache.Get(ctx, key, pg); err != nil {
			return nil
		}
		var wl *schedulingv1beta1.Workload
		if name := workload.WorkloadOf(pg); name != "" && u.workloads.Load() {
			w := &schedulingv1beta1.Workload{}
			if err := u.Cache.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: name}, w); err == nil {
				wl = w
			}
		}
		return workload.UpstreamGroupLabels(pg, wl)
	}
	return nil
}

// rechargeWorkload resolves again the queue of the pods of a Workload's
// upstream PodGroups (its queue label changed, or it came or went).
func (u *QueueStatusUpdater) rechargeWorkload(ctx context.Context, wl *schedulingv1beta1.Workload) {
	var groups schedulingv1beta1.PodGroupList
	if err := u.Cache.List(ctx, &groups, client.InNamespace(wl.Namespace)); err != nil {
		return
	}
	for i := range groups.Items {
		if pg := &groups.Items[i]; workload.WorkloadOf(pg) == wl.Name {
			u.recharge(ctx, client.InNamespace(pg.Namespace), client.MatchingFields{upstreamGangField: pg.Name})
		}
	}
}

func (u *QueueStatusUpdater) chargePod(ctx context.Context, obj any) {
	p, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	u.feed(ctx).ChargePod(p, u.queueOf(ctx, p), u.demand(p), false)
	u.poke()
}

func (u *QueueStatusUpdater) recharge(ctx context.Context, opts ...client.ListOption) {
	var pods v1.PodList
	if err := u.Cache.List(ctx, &pods, opts...); err != nil {
		return
	}
	for i := range pods.Items {
		u.chargePod(ctx, &pods.Items[i])
	}
}

// feed is the accounting feed the scheduler uses too (queue.Feed), over
// this updater's cache and slices.
func (u *QueueStatusUpdater) feed(ctx context.Context) *queue.Feed {
	return queue.NewFeed(u.acct, u.slices, func(name string) (*v1.Node, error) {
		n := &v1.Node{}
		return n, u.Cache.Get(ctx, types.NamespacedName{Name: name}, n)
	})
}

func (u *QueueStatusUpdater) setNode(obj any) {
	if n, ok := obj.(*v1.Node); ok {
		u.feed(context.Background()).SetNode(n)
		u.poke()
	}
}

func (u *QueueStatusUpdater) setQueue(obj any) {
	if q, ok := obj.(*phalanxv1alpha1.Queue); ok {
		u.feed(context.Background()).SetQueue(q)
		u.poke()
	}
}
