package gang

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Manager tracks every gang's plan, its reserved members and the capacity the
// plan holds on each node against other pods. It is safe for concurrent use:
// scheduling, Permit and binding goroutines all reach it.
type Manager struct {
	mu    sync.RWMutex
	now   func() time.Time
	gangs map[string]*gangState
	// holds indexes open slots by node so Filter stays O(gangs on that node).
	holds map[string]map[string]*gangState
	// version counts capacity changes; plan failures are cached per version.
	version    uint64
	generation uint64
}

type gangState struct {
	// shapes maps a shape key to its per-member request.
	shapes     map[string]resources.List
	open       map[string]map[string]int // node -> shape -> slots not yet reserved
	expires    time.Time
	planned    bool
	generation uint64

	members   map[types.UID]reservation
	permitted bool

	failed   bool
	failedAt uint64
	reason   string
}

type reservation struct {
	node, shape string
	planned     bool
}

// NewManager returns an empty manager; now may be nil for the wall clock.
func NewManager(now func() time.Time) *Manager {
	if now == nil {
		now = time.Now
	}
	return &Manager{now: now, gangs: map[string]*gangState{}, holds: map[string]map[string]*gangState{}}
}

func (m *Manager) gang(key string) *gangState {
	g := m.gangs[key]
	if g == nil {
		g = &gangState{members: map[types.UID]reservation{}}
		m.gangs[key] = g
	}
	return g
}

// SetPlan records a plan for the gang and holds its capacity until ttl passes
// or the plan is dropped. Reservations made before stay valid.
// It returns the plan's generation, for ExpireIf.
func (m *Manager) SetPlan(key string, plan *Plan, shapes map[string]resources.List, ttl time.Duration) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.gang(key)
	m.clearHoldsLocked(key, g)
	g.shapes = shapes
	g.open = map[string]map[string]int{}
	for node, byShape := range plan.Slots {
		g.open[node] = map[string]int{}
		for shape, n := range byShape {
			g.open[node][shape] = n
		}
		if m.holds[node] == nil {
			m.holds[node] = map[string]*gangState{}
		}
		m.holds[node][key] = g
	}
	g.expires = m.now().Add(ttl)
	g.planned = true
	g.permitted = false
	g.failed = false
	g.reason = ""
	m.generation++
	g.generation = m.generation
	return g.generation
}

// ExpireIf drops the gang's plan if it is still the plan of that generation
// and its time is up. It reports whether it dropped anything.
func (m *Manager) ExpireIf(key string, generation uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.gangs[key]
	if g == nil || !g.planned || g.generation != generation || m.now().Before(g.expires) {
		return false
	}
	m.dropLocked(key, g)
	return true
}

// Expired reports whether the gang's last plan ran out of time.
func (m *Manager) Expired(key string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.gangs[key]
	return g != nil && !g.expires.IsZero() && !m.now().Before(g.expires)
}

// Remaining is how long the gang's live plan has left; zero without one.
func (m *Manager) Remaining(key string) time.Duration {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.gangs[key]
	if !m.liveLocked(g) {
		return 0
	}
	return g.expires.Sub(m.now())
}

// OpenNodes returns the nodes where the gang's plan still has a slot for the
// shape, and whether the gang has a live plan at all.
func (m *Manager) OpenNodes(key, shape string) (sets.Set[string], bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.gangs[key]
	if !m.liveLocked(g) {
		return nil, false
	}
	nodes := sets.New[string]()
	for node, byShape := range g.open {
		if byShape[shape] > 0 {
			nodes.Insert(node)
		}
	}
	return nodes, true
}

// Live reports whether the gang has a live plan.
func (m *Manager) Live(key string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.liveLocked(m.gangs[key])
}

// OpenRequests returns, per gang with a live plan, the resources its open
// slots hold (planned members not yet reserved).
func (m *Manager) OpenRequests() map[string]resources.List {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := map[string]resources.List{}
	for key, g := range m.gangs {
		if !m.liveLocked(g) {
			continue
		}
		sum := resources.List{}
		for _, byShape := range g.open {
			for shape, n := range byShape {
				sum.AddScaled(g.shapes[shape], int64(n))
			}
		}
		out[key] = sum
	}
	return out
}

func (m *Manager) liveLocked(g *gangState) bool {
	return g != nil && g.planned && m.now().Before(g.expires)
}

