package queue

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/phalanx-sched/phalanx/internal/queue/tree"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Charge is one pod as queue accounting sees it.
type Charge struct {
	Queue   string
	Request resources.List
	// Placed: bound, or reserved by the scheduler; else pending (demand).
	Placed bool
	// Node is the node the pod is bound to ("" while it is not).
	Node string
}

// ChargeOf is the charge of a pod in queue q asking for request (its
// demand, DRA devices included). Terminal and terminating pods are not
// charged (ok is false): they give their resources back.
func ChargeOf(pod *v1.Pod, q string, request resources.List, reserved bool) (Charge, bool) {
	if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed || pod.DeletionTimestamp != nil {
		return Charge{}, false
	}
	return Charge{Queue: q, Request: request, Placed: pod.Spec.NodeName != "" || reserved, Node: pod.Spec.NodeName}, true
}

// Cache is the queue accounting of one process: the queues, the schedulable
// cluster total and every pod's charge, updated incrementally from informer
// events. The scheduler and the controller both keep one, fed the same way,
// so Queue.status shows the numbers the scheduler decides on. Snapshot reads
// it in O(queues).
type Cache struct {
	mu     sync.Mutex
	queues map[string]Queue
	tree   *tree.Tree
	errs   []tree.QueueError
	stale  bool

	nodes map[string]resources.List
	total resources.List

	pods map[types.UID]Charge
	// reserved: pods the scheduler reserved (MarkPlaced), which stay placed
	// whatever a lagging informer event says until they are unreserved or
	// deleted.
	reserved map[types.UID]bool
	placed   map[string]resources.List
	pending  map[string]resources.List
	// version counts changes; a snapshot of the same version is reused.
	version uint64
	// recent is each queue's decayed recent usage (nil: decayed fair share
	// is off).
	recent *recentUsage
}

// NewCache returns an empty cache.
func NewCache() *Cache {
	return &Cache{
		queues: map[string]Queue{}, stale: true,
		nodes: map[string]resources.List{}, total: resources.List{},
		pods: map[types.UID]Charge{}, reserved: map[types.UID]bool{}, placed: map[string]resources.List{}, pending: map[string]resources.List{},
	}
}

// DecayUsage turns decayed fair share on: each leaf queue's allocation is
// averaged over time with weights that halve every halfLife, and the
// average lowers the queue's order and its part of the room above
// guarantees (Snapshot.Recent). Call it before the cache is fed; a
// halfLife of 0 leaves it off.
func (c *Cache) DecayUsage(halfLife time.Duration, clk clock.PassiveClock) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if halfLife <= 0 {
		c.recent = nil
		return
	}
	c.recent = &recentUsage{halfLife: halfLife, clock: clk, queues: map[string]*decayed{}, seen: map[string]bool{}}
}

// SeedRecent sets queue q's recent usage when the cache knows none yet (a
// restart reads what the controller last wrote in Queue.status).
func (c *Cache) SeedRecent(q string, use resources.List) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.recent != nil && c.recent.seed(q, use, c.recent.clock.Now()) {
		c.version++
	}
}

// SetQueue adds or replaces a queue.
func (c *Cache) SetQueue(q Queue) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queues[q.Name] = q
	c.stale = true
	c.version++
}

// DeleteQueue removes a queue.
func (c *Cache) DeleteQueue(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.queues, name)
	c.stale = true
	c.version++
}

// SetNode records a node's allocatable; unschedulable nodes count for nothing.
func (c *Cache) SetNode(name string, allocatable resources.List, schedulable bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.nodes[name]; ok {
		c.total.Sub(old)
		delete(c.nodes, name)
	}
	if schedulable {
		c.nodes[name] = allocatable.Clone()
		c.total.Add(allocatable)
	}
	c.version++
}

// DeleteNode forgets a node.
func (c *Cache) DeleteNode(name string) { c.SetNode(name, nil, false) }

// SetPod records a pod's charge, replacing any earlier one.
func (c *Cache) SetPod(uid types.UID, ch Charge) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.pods[uid]; ok {
		c.account(old, -1)
	}
	if c.reserved[uid] {
		ch.Placed = true
	}
	c.pods[uid] = ch
	c.account(ch, 1)
	c.version++
}

// DeletePod forgets a pod; placed says it held capacity, which is free now.
func (c *Cache) DeletePod(uid types.UID) (placed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.reserved, uid)
	if old, ok := c.pods[uid]; ok {
		c.account(old, -1)
		delete(c.pods, uid)
		c.version++
		return old.Placed
	}
	return false
}

