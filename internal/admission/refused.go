package admission

import (
	"maps"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/metrics"
	"github.com/phalanx-sched/phalanx/internal/queue"
	"github.com/phalanx-sched/phalanx/internal/requeue"
)

// Block remembers a gang (or a plain pod, when ref is zero) refused
// admission. A gang refused for the first time wakes the others that wait
// refused: queues whose work is all refused yield to the queue first in
// order (queue.Snapshot.Admit), so two queues whose gangs each exceed
// their share do not wait on each other.
func (q *Queues) Block(ref ident.Ref, pod *v1.Pod) {
	q.mu.Lock()
	newly := false
	if !ref.IsZero() {
		newly = !q.blocked[ref]
		q.blocked[ref] = true
	} else if len(q.blockedPod) < requeue.MaxTurnedAway {
		key := pod.Namespace + "/" + pod.Name
		newly = q.blockedPod[key] == nil
		q.blockedPod[key] = pod
	}
	q.mu.Unlock()
	if newly {
		q.wakeSoon()
	}
}

// wakeSoon wakes what waits for queue admission after blockedWakeDelay,
// once for a burst of calls.
func (q *Queues) wakeSoon() {
	q.mu.Lock()
	soon := !q.wakePending
	q.wakePending = true
	q.mu.Unlock()
	if soon {
		q.ports.Clock.AfterFunc(blockedWakeDelay, func() {
			go func() { // a fake clock calls back under its lock
				q.mu.Lock()
				q.wakePending = false
				q.mu.Unlock()
				q.wakeBlocked()
			}()
		})
	}
}

// blockedWakeDelay is how soon a new refusal, or a share given back,
// wakes the gangs refused before it.
const blockedWakeDelay = 500 * time.Millisecond

// Unblock forgets a gang (or a plain pod, when ref is zero) admitted since,
// or deleted.
func (q *Queues) Unblock(ref ident.Ref, pod *v1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !ref.IsZero() {
		delete(q.blocked, ref)
	} else if pod != nil {
		delete(q.blockedPod, pod.Namespace+"/"+pod.Name)
	}
}

// Blocked reports whether the gang waits for queue admission.
func (q *Queues) Blocked(ref ident.Ref) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.blocked[ref]
}

// refused copies what waits refused admission: the gangs, the plain pods.
func (q *Queues) refused() ([]ident.Ref, []*v1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Collect(maps.Keys(q.blocked)), slices.Collect(maps.Values(q.blockedPod))
}

// RefusedAhead is queue admission's view of the order for pod: whether the
// first work of queue other that waits refused admission goes before the pod's
// gang (gang.Compare on snap's queue order, as the queue sort orders them).
// It is read only when the pod's queue would go above its share.
func (q *Queues) RefusedAhead(pod *v1.Pod, snap *queue.Snapshot) func(other string) bool {
	var first map[string]ident.Order
	var mine ident.Order
	less := func(a, b ident.Order) bool { c, _ := ident.Compare(a, b, snap.Compare); return c < 0 }
	load := func() {
		mine = q.ports.Order(pod, q)
		refs, pods := q.refused()
		first = map[string]ident.Order{}
		consider := func(p *v1.Pod) {
			o := q.ports.Order(p, q)
			if cur, ok := first[o.Queue]; !ok || less(o, cur) {
				first[o.Queue] = o
			}
		}
		for _, ref := range refs {
			if pending := q.ports.Gangs.Pending(ref); len(pending) > 0 {
				consider(ident.Oldest(pending))
			}
		}
		for _, p := range pods {
			consider(p)
		}
	}
	return func(other string) bool {
		if first == nil {
			load()
		}
		o, ok := first[other]
		return ok && less(o, mine)
	}
}

// wakeBlocked wakes what waits for queue admission: each gang through one
// member (admission is the whole gang's; its plan wakes the rest), the
// plain pods themselves. Woken whole, every member of every refused gang
// was refused again in its own cycle each time a pod finished anywhere,
// and the gangs admitted waited behind them.
func (q *Queues) wakeBlocked() {
	q.mu.Lock()
	refs := slices.Collect(maps.Keys(q.blocked))
	pods := maps.Clone(q.blockedPod)
	q.mu.Unlock()
	ident.SortRefs(refs)
	for _, ref := range refs {
		q.ports.WakeLead(metrics.WokenQueueAdmission, ref)
	}
	q.ports.Activate(metrics.WokenQueueAdmission, pods)
}

// Sizes counts what the accounting keeps per gang and pod, for tests that
// check nothing outlives what it is kept for.
func (q *Queues) Sizes() map[string]int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return map[string]int{"blocked": len(q.blocked), "blockedPod": len(q.blockedPod)}
}
