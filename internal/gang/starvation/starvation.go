// Package starvation sizes the reservation of a starved gang (one that
// failed to plan for the manager's ReserveAfter): each node's room once the
// pods the gang may wait for leave, the latest that room is sure to be free,
// and what the gang's condition says of what it holds. The manager plans on
// that room and makes the reservation.
package starvation

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/gang/lifecycle"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
	"github.com/phalanx-sched/phalanx/internal/gang/preempt"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Waiting is a starved gang of Priority looking at the nodes it may wait
// for: PriorityOf is the priority a running pod counts with.
type Waiting struct {
	Priority   int32
	PriorityOf func(*v1.Pod) int32
}

// FutureRoom is a node's room for the gang once the pods it may wait for
// (equal or lower priority) leave; busy is how many pods hold that room now.
func (w Waiting) FutureRoom(ns planner.NodeState, running []*v1.Pod) (free resources.List, pods, busy int64) {
	free, pods = ns.Free.Clone(), ns.FreePods
	for _, p := range running {
		if w.PriorityOf(p) > w.Priority {
			continue
		}
		free.Add(resources.PodRequests(p))
		pods++
		busy++
	}
	return free, pods, busy
}

// ReadyBy is the latest the plan's room is free: when the last pod of equal
// or lower priority on its nodes reaches its activeDeadlineSeconds (zero
// when one has no limit). podsOn(i) lists the pods on nodes[i].
func (w Waiting) ReadyBy(nodes []planner.NodeState, podsOn func(int) []*v1.Pod, plan *planner.Plan, now time.Time) time.Time {
	ready := now
	for i, ns := range nodes {
		if _, used := plan.Slots[ns.Node.Name]; !used {
			continue
		}
		for _, p := range podsOn(i) {
			if p.DeletionTimestamp != nil || w.PriorityOf(p) > w.Priority {
				continue
			}
			d := p.Spec.ActiveDeadlineSeconds
			if d == nil || *d <= 0 {
				return time.Time{}
			}
			if end := preempt.BoundAt(p).Add(time.Duration(*d) * time.Second); end.After(ready) {
				ready = end
			}
		}
	}
	return ready
}

// Note says what a reserving gang holds and how much of it is still in use
// on nodes (room of nodes not among them counts as in use); tail ends it.
func Note(r lifecycle.Reservation, nodes []planner.NodeState, tail string) string {
	index := make(map[string]int, len(nodes))
	for i, ns := range nodes {
		if _, seen := index[ns.Node.Name]; !seen {
			index[ns.Node.Name] = i
		}
	}
	members, waiting := 0, 0
	for node, byShape := range r.Slots {
		i, ok := index[node]
		for shape, n := range byShape {
			members += n
			if !ok {
				waiting += n
				continue
			}
			fit := nodes[i].Free.Copies(r.Shapes[shape], int64(n))
			waiting += n - int(min(fit, nodes[i].FreePods))
		}
	}
	return fmt.Sprintf("reserving %d nodes for %d members since %s; room for %d of them is still in use by running pods; %s",
		len(r.Slots), members, r.Since.UTC().Format(time.RFC3339), max(waiting, 0), tail)
}