// MarkPlaced flips a pending pod to placed (the scheduler reserved it) or
// back (it was unreserved). A reserved pod the cache has no charge for yet
// (the informer's add event still on its way) is charged as ch, placed, so
// the queue counts it before the next admission.
func (c *Cache) MarkPlaced(uid types.UID, placed bool, ch ...Charge) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if placed {
		c.reserved[uid] = true
	} else {
		delete(c.reserved, uid)
	}
	old, ok := c.pods[uid]
	if !ok {
		if placed && len(ch) > 0 {
			add := ch[0]
			add.Placed = true
			c.pods[uid] = add
			c.account(add, 1)
			c.version++
		}
		return
	}
	if old.Placed != placed {
		c.account(old, -1)
		old.Placed = placed
		c.pods[uid] = old
		c.account(old, 1)
		c.version++
	}
}

// AnyBound calls lacks with each pod charged to one of queues as bound to a
// node until it returns true, and reports whether it did.
func (c *Cache) AnyBound(queues map[string]bool, lacks func(uid types.UID, node string) bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for uid, ch := range c.pods {
		if ch.Node != "" && queues[ch.Queue] && lacks(uid, ch.Node) {
			return true
		}
	}
	return false
}

func (c *Cache) account(ch Charge, sign int64) {
	into := c.pending
	if ch.Placed {
		into = c.placed
		if c.recent != nil {
			c.recent.advance(ch.Queue, c.placed[ch.Queue], c.recent.clock.Now())
		}
	}
	if into[ch.Queue] == nil {
		into[ch.Queue] = resources.List{}
	}
	into[ch.Queue].AddScaled(ch.Request, sign)
}

// Version changes whenever the cache does: a snapshot taken at the same
// version is still current.
func (c *Cache) Version() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

// Queues returns the names of the queues the cache knows (valid or not).
func (c *Cache) Queues() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.queues))
	for n := range c.queues {
		out = append(out, n)
	}
	return out
}

// Want is a request being decided: queue Queue asks for Need on top of what
// it has allocated.
type Want struct {
	Queue string
	Need  resources.List
}

// Snapshot returns the queue state for one decision. held charges capacity
// that plans hold (not yet assumed) to their queues; each want raises its
// queue's demand to at least its allocation plus the need, so deserved
// shares count the request being decided even if its pods are not all
// charged yet. The tree is rebuilt only when queues changed.
func (c *Cache) Snapshot(held map[string]resources.List, wants ...Want) *Snapshot {
	c.mu.Lock()
	if c.stale {
		qs := make([]Queue, 0, len(c.queues))
		for _, q := range c.queues {
			qs = append(qs, q)
		}
		c.tree, c.errs = Build(qs)
		c.stale = false
	}
	s := &Snapshot{
		Tree: c.tree, Problems: c.errs, Total: c.total.Clone(),
		Allocated: cloneAll(c.placed), Pending: cloneAll(c.pending), Version: c.version,
	}
	if c.recent != nil {
		s.Recent = c.recent.snapshot(c.placed)
	}
	c.mu.Unlock()
	for q, l := range held {
		if s.Allocated[q] == nil {
			s.Allocated[q] = resources.List{}
		}
		s.Allocated[q].Add(l)
	}
	demand := make(map[string]resources.List, len(s.Allocated)+len(s.Pending))
	for q, l := range s.Allocated {
		demand[q] = l.Clone()
	}
	for q, l := range s.Pending {
		if demand[q] == nil {
			demand[q] = resources.List{}
		}
		demand[q].Add(l)
	}
	for _, w := range wants {
		floor := s.Allocated[w.Queue].Clone()
		if floor == nil {
			floor = resources.List{}
		}
		floor.Add(w.Need)
		if demand[w.Queue] == nil {
			demand[w.Queue] = resources.List{}
		}
		for r, v := range floor {
			demand[w.Queue][r] = max(demand[w.Queue][r], v)
		}
	}
	s.Deserved = s.Tree.DeservedRecent(s.Total, demand, s.Recent)
	if s.Recent != nil {
		s.orderUse = orderUse(s.Allocated, s.Recent)
	}
	return s
}

func cloneAll(m map[string]resources.List) map[string]resources.List {
	out := make(map[string]resources.List, len(m))
	for k, v := range m {
		out[k] = v.Clone()
	}
	return out
}
