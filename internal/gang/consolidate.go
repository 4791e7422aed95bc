package gang

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/lifecycle"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
	"github.com/phalanx-sched/phalanx/internal/gang/preempt"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// AnnotationCheckpointedAt, on a PodGroup or its pods, is when the job last
// saved a checkpoint (RFC 3339): consolidation counts the work a move loses
// from there rather than from the gang's start.
const AnnotationCheckpointedAt = "scheduling.phalanx.dev/checkpointed-at"

// ReasonConsolidated is the condition and event reason of a gang moved to
// free a domain for a waiting gang.
const ReasonConsolidated = "Consolidated"

// cpuCoresPerGPU prices a gang without GPUs: its CPU cores count as GPUs at
// this rate (a GPU node has about this many cores per GPU).
const cpuCoresPerGPU = 8

// maxConsolidationTries bounds the planner calls of one search.
const maxConsolidationTries = 256

// Consolidation moves running gangs to free a domain for a gang that waits
// for one: off while After is 0.
type Consolidation struct {
	// After is how long a gang with a required level waits before running
	// gangs may be moved for it.
	After time.Duration
	// MinRuntime is how long a gang runs before it may be moved.
	MinRuntime time.Duration
	// PerHour bounds the consolidations done for the gangs of one queue
	// within any hour.
	PerHour int
	// EvictionGrace is how long moved gangs asked to leave through
	// EvictionRequests may take: the freed room is held that much longer.
	EvictionGrace time.Duration
}

// consolidationLog remembers when consolidations happened, per queue of the
// gang they were for, and which gangs were moved.
type consolidationLog struct {
	mu      sync.Mutex
	byQueue map[string][]time.Time
	moved   map[ident.Ref]time.Time
	// wakeAt is when a gang's pending retry fires: one per gang, however
	// often its members fail meanwhile.
	wakeAt map[ident.Ref]time.Time
}

// claimWake reports whether a retry of the gang at at must be scheduled:
// not when one is pending that fires no later.
func (l *consolidationLog) claimWake(ref ident.Ref, now, at time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.wakeAt[ref]; ok && t.After(now) && !t.After(at) {
		return false
	}
	if l.wakeAt == nil {
		l.wakeAt = map[ident.Ref]time.Time{}
	}
	for r, t := range l.wakeAt {
		if !t.After(now) {
			delete(l.wakeAt, r)
		}
	}
	l.wakeAt[ref] = at
	return true
}

// retryLater is retryAfter, once per gang for a given time.
func (m *Manager) retryLater(a *Attempt, d time.Duration) {
	now := m.Now()
	if m.consolidated.claimWake(a.Ref, now, now.Add(d)) {
		m.retryAfter(a, d)
	}
}

// allowed reports whether the queue may consolidate now, and if not, when.
func (l *consolidationLog) allowed(queue string, now time.Time, perHour int) (bool, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	recent := l.byQueue[queue][:0]
	for _, t := range l.byQueue[queue] {
		if now.Sub(t) < time.Hour {
			recent = append(recent, t)
		}
	}
	if l.byQueue != nil {
		l.byQueue[queue] = recent
	}
	if len(recent) < perHour {
		return true, time.Time{}
	}
	return false, recent[0].Add(time.Hour)
}

func (l *consolidationLog) movedAt(ref ident.Ref) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.moved[ref]
}

func (l *consolidationLog) record(queue string, now time.Time, victims []preempt.Victim) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byQueue == nil {
		l.byQueue, l.moved = map[string][]time.Time{}, map[ident.Ref]time.Time{}
	}
	l.byQueue[queue] = append(l.byQueue[queue], now)
	for ref, t := range l.moved {
		if now.Sub(t) > 24*time.Hour {
			delete(l.moved, ref)
		}
	}
	for _, v := range victims {
		l.moved[v.Ref] = now
	}
}

// moveCandidate is a running gang that consolidation may move, with what
// moving it costs.
type moveCandidate struct {
	preempt.Victim
	pods []*v1.Pod
	// cost is the GPU-seconds of work lost: GPUs times the time since the
	// gang last started, or since its last checkpoint.
	cost float64
	// domains are its domains at the waiting gang's required level.
	domains []string
}

