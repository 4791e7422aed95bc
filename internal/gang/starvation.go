package gang

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/phalanx-sched/phalanx/internal/gang/expected"
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
	// Room as running pods of equal or lower priority leave, by when each
	// is expected to, net of what every other gang holds (reservations do
	// not overlap).
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
	leavers, busy, held, heldPods, othersHold := m.leaversAndHolds(a, ask)
	roomAt := func(t time.Time, netOfHolds bool) ([]resources.List, []int64) {
		room, pods := make([]resources.List, n), make([]int64, n)
		for i, ns := range a.view.Nodes {
			room[i], pods[i] = starvation.RoomAt(ns.Free, ns.FreePods, leavers[i], t)
			a.leaveDevicesToAllocator(room[i])
			if netOfHolds {
				room[i].Sub(held[i])
				pods[i] -= heldPods[i]
			}
		}
		return room, pods
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
	// The nodes that give the earliest start, not those that free first.
	plan, readyBy := starvation.Earliest(starvation.Starts(leavers), func(t time.Time) *planner.Plan { return placeOn(roomAt(t, true)) })
	if plan == nil {
		if r, ok := m.ReservationOf(ref); ok && r.Kind == lifecycle.ReservationStarved {
			m.DropReservation(ref)
		}
		if othersHold && placeOn(roomAt(time.Time{}, false)) != nil {
			// Say so: it would fit once pods leave, but that room is
			// already promised to gangs ahead of it.
			return "nothing is reserved for it yet: the room it would wait for is held for gangs ahead of it", false
		}
		return "nothing is reserved: the gang does not fit the cluster even when pods of equal or lower priority leave", false
	}
	_, ask.Shapes = planner.Shapes(a.groups)
	ask.Plan, ask.ReadyBy = plan, readyBy
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
	return starvation.Note(r, a.view.Nodes, "gangs of equal or lower priority only backfill around it; "+
		starvation.ExpectedStart(readyBy, starvation.Overrunning(a.view.Nodes, leavers, plan))), true
}

// leaversAndHolds lists, per node of the attempt's view, the pods the gang
// may wait for with their expected ends (busy counts them), and what other
// gangs hold there that the reservation must leave alone.
func (m *Manager) leaversAndHolds(a *Attempt, ask lifecycle.ReservationRequest) (leavers [][]starvation.Leaver, busy []int64, held []resources.List, heldPods []int64, othersHold bool) {
	n, now := len(a.view.Nodes), m.Now()
	waiting := starvation.Waiting{Priority: a.Priority, PriorityOf: m.dir.PriorityOf, RuntimeOf: m.runtimeOf}
	leavers, busy = make([][]starvation.Leaver, n), make([]int64, n)
	held, heldPods = make([]resources.List, n), make([]int64, n)
	for i, ns := range a.view.Nodes {
		leavers[i] = waiting.Leaving(a.view.PodsOn(i), now)
		busy[i] = int64(len(leavers[i]))
		// A reservation of its queue behind it is no obstacle: Reserve
		// moves it to this gang.
		held[i], heldPods[i] = m.HeldAhead(ns.Node.Name, ask, a.Ref)
		othersHold = othersHold || !held[i].IsZero() || heldPods[i] > 0
	}
	return leavers, busy, held, heldPods, othersHold
}

// runtimeOf is a running pod's limit or estimate, its gang's annotation
// included.
func (m *Manager) runtimeOf(pod *v1.Pod) expected.Runtime {
	var group map[string]string
	if ref, ok := m.dir.RefOf(pod); ok {
		if spec, err := m.dir.Spec(ref); err == nil {
			group = spec.Annotations
		}
	}
	return expected.Of(pod, group)
}

// endsBy is expected.EndsBy for the attempt's pod and every pending shape of its
// gang: the latest, or zero if one has neither limit nor estimate.
func (m *Manager) endsBy(a *Attempt) time.Time {
	now := m.Now()
	end := expected.EndsBy(a.Pod, a.Spec.GroupAnnotations(), now)
	for _, g := range a.groups {
		e := expected.EndsBy(g.Rep, a.Spec.GroupAnnotations(), now)
		if e.IsZero() || end.IsZero() {
			return time.Time{}
		}
		if e.After(end) {
			end = e
		}
	}
	return end
}
