package gang

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/phalanx-sched/phalanx/internal/gang/lifecycle"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
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
			return reservationNote(r, a.view, "preempted victims are leaving"), true
		case lifecycle.ReservationMoved:
			return reservationNote(r, a.view, "consolidation moved the gang here; its pods come back to it"), true
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
	for i, ns := range a.view.Nodes {
		f, pods, b := m.futureRoom(ns, a.view.PodsOn(i), a.Priority)
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
	ask.Plan, ask.ReadyBy = plan, m.readyBy(a, plan)
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
	return reservationNote(r, a.view, "gangs of equal or lower priority only backfill around it"), true
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

// readyBy is the latest the plan's room is free: when the last pod of equal
// or lower priority on its nodes reaches its activeDeadlineSeconds (zero
// when one has no limit).
func (m *Manager) readyBy(a *Attempt, plan *planner.Plan) time.Time {
	ready := m.Now()
	for i, ns := range a.view.Nodes {
		if _, used := plan.Slots[ns.Node.Name]; !used {
			continue
		}
		for _, p := range a.view.PodsOn(i) {
			if p.DeletionTimestamp != nil || m.dir.PriorityOf(p) > a.Priority {
				continue
			}
			d := p.Spec.ActiveDeadlineSeconds
			if d == nil || *d <= 0 {
				return time.Time{}
			}
			if end := boundAt(p).Add(time.Duration(*d) * time.Second); end.After(ready) {
				ready = end
			}
		}
	}
	return ready
}

// futureRoom is a node's room for the gang once the pods it may wait for
// (equal or lower priority) leave; busy is how many pods hold that room now.
func (m *Manager) futureRoom(ns planner.NodeState, running []*v1.Pod, priority int32) (resources.List, int64, int64) {
	free, pods := ns.Free.Clone(), ns.FreePods
	busy := int64(0)
	for _, p := range running {
		if m.dir.PriorityOf(p) > priority {
			continue
		}
		free.Add(resources.PodRequests(p))
		pods++
		busy++
	}
	return free, pods, busy
}

// reservationNote says what a reserving gang holds and how much of it is
// still in use.
func reservationNote(r lifecycle.Reservation, view *View, tail string) string {
	members, waiting := 0, 0
	for node, byShape := range r.Slots {
		i, ok := view.index(node)
		for shape, n := range byShape {
			members += n
			if !ok {
				waiting += n
				continue
			}
			fit := view.Nodes[i].Free.Copies(r.Shapes[shape], int64(n))
			waiting += n - int(min(fit, view.Nodes[i].FreePods))
		}
	}
	return fmt.Sprintf("reserving %d nodes for %d members since %s; room for %d of them is still in use by running pods; %s",
		len(r.Slots), members, r.Since.UTC().Format(time.RFC3339), max(waiting, 0), tail)
}