// consolidation is one proven move: the gangs to evict, where each goes,
// and the waiting gang's plan.
type consolidation struct {
	domain  string
	victims []preempt.Victim
	moves   []move
	plan    *planner.Plan
	cost    float64
	pods    int
}

// move is where a moved gang was proven to fit.
type move struct {
	ref      ident.Ref
	priority int32
	plan     *planner.Plan
	shapes   map[string]resources.List
}

// consolidate frees one domain of the gang's required level by moving whole
// running gangs out of it, when the gang has waited Consolidation.After for
// a domain and none fits it. Each moved gang has run MinRuntime (and was not
// moved within it), has a priority no higher than the gang's, and fits
// elsewhere right away: every candidate set is proven whole by the planner
// (the waiting gang in the freed room, then each moved gang, one after the
// other, on what is left, inside its own required domain) before anything
// is evicted. Of the domains that can be freed, the cheapest set wins (the
// least GPU-seconds lost, then the fewest pods). It returns nil and a note
// when nothing is moved; the note is empty when consolidation does not
// apply to the gang.
func (m *Manager) consolidate(ctx context.Context, a *Attempt, all *running, planFor func([]preempt.Victim) *planner.Plan) (*Room, string) {
	c := m.Consolidation
	if c.After <= 0 || a.Spec == nil || a.Topology == nil || a.Topology.Tree == nil || a.Topology.Required == "" || a.devices != nil {
		return nil, ""
	}
	if a.Queue != nil && !a.Queue.Admitted {
		return nil, ""
	}
	now := m.Now()
	since := m.WaitingSince(a.Ref)
	if since.IsZero() {
		return nil, ""
	}
	if waited := now.Sub(since); waited < c.After {
		m.retryLater(a, c.After-waited)
		return nil, ""
	}
	queueName := ""
	if a.Queue != nil {
		queueName = a.Queue.Queue
	}
	if ok, next := m.consolidated.allowed(queueName, now, c.PerHour); !ok {
		m.retryLater(a, next.Sub(now))
		return nil, fmt.Sprintf("no consolidation: queue %q had its %d this hour (next at %s)", queueName, c.PerHour, next.UTC().Format(time.RFC3339))
	}
	levels := a.Topology.Tree.Levels()
	li := -1
	for i, l := range levels {
		if l == a.Topology.Required {
			li = i
		}
	}
	if li < 0 {
		return nil, ""
	}
	cands, youngest := m.moveCandidates(a, all, li, now)
	if len(cands) == 0 {
		if youngest > 0 {
			m.retryLater(a, youngest)
			return nil, fmt.Sprintf("no consolidation: the gangs it could move have run less than %v (retrying in %v)", c.MinRuntime, youngest.Round(time.Second))
		}
		return nil, "no consolidation: no running gang it could move"
	}
	best := m.cheapestMove(a, cands, planFor)
	if best == nil {
		return nil, fmt.Sprintf("no consolidation: no %s can be freed by moving gangs that fit elsewhere now", a.Topology.Required)
	}
	m.consolidated.record(queueName, now, best.victims)
	why := fmt.Sprintf("no %s fits it; consolidating %s %s (%.0f GPU-seconds of work lost)", a.Topology.Required, a.Topology.Required, best.domain, best.cost)
	room, msg := m.evict(ctx, a, all, best.victims, best.plan, ReasonConsolidated, why, queueName)
	// Each moved gang's new place is held for it (against equal and lower
	// priority) until its pods come back and plan, or for twice its
	// schedule timeout after the grace its pods may take to leave.
	for _, mv := range best.moves {
		spec, err := m.dir.Spec(mv.ref)
		if err != nil {
			continue
		}
		m.Reserve(mv.ref, lifecycle.ReservationRequest{Kind: lifecycle.ReservationMoved, Priority: mv.priority, Created: spec.Created,
			Plan: mv.plan, Shapes: mv.shapes, TTL: 2*m.scheduleTimeout(spec) + c.EvictionGrace})
	}
	return room, msg
}

