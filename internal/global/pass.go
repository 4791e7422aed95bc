package global

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/phalanx-sched/phalanx/internal/queue"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Ask is one member's question in an estimate: the job's set after the
// jobs dispatched to that member that have not started there yet (what
// Karmada calls assumed workloads: their pods may not exist yet).
type Ask struct {
	Member  string
	Assumed []*Job
}

// Answer is one member's estimate: whole sets of the job that start now.
type Answer struct {
	Sets int32
	Err  error
}

// Estimator asks the members' estimators, all under one deadline; one
// member's failure is its own answer's Err.
type Estimator interface {
	Sets(ctx context.Context, job *Job, asks []Ask) map[string]Answer
}

// Config tunes a Tier.
type Config struct {
	// StarvedAfter bounds the wait of a job at the head of its queue that
	// fits no member now: past it, the member that would hold it with the
	// least dispatched by the tier takes no new job after it in order
	// until it starts (0: never).
	StarvedAfter time.Duration
	// MoveAfter: a job dispatched this long ago that has not started in
	// its member is moved whole to a member where it starts now (0: off).
	MoveAfter time.Duration
	// MovesPerHour bounds moves over any hour.
	MovesPerHour int
}

// World is what one pass reads.
type World struct {
	Queues  []queue.Queue
	Members []*Member
	Jobs    []*Job
}

// Tier decides passes. It keeps only the times of recent moves (their
// hourly bound); everything else is read from the World each pass.
type Tier struct {
	cfg   Config
	clock clock.PassiveClock
	moves []time.Time
}

// New returns a Tier.
func New(cfg Config, clk clock.PassiveClock) *Tier {
	return &Tier{cfg: cfg, clock: clk}
}

// pass is one pass's working state.
type pass struct {
	*Tier
	ctx     context.Context
	est     Estimator
	world   World
	members map[string]*Member
	cache   *queue.Cache
	stalled map[string]resources.List
	blocked map[string]resources.List
	// assumed are the dispatched jobs not started yet, by member.
	assumed map[string][]*Job
	// dispatched is the tier's charge on each member (for the bounded
	// wait's choice of the member to drain).
	dispatched map[string]resources.List
	// drained are members kept for a starved job, by member: the job.
	drained map[string]*Job
	byName  map[string]*Job
	// rank is each waiting job's place in the pass's order; firstRefused
	// is, by queue, the rank of its first job refused for another queue's
	// share.
	rank         map[*Job]int
	firstRefused map[string]int
	refused      map[*Job]bool
}

// Pass decides every waiting job, in global queue order: dispatched whole
// to the member that starts it now with the tightest fit, or waiting with
// a reason. Dispatched jobs that have not started past MoveAfter may be
// moved. Verdicts come in that order, waiting jobs first, moves last.
func (t *Tier) Pass(ctx context.Context, w World, est Estimator) []Verdict {
	p := &pass{Tier: t, ctx: ctx, est: est, world: w, members: map[string]*Member{}, cache: queue.NewCache(),
		stalled: map[string]resources.List{}, blocked: map[string]resources.List{}, assumed: map[string][]*Job{},
		dispatched: map[string]resources.List{}, drained: map[string]*Job{}, byName: map[string]*Job{},
		rank: map[*Job]int{}, firstRefused: map[string]int{}, refused: map[*Job]bool{}}
	for _, q := range w.Queues {
		p.cache.SetQueue(q)
	}
	for _, m := range w.Members {
		p.members[m.Name] = m
		p.cache.SetNode(m.Name, m.Allocatable, m.Ready)
	}
	var waiting []*Job
	for _, j := range w.Jobs {
		p.byName[j.Namespace+"/"+j.Name] = j
		switch {
		case j.Done:
		case j.Member != "":
			p.cache.SetPod(j.UID, queue.Charge{Queue: j.Queue, Request: j.Request, Placed: true, Node: j.Member})
			p.charge(j.Member, j)
			if !j.Started {
				p.assumed[j.Member] = append(p.assumed[j.Member], j)
			}
		default:
			waiting = append(waiting, j)
		}
	}
	for _, j := range waiting {
		// Demand is what could start: not a job refused, waiting for a
		// dependency, or larger than every member.
		if _, wait := p.dependencies(j); j.Invalid == "" && j.Divides == "" && !wait && len(p.holders(j)) > 0 {
			p.cache.SetPod(j.UID, queue.Charge{Queue: j.Queue, Request: j.Request})
		}
	}
	order(p.cache.Snapshot(nil), waiting)
	for i, j := range waiting {
		p.rank[j] = i
	}
	verdicts := make([]Verdict, len(waiting))
	for i, j := range waiting {
		verdicts[i] = p.decide(j)
	}
	// A job refused for another queue below its share, whose work was then
	// refused in turn (each queue above its share by a whole job), is asked
	// once more: the first in order starts rather than neither, and a later
	// job of its queue does not take its room.
	for i, j := range waiting {
		if verdicts[i].Reason == QueueAboveShare && p.refusedAfter(j) {
			verdicts[i] = p.decide(j)
		}
	}
	positions := map[string]int{}
	inCluster := 0
	for i, j := range waiting {
		v := &verdicts[i]
		v.Job = j
		if v.Reason != Dispatched {
			positions[j.Queue]++
			inCluster++
			v.Position, v.ClusterPosition = positions[j.Queue], inCluster
			v.Message = fmt.Sprintf("%s (position %d in queue %s)", v.Message, v.Position, j.Queue)
		}
	}
	return append(verdicts, p.moves()...)
}

