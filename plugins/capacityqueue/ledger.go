package capacityqueue

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

// charge is one pod's request, counted against a queue.
type charge struct {
	queue string
	req   resources.List
	// placed: bound, or reserved by this scheduler; else pending (demand).
	placed bool
	gang   string
}

// ledger counts, per queue, what pods use (placed) and ask for (pending). It
// is updated incrementally from pod events and from Reserve/Unreserve, so
// reading the totals costs O(queues), not O(pods).
type ledger struct {
	mu      sync.Mutex
	pods    map[types.UID]charge
	placed  map[string]resources.List
	pending map[string]resources.List
}

func newLedger() *ledger {
	return &ledger{pods: map[types.UID]charge{}, placed: map[string]resources.List{}, pending: map[string]resources.List{}}
}

func (l *ledger) account(c charge, sign int64) {
	into := l.pending
	if c.placed {
		into = l.placed
	}
	if into[c.queue] == nil {
		into[c.queue] = resources.List{}
	}
	into[c.queue].AddScaled(c.req, sign)
}

// set records a pod's charge, replacing any earlier one.
func (l *ledger) set(uid types.UID, c charge) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if old, ok := l.pods[uid]; ok {
		l.account(old, -1)
	}
	l.pods[uid] = c
	l.account(c, 1)
}

// remove forgets a pod.
func (l *ledger) remove(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if old, ok := l.pods[uid]; ok {
		l.account(old, -1)
		delete(l.pods, uid)
	}
}

// markPlaced flips a pending pod to placed (Reserve) or back (Unreserve).
func (l *ledger) markPlaced(uid types.UID, placed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c, ok := l.pods[uid]; ok && c.placed != placed {
		l.account(c, -1)
		c.placed = placed
		l.pods[uid] = c
		l.account(c, 1)
	}
}

// totals returns copies of the per-queue placed and pending requests.
func (l *ledger) totals() (placed, pending map[string]resources.List) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return cloneAll(l.placed), cloneAll(l.pending)
}

func cloneAll(m map[string]resources.List) map[string]resources.List {
	out := make(map[string]resources.List, len(m))
	for k, v := range m {
		out[k] = v.Clone()
	}
	return out
}

// gangUsage returns, per gang with placed members, its queue and placed
// usage: the reclaim candidates. O(pods); used only when reclaiming.
func (l *ledger) gangUsage() map[string]charge {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]charge{}
	for _, c := range l.pods {
		if !c.placed || c.gang == "" {
			continue
		}
		g, ok := out[c.gang]
		if !ok {
			g = charge{queue: c.queue, req: resources.List{}, placed: true, gang: c.gang}
		}
		g.req.Add(c.req)
		out[c.gang] = g
	}
	return out
}

func terminal(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
}
