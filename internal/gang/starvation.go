package gang

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/phalanx-sched/phalanx/internal/gang/lifecycle"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
	"github.com/phalanx-sched/phalanx/internal/gang/starvation"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// reserve gives a gang that has waited at least ReserveAfter a reservation:
// the nodes it would take once running pods of equal or lower priority leave
// are held against gangs of equal or lower priority, which only backfill
// what the reservation does not need. One gang per queue holds one, the
// first in the queue's order; reservations never overlap, and none is made
// for a gang that cannot fit the cluster at all. It returns what the gang's
// condition should say, and whether the gang holds a reservation.
func (m *Manager) reserve(ctx context.Context, a *Attempt) (string, bool) {
	ref, spec := a.Ref, a.Spec
	if r, ok := m.ReservationOf(ref); ok {
		switch r.Kind {
		case lifecycle.ReservationPreempting:
			return starvation.Note(r, a.view.Nodes, "preempted victims are leaving"), true
		case lifecycle.ReservationMoved:
			return starvation.Note(r, a.view.Nodes, "consolidation moved the gang here; its pods come back to it"), true
		}
	}
	since := m.WaitingSince(ref)
	if since.IsZero() || m.Now().Sub(since) < m.ReserveAfter {
		if _, ok := m.ReservationOf(ref); ok {
			m.DropReservation(ref)
		}
		return "", false
	}
	// Room once running pods of equal or lower priority leave, net of what
	// every other gang holds (reservations do not overlap).
	n := len(a.view.Nodes)
	if a.devices != nil {
		// Devices of the pods it may wait for count as free.
		var leaving []*v1.Pod
		for i := range a.view.Nodes {
			for _, p := range a.view.PodsOn(i) {
				if m.dir.PriorityOf(p) <= a.Priority {
					leaving = append(leaving, p)
				}
			}
		}
		defer a.devices.Without(leaving)()
	}
	queueName := ""
	if a.Queue != nil {
		queueName = a.Queue.Queue
	}
	ask := lifecycle.ReservationRequest{Kind: lifecycle.ReservationStarved, Queue: queueName, Priority: a.Priority, Created: spec.Created}
	future, futurePods, busy := make([]resources.List, n), make([]int64, n), make([]int64, n)
	unheld, unheldPods := make([]resources.List, n), make([]int64, n)
	othersHold := false
	waiting := starvation.Waiting{Priority: a.Priority, PriorityOf: m.dir.PriorityOf}
	for i, ns := range a.view.Nodes {
		f, pods, b := waiting.FutureRoom(ns, a.view.PodsOn(i))
		a.leaveDevicesToAllocator(f)
		unheld[i], unheldPods[i] = f.Clone(), pods
		// A reservation of its queue behind it is no obstacle: Reserve
		// moves it to this gang.
		held, heldPods := m.HeldAhead(ns.Node.Name, ask, ref)
		othersHold = othersHold || !held.IsZero() || heldPods > 0
		f.Sub(held)
		future[i], futurePods[i], busy[i] = f, pods-heldPods, b
	}
	placeOn := func(room []resources.List, pods []int64) *planner.Plan {
		req, _ := m.request(a, func(i int) (resources.List, int64) { return room[i], pods[i] }, true)
		for i := range req.Nodes {
			if j, ok := a.view.index(req.Nodes[i].Name); ok {
				req.Nodes[i].Busy = busy[j]
			}
		}
		plan, _ := m.place(a, req)
		return plan
	}
	plan := placeOn(future, futurePods)
	if plan == nil {
		if r, ok := m.ReservationOf(ref); ok && r.Kind == lifecycle.ReservationStarved {
			m.DropReservation(ref)
		}
		if othersHold && placeOn(unheld, unheldPods) != nil {
			// Say so: it would fit once pods leave, but that room is
			// already promised to gangs ahead of it.
			return "nothing is reserved for it yet: the room it would wait for is held for gangs ahead of it", false
		}
		return "nothing is reserved: the gang does not fit the cluster even when pods of equal or lower priority leave", false
	}
	_, ask.Shapes = planner.Shapes(a.groups)
	ask.Plan, ask.ReadyBy = plan, waiting.ReadyBy(a.view.Nodes, a.view.PodsOn, plan, m.Now())
	granted, displaced := m.Reserve(ref, ask)
	if !displaced.IsZero() {
		klog.FromContext(ctx).V(2).Info("Reservation moved to a gang ahead in the queue", "from", displaced, "to", ref)
		m.fx.WakeOne(displaced, WakeDisplaced)
	}
	if !granted {
		return fmt.Sprintf("waiting behind another gang of queue %q that holds the queue's reservation", queueName), false
	}
	r, _ := m.ReservationOf(ref)
	m.fx.Observe("reserved", 0)
	return starvation.Note(r, a.view.Nodes, "gangs of equal or lower priority only backfill around it"), true
}

// EndsBy is when a pod is sure to be gone if it starts now: its
// activeDeadlineSeconds from now (zero: no limit).
func EndsBy(pod *v1.Pod, now time.Time) time.Time {
	if d := pod.Spec.ActiveDeadlineSeconds; d != nil && *d > 0 {
		return now.Add(time.Duration(*d) * time.Second)
	}
	return time.Time{}
}

// endsBy is EndsBy for the attempt's pod and every pending shape of its
// gang: the latest, or zero if one has no limit.
func (m *Manager) endsBy(a *Attempt) time.Time {
	now := m.Now()
	end := EndsBy(a.Pod, now)
	for _, g := range a.groups {
		e := EndsBy(g.Rep, now)
		if e.IsZero() || end.IsZero() {
			return time.Time{}
		}
		if e.After(end) {
			end = e
		}
	}
	return end
}