// order sorts waiting jobs as CapacityQueue orders gangs: the queue
// furthest below its deserved share (dominant share) first, then higher
// priority, then earlier submission, then name.
func order(s *queue.Snapshot, jobs []*Job) {
	sort.SliceStable(jobs, func(a, b int) bool {
		x, y := jobs[a], jobs[b]
		if c := s.Compare(x.Queue, y.Queue); c != 0 {
			return c < 0
		}
		if x.Priority != y.Priority {
			return x.Priority > y.Priority
		}
		if !x.Created.Equal(y.Created) {
			return x.Created.Before(y.Created)
		}
		return x.Key < y.Key
	})
}

func (p *pass) charge(member string, j *Job) {
	if p.dispatched[member] == nil {
		p.dispatched[member] = resources.List{}
	}
	p.dispatched[member].Add(j.Request)
}

// decide is one waiting job's verdict.
func (p *pass) decide(j *Job) Verdict {
	switch {
	case j.Invalid != "":
		return Verdict{Reason: InvalidJob, Message: j.Invalid}
	case j.Divides != "":
		return Verdict{Reason: WouldDivide, Message: "phalanx-global places a job whole in one member cluster, but " + j.Divides}
	}
	if v, wait := p.dependencies(j); wait {
		return v
	}
	holders := p.holders(j)
	if len(holders) == 0 {
		if p.holdsLater(j) {
			return Verdict{Reason: NoMemberFitsNow, Message: "no member in reach can start the whole set now: " + p.noHolder(j)}
		}
		return Verdict{Reason: NoMemberCanHold, Message: p.noHolder(j)}
	}
	if v, ok := p.admit(j); !ok {
		return v
	}
	var open []*Member
	var kept []string
	for _, m := range holders {
		if other := p.drained[m.Name]; other != nil {
			kept = append(kept, fmt.Sprintf("%s (kept for %s)", m.Name, other.Key))
			continue
		}
		open = append(open, m)
	}
	answers := p.ask(j, open)
	best := choose(open, answers)
	if best == nil {
		p.stall(j, holders, answers)
		msg := "no member can start the whole set now: " + describe(open, answers)
		if len(open) > 0 && p.everyIdleRefuses(j, open, answers) {
			// Nothing ends in them that would make room, so the bounded
			// wait keeps none of them for it (stall).
			msg = fmt.Sprintf("no member can start the whole set even with none of its %s in use (topology, node shapes or the member's own queues): %s",
				strings.Join(scarce(j.Request), ", "), describe(open, answers))
		}
		if len(kept) > 0 {
			msg += "; " + strings.Join(kept, ", ")
		}
		if len(open) == 0 {
			return Verdict{Reason: DrainingForStarved, Message: "every member that could hold it is kept for a job that has waited longer: " + strings.Join(kept, ", ")}
		}
		return Verdict{Reason: NoMemberFitsNow, Message: msg}
	}
	p.cache.MarkPlaced(j.UID, true, queue.Charge{Queue: j.Queue, Request: j.Request, Node: best.Name})
	p.charge(best.Name, j)
	p.assumed[best.Name] = append(p.assumed[best.Name], j)
	msg := fmt.Sprintf("dispatched whole to member %s (%s)", best.Name, describe(open, answers))
	if len(j.Evicted) > 0 {
		msg += fmt.Sprintf("; placed again after its eviction from %s by failover", strings.Join(j.Evicted, ", "))
	}
	return Verdict{Member: best.Name, Reason: Dispatched, Message: msg}
}