// moveCandidates lists the running gangs consolidation may move, cheapest
// first, and the shortest time until a gang too young to move may be.
func (m *Manager) moveCandidates(a *Attempt, all *running, li int, now time.Time) ([]moveCandidate, time.Duration) {
	var out []moveCandidate
	var youngest time.Duration
	for _, v := range all.victims {
		if v.Ref.IsZero() || v.Of != "" || v.Priority > a.Priority {
			continue
		}
		if ph := m.Phase(v.Ref); ph == lifecycle.PhasePlanned || ph == lifecycle.PhaseReserving {
			// Still binding, or waiting for more room: not settled.
			continue
		}
		spec, err := m.dir.Spec(v.Ref)
		if err != nil || spec.SubGroups != nil {
			continue
		}
		pods := all.pods[v.Key]
		if !movable(pods) {
			continue
		}
		started := v.Started
		if t := m.consolidated.movedAt(v.Ref); t.After(started) {
			started = t
		}
		if age := now.Sub(started); age < m.Consolidation.MinRuntime {
			if wait := m.Consolidation.MinRuntime - age; youngest == 0 || wait < youngest {
				youngest = wait
			}
			continue
		}
		from := v.Started
		if t := checkpointedAt(spec, pods); t.After(from) && !t.After(now) {
			from = t
		}
		cand := moveCandidate{Victim: v, pods: pods, cost: gpus(v.Total) * now.Sub(from).Seconds()}
		seen := map[string]bool{}
		for node := range v.OnNode {
			if d := a.Topology.Tree.Domains(node); li < len(d) && d[li] != "" && !seen[d[li]] {
				seen[d[li]] = true
				cand.domains = append(cand.domains, d[li])
			}
		}
		out = append(out, cand)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].cost != out[j].cost {
			return out[i].cost < out[j].cost
		}
		return out[i].Key < out[j].Key
	})
	return out, youngest
}

// movable: pods whose new place the planner can prove from their spec alone
// (resources, node selector and affinity, taints). Pod affinity, topology
// spread and resource claims depend on other pods and devices.
func movable(pods []*v1.Pod) bool {
	for _, p := range pods {
		s := p.Spec
		if len(s.ResourceClaims) > 0 || len(s.TopologySpreadConstraints) > 0 ||
			(s.Affinity != nil && (s.Affinity.PodAffinity != nil || s.Affinity.PodAntiAffinity != nil)) {
			return false
		}
	}
	return len(pods) > 0
}

// cheapestMove tries, for each domain of the required level, the cheapest
// gangs in it whose eviction lets the waiting gang fit (dropping those it
// then does not need, the costliest first), and keeps the cheapest set
// whose gangs all fit elsewhere.
func (m *Manager) cheapestMove(a *Attempt, cands []moveCandidate, planFor func([]preempt.Victim) *planner.Plan) *consolidation {
	byDomain := map[string][]moveCandidate{}
	var domains []string
	for _, c := range cands {
		for _, d := range c.domains {
			if byDomain[d] == nil {
				domains = append(domains, d)
			}
			byDomain[d] = append(byDomain[d], c)
		}
	}
	sort.Strings(domains)
	tries := 0
	fits := func(vs []preempt.Victim) bool {
		tries++
		return tries <= maxConsolidationTries && planFor(vs) != nil
	}
	var best *consolidation
	for _, d := range domains {
		var chosen []moveCandidate
		ok := false
		for _, c := range byDomain[d] {
			chosen = append(chosen, c)
			if fits(victimsOf(chosen)) {
				ok = true
				break
			}
		}
		if !ok {
			continue
		}
		// Drop what the gang does not need, the costliest first.
		for i := len(chosen) - 1; i >= 0 && len(chosen) > 1; i-- {
			without := append(append([]moveCandidate(nil), chosen[:i]...), chosen[i+1:]...)
			if fits(victimsOf(without)) {
				chosen = without
			}
		}
		cost, pods := 0.0, 0
		for _, c := range chosen {
			cost += c.cost
			pods += c.Members
		}
		if best != nil && (cost > best.cost || (cost == best.cost && pods >= best.pods)) {
			continue
		}
		victims := victimsOf(chosen)
		plan := planFor(victims)
		if plan == nil {
			continue
		}
		moves, ok := m.relocate(a, chosen, victims, plan)
		if !ok {
			continue
		}
		best = &consolidation{domain: d, victims: victims, moves: moves, plan: plan, cost: cost, pods: pods}
	}
	return best
}

