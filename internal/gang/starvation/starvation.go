// Package starvation sizes the reservation of a starved gang (one that
// failed to plan for the manager's ReserveAfter): the pods the gang may
// wait for and when each is expected to end, each node's room at a given
// time, the earliest time a plan exists (the reservation's expected
// start), and what the gang's condition says of what it holds. The manager
// plans on that room and makes the reservation.
package starvation

import (
	"fmt"
	"slices"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/gang/expected"
	"github.com/phalanx-sched/phalanx/internal/gang/lifecycle"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
	"github.com/phalanx-sched/phalanx/internal/gang/preempt"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Waiting is a starved gang of Priority looking at the nodes it may wait
// for: PriorityOf is the priority a running pod counts with, RuntimeOf how
// long it runs (its limit or estimate).
type Waiting struct {
	Priority   int32
	PriorityOf func(*v1.Pod) int32
	RuntimeOf  func(*v1.Pod) expected.Runtime
}

// Leaver is a running pod the gang may wait for: the room it gives back
// and when it is expected to end (zero: unknown).
type Leaver struct {
	Free resources.List
	End  time.Time
	// Overran: it runs past its soft estimate.
	Overran bool
}

// Leaving lists the pods of running the gang may wait for (equal or lower
// priority) with their expected ends at now; a pod being deleted ends now.
func (w Waiting) Leaving(running []*v1.Pod, now time.Time) []Leaver {
	var out []Leaver
	for _, p := range running {
		if w.PriorityOf(p) > w.Priority {
			continue
		}
		l := Leaver{Free: resources.PodRequests(p)}
		switch {
		case p.DeletionTimestamp != nil:
			l.End = now
		case w.RuntimeOf != nil:
			r, start := w.RuntimeOf(p), preempt.BoundAt(p)
			l.End, l.Overran = r.End(start, now), r.Overran(start, now)
		}
		out = append(out, l)
	}
	return out
}

// RoomAt is a node's room for the gang at t: free plus what the leavers
// expected to end by t give back; t zero: once every leaver has left.
func RoomAt(free resources.List, freePods int64, leavers []Leaver, t time.Time) (resources.List, int64) {
	room, pods := free.Clone(), freePods
	for _, l := range leavers {
		if !t.IsZero() && (l.End.IsZero() || l.End.After(t)) {
			continue
		}
		room.Add(l.Free)
		pods++
	}
	return room, pods
}

// Starts are the times the gang's room can grow: the distinct known ends
// of the leavers on every node, earliest first.
func Starts(leavers [][]Leaver) []time.Time {
	var out []time.Time
	for _, ls := range leavers {
		for _, l := range ls {
			if !l.End.IsZero() {
				// Whole seconds: fewer distinct starts to bisect.
				out = append(out, l.End.Add(time.Second-1).Truncate(time.Second))
			}
		}
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return slices.CompactFunc(out, func(a, b time.Time) bool { return a.Equal(b) })
}

// Earliest is the plan that starts the gang soonest, and when: planAt(t)
// plans on the room at t (RoomAt; t zero: once every leaver has left). It
// is nil when even that does not fit. Room only grows with t, so the first
// start that plans is found by bisection over starts: at most
// 1 + log2(len(starts)+1) plans. When no known end gives room enough, it
// is the plan once every leaver has left, at an unknown time (zero).
func Earliest(starts []time.Time, planAt func(time.Time) *planner.Plan) (*planner.Plan, time.Time) {
	last := planAt(time.Time{})
	if last == nil {
		return nil, time.Time{}
	}
	// sort.Search settles on the last index it found to plan: keep that plan.
	var found *planner.Plan
	k := sort.Search(len(starts), func(k int) bool {
		p := planAt(starts[k])
		if p != nil {
			found = p
		}
		return p != nil
	})
	if k < len(starts) {
		return found, starts[k]
	}
	return last, time.Time{}
}

// Overrunning counts the leavers on the plan's nodes that run past their
// soft estimates: what a slipped expected start waits for.
func Overrunning(nodes []planner.NodeState, leavers [][]Leaver, plan *planner.Plan) int {
	n := 0
	for i, ns := range nodes {
		if _, used := plan.Slots[ns.Node.Name]; !used {
			continue
		}
		for _, l := range leavers[i] {
			if l.Overran {
				n++
			}
		}
	}
	return n
}

// ExpectedStart says when a reserving gang is expected to start: at
// readyBy, by the limits and estimates of the pods it waits for (zero:
// unknown, one of them has neither); overran of them run past their
// estimates, so the start slipped.
func ExpectedStart(readyBy time.Time, overran int) string {
	if readyBy.IsZero() {
		return "expected start unknown: pods it waits for have no activeDeadlineSeconds or " + phalanxv1alpha1.ExpectedRuntimeAnnotation
	}
	msg := "expected to start by " + readyBy.UTC().Format(time.RFC3339)
	if overran > 0 {
		msg += fmt.Sprintf(" (slipped: %d pods it waits for run past their expected runtime)", overran)
	}
	return msg
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