// dependencies: every job j depends on has started.
func (p *pass) dependencies(j *Job) (Verdict, bool) {
	for _, name := range j.DependsOn {
		dep, ok := p.byName[j.Namespace+"/"+name]
		if !ok {
			return Verdict{Reason: DependencyMissing, Message: fmt.Sprintf("depends on %s/%s, which no ResourceBinding on the Karmada plane stands for", j.Namespace, name)}, true
		}
		if !dep.Started {
			where := "it waits on the plane"
			switch {
			case dep.Done:
				// A failed dependency keeps its dependents waiting; say so
				// rather than that it may still start.
				where = "it finished in member " + dep.Member + " without starting (it failed)"
			case dep.Member != "":
				where = "it was sent to member " + dep.Member + " and has not started there"
			}
			return Verdict{Reason: DependencyWaiting, Message: fmt.Sprintf("depends on %s/%s: %s", j.Namespace, name, where)}, true
		}
	}
	return Verdict{}, false
}

// holders are the ready members the placement allows whose allocatable
// total holds the whole set.
func (p *pass) holders(j *Job) []*Member {
	var out []*Member
	for _, m := range p.world.Members {
		if m.Ready && !slices.Contains(j.Evicted, m.Name) && p.mayHold(j, m) {
			out = append(out, m)
		}
	}
	return out
}

// mayHold: m is allowed for j and its allocatable total holds the whole
// set, ready or not.
func (p *pass) mayHold(j *Job, m *Member) bool {
	return (j.Allowed == nil || j.Allowed(m)) && m.Allocatable.Fits(j.Request)
}

// holdsLater: a member out of reach now (not ready, or failover evicted j
// from it) would hold j: j waits for it or another, it is not refused for
// good.
func (p *pass) holdsLater(j *Job) bool {
	for _, m := range p.world.Members {
		if p.mayHold(j, m) && (!m.Ready || slices.Contains(j.Evicted, m.Name)) {
			return true
		}
	}
	return false
}

func (p *pass) noHolder(j *Job) string {
	var parts []string
	for _, m := range p.world.Members {
		switch {
		case j.Allowed != nil && !j.Allowed(m):
			parts = append(parts, m.Name+": not allowed by the placement")
		case slices.Contains(j.Evicted, m.Name):
			parts = append(parts, m.Name+": evicted it (failover), until the eviction ends")
		case !m.Ready:
			parts = append(parts, m.Name+": not ready")
		default:
			parts = append(parts, fmt.Sprintf("%s: allocatable %s", m.Name, m.Allocatable))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "no member cluster is registered")
	}
	return fmt.Sprintf("the whole set needs %s in one member, more than any ready member allowed holds: %s", j.Request, strings.Join(parts, "; "))
}

// admit asks the global queues, as CapacityQueue does in one cluster.
func (p *pass) admit(j *Job) (Verdict, bool) {
	s := p.cache.Snapshot(nil, queue.Want{Queue: j.Queue, Need: j.Request})
	s.Stalled, s.Blocked = p.stalled, p.blocked
	// Refused work of another queue counts when it went before j in this
	// pass's order.
	ahead := func(other string) bool {
		r, ok := p.firstRefused[other]
		return ok && r < p.rank[j]
	}
	ok, why := s.AdmitInOrder(j.Queue, j.Request, ahead)
	if ok {
		return Verdict{}, true
	}
	reason := QueueRefused
	if _, over := s.Exceeds(j.Queue, j.Request); over {
		if fits, _ := s.Tree.Admit(j.Queue, j.Request, s.Total, s.Allocated); fits {
			reason = QueueAboveShare
			if _, seen := p.firstRefused[j.Queue]; !seen {
				p.firstRefused[j.Queue] = p.rank[j]
			}
			if !p.refused[j] {
				p.refused[j] = true
				add(p.blocked, j.Queue, j.Request)
			}
		}
	}
	return Verdict{Reason: reason, Message: why}, false
}

// refusedAfter: another queue had work refused for its share after j in
// the pass's order.
func (p *pass) refusedAfter(j *Job) bool {
	for q, r := range p.firstRefused {
		if q != j.Queue && r > p.rank[j] {
			return true
		}
	}
	return false
}