func victimsOf(cs []moveCandidate) []preempt.Victim {
	out := make([]preempt.Victim, len(cs))
	for i, c := range cs {
		out[i] = c.Victim
	}
	return out
}

// relocate proves that every moved gang fits, whole, on the room left once
// they are gone and the waiting gang holds its plan: largest first, each
// inside one domain of its own required level, each taking its room from
// the next. It returns where each goes.
func (m *Manager) relocate(a *Attempt, moved []moveCandidate, victims []preempt.Victim, plan *planner.Plan) ([]move, bool) {
	n := len(a.view.Nodes)
	freed := preempt.Freed(victims)
	_, requests := planner.Shapes(a.groups)
	room, pods := make([]resources.List, n), make([]int64, n)
	for i, ns := range a.view.Nodes {
		name := ns.Node.Name
		room[i], pods[i] = ns.Free.Clone(), ns.FreePods
		if f, ok := freed[name]; ok {
			room[i].Add(f.Request)
			pods[i] += f.Pods
		}
		for shape, k := range plan.Slots[name] {
			room[i].AddScaled(requests[shape], -int64(k))
			pods[i] -= int64(k)
		}
	}
	order := append([]moveCandidate(nil), moved...)
	sort.SliceStable(order, func(i, j int) bool { return order[i].Members > order[j].Members })
	moves := make([]move, 0, len(order))
	for _, c := range order {
		groups := planner.GroupByShape(c.pods, m.demand())
		verdicts := make([]planner.Verdict, n)
		for i, ns := range a.view.Nodes {
			verdicts[i] = planner.Verdict{Fits: planner.NodeAdmits(groups[0].Rep, ns.Node)}
		}
		capacity := func(i int) (resources.List, int64) {
			held, heldPods := m.Held(a.view.Nodes[i].Node.Name, a.Ref, c.Priority)
			free := room[i].Clone()
			free.Sub(held)
			return free, pods[i] - heldPods
		}
		shapes, reqs := planner.Shapes(groups)
		req := planner.Request{Shapes: shapes, Nodes: planner.CandidateNodes(groups, a.view.Nodes, verdicts, capacity, false, a.Limiter)}
		spec, err := m.dir.Spec(c.Ref)
		if err != nil {
			return nil, false
		}
		required, _ := TopologyConstraint(spec.Annotations, groups[0].Rep.Annotations)
		req.Constrain(a.Topology.Tree, required, "", nil)
		p, _ := planner.Place(req)
		if p == nil {
			return nil, false
		}
		for i, ns := range a.view.Nodes {
			for shape, k := range p.Slots[ns.Node.Name] {
				room[i].AddScaled(reqs[shape], -int64(k))
				pods[i] -= int64(k)
			}
		}
		moves = append(moves, move{ref: c.Ref, priority: c.Priority, plan: p, shapes: reqs})
	}
	return moves, true
}

// gpus is what a gang's work is priced in: its GPUs, else its CPU cores at
// cpuCoresPerGPU to a GPU.
func gpus(total resources.List) float64 {
	n := int64(0)
	for name, v := range total {
		if strings.HasSuffix(string(name), "/gpu") {
			n += v
		}
	}
	if n > 0 {
		return float64(n)
	}
	return float64(total[v1.ResourceCPU]) / 1000 / cpuCoresPerGPU
}

// checkpointedAt is the latest checkpoint time the gang's group object or
// pods announce (zero when none, or unreadable).
func checkpointedAt(spec *Spec, pods []*v1.Pod) time.Time {
	var out time.Time
	read := func(ann map[string]string) {
		if t, err := time.Parse(time.RFC3339, ann[AnnotationCheckpointedAt]); err == nil && t.After(out) {
			out = t
		}
	}
	read(spec.Annotations)
	for _, p := range pods {
		read(p.Annotations)
	}
	return out
}