// Reserve records that a member was assumed on node, taking a planned slot
// for its shape when one is open there.
func (m *Manager) Reserve(key string, uid types.UID, node, shape string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.gang(key)
	if _, ok := g.members[uid]; ok {
		return
	}
	r := reservation{node: node, shape: shape}
	if m.liveLocked(g) && g.open[node][shape] > 0 {
		g.open[node][shape]--
		r.planned = true
	}
	g.members[uid] = r
}

// Unreserve forgets a member's reservation and gives its slot back to the plan.
func (m *Manager) Unreserve(key string, uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.gangs[key]
	if g == nil {
		return
	}
	r, ok := g.members[uid]
	if !ok {
		return
	}
	delete(g.members, uid)
	if r.planned && g.planned && g.open[r.node] != nil {
		g.open[r.node][r.shape]++
	}
}

// Reserved is the number of members reserved (assumed, not yet bound).
func (m *Manager) Reserved(key string) int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if g := m.gangs[key]; g != nil {
		return len(g.members)
	}
	return 0
}

// ReservedUIDs returns the members holding a reservation.
func (m *Manager) ReservedUIDs(key string) sets.Set[types.UID] {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := sets.New[types.UID]()
	if g := m.gangs[key]; g != nil {
		for uid := range g.members {
			out.Insert(uid)
		}
	}
	return out
}

// ReservedNodes returns the nodes of the gang's reserved members.
func (m *Manager) ReservedNodes(key string) []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.gangs[key]
	if g == nil {
		return nil
	}
	out := make([]string, 0, len(g.members))
	for _, r := range g.members {
		out = append(out, r.node)
	}
	return out
}

// IsReserved reports whether the member holds a reservation.
func (m *Manager) IsReserved(key string, uid types.UID) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.gangs[key]
	if g == nil {
		return false
	}
	_, ok := g.members[uid]
	return ok
}

// SetPermitted marks that the gang reached its quorum and was let through.
func (m *Manager) SetPermitted(key string, permitted bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gang(key).permitted = permitted
}

// Permitted reports whether the gang reached its quorum.
func (m *Manager) Permitted(key string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.gangs[key]
	return g != nil && g.permitted
}

// Bound forgets a member's reservation once the pod is bound: from then on the
// scheduler cache accounts for it and the plan's slot is consumed for good.
func (m *Manager) Bound(key string, uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if g := m.gangs[key]; g != nil {
		delete(g.members, uid)
	}
}

// Drop discards the plan and frees every hold. Reservations are kept: their
// pods are still assumed and the caller rejects them.
func (m *Manager) Drop(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if g := m.gangs[key]; g != nil {
		m.dropLocked(key, g)
	}
}

func (m *Manager) dropLocked(key string, g *gangState) {
	m.clearHoldsLocked(key, g)
	g.planned = false
	g.open = nil
	m.version++
}

// Bump records that capacity may have changed (a pod left a node, a node
// changed, holds were dropped). Cached plan failures from before are void.
func (m *Manager) Bump() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.version++
}

// Fail caches why the gang could not be planned. Its members are turned away
// with this reason, without replanning, until the next Bump.
func (m *Manager) Fail(key, reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.gang(key)
	g.failedAt = m.version
	g.failed = true
	g.reason = reason
}

// Failed returns the cached failure of a gang if nothing changed since.
func (m *Manager) Failed(key string) (string, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.gangs[key]
	if g == nil || !g.failed || g.failedAt != m.version {
		return "", false
	}
	return g.reason, true
}

// Forget removes everything known about a gang (its PodGroup was deleted).
func (m *Manager) Forget(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if g := m.gangs[key]; g != nil {
		m.clearHoldsLocked(key, g)
		delete(m.gangs, key)
		m.version++
	}
}

// Held returns the capacity that live plans of gangs other than except hold
// on node: requests and pod slots of planned members not yet reserved.
func (m *Manager) Held(node, except string) (resources.List, int64) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var held resources.List
	var pods int64
	for key, g := range m.holds[node] {
		if key == except || !m.liveLocked(g) {
			continue
		}
		for shape, n := range g.open[node] {
			if n <= 0 {
				continue
			}
			if held == nil {
				held = resources.List{}
			}
			held.AddScaled(g.shapes[shape], int64(n))
			pods += int64(n)
		}
	}
	return held, pods
}

// HoldsAnywhere reports whether any live plan holds capacity (a cheap guard
// for the Filter fast path).
func (m *Manager) HoldsAnywhere() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.holds) > 0
}

func (m *Manager) clearHoldsLocked(key string, g *gangState) {
	for node := range g.open {
		if byGang := m.holds[node]; byGang != nil {
			delete(byGang, key)
			if len(byGang) == 0 {
				delete(m.holds, node)
			}
		}
	}
}