// stall counts a job that fits no member now as demand that cannot start
// (it does not keep other queues from borrowing), and past StarvedAfter at
// the head of its queue keeps a member for it.
func (p *pass) stall(j *Job, holders []*Member, answers map[string]Answer) {
	add(p.stalled, j.Queue, j.Request)
	if p.cfg.StarvedAfter <= 0 || p.clock.Since(j.Created) < p.cfg.StarvedAfter || p.headStarved(j.Queue) {
		return
	}
	var pick *Member
	for _, m := range holders {
		if p.drained[m.Name] != nil || p.idleRefuses(j, m, answers) {
			continue
		}
		if pick == nil || lessUsed(p.dispatched[m.Name], p.dispatched[pick.Name], j.Request) {
			pick = m
		}
	}
	if pick != nil {
		p.drained[pick.Name] = j
	}
}

// scarce are the resources of req other than CPU, memory, storage and pod
// slots: the accelerators a gang waits for.
func scarce(req resources.List) []string {
	var out []string
	for r := range req {
		switch r {
		case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage, v1.ResourcePods:
			continue
		}
		out = append(out, string(r))
	}
	sort.Strings(out)
	return out
}

// idleRefuses: none of j's scarce resources is in use in m or charged
// to a job the tier dispatched there, yet m's estimator answered that no
// whole set starts there: what stops j is m's shape, not work that will
// end, so keeping m for j is of no use.
func (p *pass) idleRefuses(j *Job, m *Member, answers map[string]Answer) bool {
	a, ok := answers[m.Name]
	rs := scarce(j.Request)
	if !ok || a.Err != nil || a.Sets > 0 || len(rs) == 0 {
		return false
	}
	for _, r := range rs {
		if m.InUse[v1.ResourceName(r)] > 0 || p.dispatched[m.Name][v1.ResourceName(r)] > 0 {
			return false
		}
	}
	return true
}

func (p *pass) everyIdleRefuses(j *Job, members []*Member, answers map[string]Answer) bool {
	for _, m := range members {
		if !p.idleRefuses(j, m, answers) {
			return false
		}
	}
	return true
}

// headStarved: queue q already keeps a member for an earlier job.
func (p *pass) headStarved(q string) bool {
	for _, j := range p.drained {
		if j.Queue == q {
			return true
		}
	}
	return false
}

// lessUsed compares two members' dispatched charge on the resources the
// job asks for.
func lessUsed(a, b, on resources.List) bool {
	var x, y int64
	for r := range on {
		x += a[r]
		y += b[r]
	}
	return x < y
}

func (p *pass) ask(j *Job, members []*Member) map[string]Answer {
	if len(members) == 0 {
		return nil
	}
	asks := make([]Ask, len(members))
	for i, m := range members {
		asks[i] = Ask{Member: m.Name, Assumed: p.assumed[m.Name]}
	}
	return p.est.Sets(p.ctx, j, asks)
}

// choose: among members where the whole set starts now, the tightest fit
// (fewest sets: the least room left over), then the lowest cost, then the
// name.
func choose(members []*Member, answers map[string]Answer) *Member {
	var best *Member
	for _, m := range members {
		a := answers[m.Name]
		if a.Err != nil || a.Sets < 1 {
			continue
		}
		if best == nil {
			best = m
			continue
		}
		b := answers[best.Name]
		switch {
		case a.Sets != b.Sets:
			if a.Sets < b.Sets {
				best = m
			}
		case m.Cost != best.Cost:
			if m.Cost < best.Cost {
				best = m
			}
		case m.Name < best.Name:
			best = m
		}
	}
	return best
}

// describe renders each member's answer.
func describe(members []*Member, answers map[string]Answer) string {
	parts := make([]string, 0, len(members))
	for _, m := range members {
		a, ok := answers[m.Name]
		switch {
		case !ok:
			parts = append(parts, m.Name+": not asked")
		case a.Err != nil:
			parts = append(parts, fmt.Sprintf("%s: estimator failed: %v", m.Name, a.Err))
		default:
			parts = append(parts, fmt.Sprintf("%s: %d whole sets fit now", m.Name, a.Sets))
		}
	}
	return strings.Join(parts, "; ")
}

func add(m map[string]resources.List, q string, l resources.List) {
	if m[q] == nil {
		m[q] = resources.List{}
	}
	m[q].Add(l)
}
