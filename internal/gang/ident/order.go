package ident

import (
	"cmp"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Order is what places a pending gang (or a pod outside gangs) in the
// scheduling queue. The scheduler's queue sort and the positions that
// phalanx-controller serves compare it with the same function, Compare.
type Order struct {
	// Queue is set when queues order the gangs (CapacityQueue enabled).
	Queue      string
	Incomplete bool
	Priority   int32
	Created    time.Time
	// Namespace, Name and Source name the gang, or the pod outside gangs.
	Namespace, Name string
	Source          Source
}

// Decider names the rule of Compare that decided between two gangs.
type Decider int

const (
	ByQueue Decider = iota
	ByIncomplete
	ByPriority
	ByCreated
	ByName
)

// Compare is the one order of pending gangs (and pods outside gangs): the
// scheduler's queue sort, queue admission between queues that both wait,
// starvation reservations and the positions phalanx-controller serves all
// compare with it. a goes before b (<0) or after (>0), by the first rule that
// tells them apart:
//
//  1. gangs that are planned or partly placed, whatever their queue (they hold
//     capacity they cannot use until complete: a gang whose plan holds its
//     nodes, or one left in the middle of its binds by a crash);
//  2. queue share, when queues is set: the queue furthest below its deserved
//     (or decayed) share first; queues returns 0 for queues of equal share;
//  3. higher priority;
//  4. earlier submission (the group object's creation time);
//  5. the stable tie-break: namespace, then name, then the kind of group
//     object, then queue name, each in byte order.
//
// Each gang's members are kept together, so they are scheduled back to back.
// It also says which rule decided.
//
// A planned gang passed its queue's turn when it was planned; behind
// the pods of queues further below their share it would hold its nodes
// until its plan timed out.
func Compare(a, b Order, queues func(a, b string) int) (int, Decider) {
	if a.Incomplete != b.Incomplete {
		if a.Incomplete {
			return -1, ByIncomplete
		}
		return 1, ByIncomplete
	}
	if queues != nil && a.Queue != b.Queue {
		if c := queues(a.Queue, b.Queue); c != 0 {
			return c, ByQueue
		}
	}
	switch {
	case a.Priority != b.Priority:
		if a.Priority > b.Priority {
			return -1, ByPriority
		}
		return 1, ByPriority
	case !a.Created.Equal(b.Created):
		if a.Created.Before(b.Created) {
			return -1, ByCreated
		}
		return 1, ByCreated
	case a.Namespace != b.Namespace:
		return cmpString(a.Namespace, b.Namespace), ByName
	case a.Name != b.Name:
		return cmpString(a.Name, b.Name), ByName
	case a.Source != b.Source:
		return cmpString(string(a.Source), string(b.Source)), ByName
	case a.Queue != b.Queue:
		return cmpString(a.Queue, b.Queue), ByName
	}
	return 0, ByName
}

func cmpString(a, b string) int {
	if a < b {
		return -1
	}
	return 1
}

// Why says in words why first goes before second, as decided by d.
func Why(first, second Order, d Decider) string {
	switch d {
	case ByQueue:
		return fmt.Sprintf("queue %s is further below its deserved share than queue %s", first.Queue, second.Queue)
	case ByIncomplete:
		return "it is planned or partly bound and holds capacity until it completes"
	case ByPriority:
		return fmt.Sprintf("higher priority (%d > %d)", first.Priority, second.Priority)
	case ByCreated:
		return fmt.Sprintf("submitted earlier (%s, %s before)", first.Created.UTC().Format(time.RFC3339), second.Created.Sub(first.Created).Round(time.Second))
	}
	if first.Queue != second.Queue {
		return fmt.Sprintf("queues %s and %s are equally far from their deserved shares; same priority and submission time, so names decide", first.Queue, second.Queue)
	}
	return "same priority and submission time, so names decide"
}

// Oldest is the member whose labels and priority stand for its gang where the
// group object does not say (queue, priority), and the one that leads it: the
// first by CompareMembers, so an informer's list order never decides. nil for
// none.
func Oldest(pods []*v1.Pod) *v1.Pod {
	var first *v1.Pod
	for _, p := range pods {
		if first == nil || CompareMembers(p, first) < 0 {
			first = p
		}
	}
	return first
}

// CompareMembers orders a gang's members: created earlier first, then by name.
func CompareMembers(a, b *v1.Pod) int {
	return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
}
