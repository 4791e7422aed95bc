package gang

import (
	"sort"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Phase is where a gang is in its lifecycle.
type Phase string

const (
	// PhaseIdle: no plan. Members may be pending, or the gang runs.
	PhaseIdle Phase = "Idle"
	// PhasePlanned: a plan holds capacity while members are reserved.
	PhasePlanned Phase = "Planned"
	// PhaseReserving: the gang waits for capacity and holds the nodes it
	// needs against gangs of equal or lower priority (bounded wait, or the
	// room freed by preempting victims).
	PhaseReserving Phase = "Reserving"
	// PhaseStarted: the quorum was reached; members went through together.
	PhaseStarted Phase = "Started"
)

// Reasons a plan ends before its quorum, and the other reasons the gang
// lifecycle reports. They are the reasons of the PodGroup's Scheduled
// condition.
const (
	ReasonPlanBroken = "PlanBroken"
	ReasonTimeout    = "ScheduleTimeout"
	ReasonStranded   = "PartiallyBound"
	// ReasonGroupDeleted: the gang's group object was deleted mid-plan.
	ReasonGroupDeleted = "GroupDeleted"
)

// ReservationKind says why a gang holds nodes it cannot use yet.
type ReservationKind string

const (
	// ReservationStarved: the gang waited too long at the head of its queue.
	ReservationStarved ReservationKind = "Starved"
	// ReservationPreempting: the gang evicted victims and waits for them.
	ReservationPreempting ReservationKind = "Preempting"
	// ReservationMoved: consolidation moved the gang; the place it was
	// proven to fit is held until its pods come back.
	ReservationMoved ReservationKind = "Moved"
)

// Listener hears of teardowns, once each, outside the lifecycle's lock.
type Listener interface {
	// Released: the gang's plan ended before its quorum. The members in
	// reserved are assumed by the scheduler and must be rejected.
	Released(ref Ref, reserved []types.UID, reason, message string)
}

// ResumeListener is a Listener that also hears when a gang's pause after a
// timed-out plan ends (Paused), outside the lifecycle's lock, so its members
// can be woken to plan again. It must not block.
type ResumeListener interface {
	Resumed(ref Ref)
}

// FreedListener is a Listener that also hears when capacity a plan or a
// reservation held was given up without a member taking it (a teardown, an
// expired reservation, a forgotten gang), outside the lifecycle's lock: pods
// turned away by the hold can be woken. It must not block.
type FreedListener interface {
	HoldsFreed()
}

// HoldsListener is a Listener that also hears when what a gang holds
// changed (a plan committed, a slot taken, a reservation made or dropped,
// the gang started or released), outside the lifecycle's lock: HeldOf says
// what it holds now. It must not block.
type HoldsListener interface {
	HoldsChanged(ref Ref)
}

// Lifecycle tracks every gang the scheduler works on: its members (pending,
// reserved, bound), its plan or reservation, the capacity those hold on
// nodes, and cached plan failures. It is the one place that decides a plan's
// end and reports it once, with one reason. It is safe for concurrent use:
// the scheduling loop, Permit, binding goroutines, informers and timers all
// reach it. Time comes from the injected clock.
type Lifecycle struct {
	clock    clock.WithDelayedExecution
	listener Listener

	mu    sync.Mutex
	gangs map[Ref]*gangState
	// holds indexes gangs with open slots by node, so that Held costs
	// O(gangs holding that node).
	holds map[string]map[Ref]*gangState
	// version counts capacity changes; plan failures are cached per version.
	version    uint64
	generation uint64
	// heldChanged: gangs whose holds changed under the lock, told to the
	// HoldsListener by unlock.
	heldChanged map[Ref]struct{}
	// freed: held capacity was given up under the lock, told to the
	// FreedListener by unlock.
	freed bool
}

// unlock releases the lock, then tells the listener whose holds changed.
func (lc *Lifecycle) unlock() {
	changed, freed := lc.heldChanged, lc.freed
	lc.heldChanged, lc.freed = nil, false
	lc.mu.Unlock()
	if hl, ok := lc.listener.(HoldsListener); ok {
		for ref := range changed {
			hl.HoldsChanged(ref)
		}
	}
	if fl, ok := lc.listener.(FreedListener); ok && freed {
		fl.HoldsFreed()
	}
}

// holdsChangedLocked records that the gang's holds changed.
func (lc *Lifecycle) holdsChangedLocked(ref Ref) {
	if lc.heldChanged == nil {
		lc.heldChanged = map[Ref]struct{}{}
	}
	lc.heldChanged[ref] = struct{}{}
}

type memberState int

const (
	memberPending memberState = iota
	memberReserved
	memberBound
	// memberReleased: reserved, but its gang was torn down; it no longer
	// counts and waits for the framework's Unreserve.
	memberReleased
)

type member struct {
	node, shape string
	state       memberState
	// planned: the reservation took one of the plan's slots.
	planned bool
}

type gangState struct {
	ref     Ref
	min     int
	timeout time.Duration
	members map[types.UID]*member
	// count holds how many members are in each state (kept with setState),
	// so the per-member questions are O(1).
	count [memberReleased + 1]int

	phase      Phase
	generation uint64
	// slots: node -> shape -> open (not yet reserved) planned members.
	slots   map[string]map[string]int
	nodes   []string // the nodes of slots, sorted: members are steered in order
	shapes  map[string]resources.List
	expires time.Time
	// ttl is the plan's time to reach its quorum (the gang's timeout, else
	// the scheduler's default), for the timeout message.
	ttl   time.Duration
	timer clock.Timer

	// Reservation (PhaseReserving).
	queue    string
	priority int32
	created  time.Time
	kind     ReservationKind
	since    time.Time
	// readyBy is the latest the room of a starvation reservation is free:
	// when the last pod it waits for reaches its activeDeadlineSeconds
	// (zero: some pod has none, unknown).
	readyBy time.Time

	failed     bool
	failedAt   uint64
	failedTime time.Time
	reason     string
	// failedCost is how long the failed plan took (with its reservation):
	// what planning the gang again is likely to cost.
	failedCost time.Duration
	// representative is the member whose plan failed: while the failure
	// stands, only it is retried on cluster events, not every member.
	representative types.UID
	// waitingSince is when the gang last started failing to plan.
	waitingSince time.Time
	// partialSince is when the gang was last seen partly bound without a plan.
	partialSince time.Time

	// growth: the plan was made for a gang already at its quorum (a
	// sub-group growing it): its members go through only all together.
	growth bool
	// startedWith is the quorum the gang last started with: a gang whose
	// minimum was raised since (an upstream PodGroup's minCount) is not
	// partly bound while that many members run.
	startedWith int

	// timeouts counts the plans in a row that ended at their timeout; the
	// gang is not planned again before pausedUntil (see Paused).
	timeouts    int
	pausedUntil time.Time
	pauseTimer  clock.Timer
}

// NewLifecycle returns an empty lifecycle.
func NewLifecycle(clk clock.WithDelayedExecution, l Listener) *Lifecycle {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Lifecycle{clock: clk, listener: l, gangs: map[Ref]*gangState{}, holds: map[string]map[Ref]*gangState{}}
}

// Tracked is how many gangs the lifecycle keeps state for.
func (lc *Lifecycle) Tracked() int {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return len(lc.gangs)
}

// Tracks reports whether the lifecycle keeps state for the gang.
func (lc *Lifecycle) Tracks(ref Ref) bool {
	lc.mu.Lock()
	defer lc.unlock()
	_, ok := lc.gangs[ref]
	return ok
}

// Now is the lifecycle's clock.
func (lc *Lifecycle) Now() time.Time { return lc.clock.Now() }

func (lc *Lifecycle) gang(ref Ref) *gangState {
	g := lc.gangs[ref]
	if g == nil {
		g = &gangState{ref: ref, phase: PhaseIdle, members: map[types.UID]*member{}}
		lc.gangs[ref] = g
	}
	return g
}

// SetSpec records the gang's quorum and timeout (from its group object).
func (lc *Lifecycle) SetSpec(ref Ref, minMember int, timeout time.Duration) {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gang(ref)
	g.min, g.timeout = minMember, timeout
	lc.notePartialLocked(g)
}

// --- members -------------------------------------------------------------

// ObserveMember records a member as the API shows it: bound to node, or
// pending when node is "". A member that the scheduler reserved stays
// reserved until the API shows it bound.
func (lc *Lifecycle) ObserveMember(ref Ref, uid types.UID, node string) {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gang(ref)
	m := g.members[uid]
	if m == nil {
		m = &member{state: memberPending}
		g.members[uid] = m
		g.count[memberPending]++
	}
	if node != "" && m.state != memberBound {
		g.setState(m, memberBound)
		m.node = node
	}
	lc.notePartialLocked(g)
}

// MemberDeleted forgets a member that is gone or terminating. A member of a
// gang still short of its quorum breaks the gang's plan.
func (lc *Lifecycle) MemberDeleted(ref Ref, uid types.UID) {
	lc.mu.Lock()
	g := lc.gangs[ref]
	if g == nil || g.members[uid] == nil {
		lc.unlock()
		return
	}
	m := g.members[uid]
	delete(g.members, uid)
	g.count[m.state]--
	var rel *release
	if m.state != memberPending && m.state != memberReleased && g.phase == PhasePlanned {
		rel = lc.releaseLocked(g, ReasonPlanBroken, "a placed member was deleted before the gang was complete; replanning")
	}
	if m.state == memberBound {
		lc.version++
	}
	lc.notePartialLocked(g)
	lc.unlock()
	lc.notify(rel)
}

// MemberReserved records that the scheduler assumed a member on node. It
// takes a planned slot for the member's shape when one is open there.
func (lc *Lifecycle) MemberReserved(ref Ref, uid types.UID, node, shape string) {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gang(ref)
	m := g.members[uid]
	if m == nil {
		m = &member{state: memberPending}
		g.members[uid] = m
		g.count[memberPending]++
	}
	if m.state == memberReserved || m.state == memberBound {
		return
	}
	g.setState(m, memberReserved)
	m.node, m.shape, m.planned = node, shape, false
	if g.phase == PhasePlanned && g.slots[node][shape] > 0 {
		g.slots[node][shape]--
		m.planned = true
		lc.holdsChangedLocked(ref)
		if g.slots[node][shape] == 0 {
			lc.dropHoldIfEmptyLocked(g, node)
		}
	}
}

// MemberUnreserved undoes MemberReserved (the member was rejected, timed out
// in Permit or failed to bind). Before the quorum that breaks the plan: the
// whole gang is torn down, once, with the reason.
func (lc *Lifecycle) MemberUnreserved(ref Ref, uid types.UID, name string) {
	lc.mu.Lock()
	g := lc.gangs[ref]
	if g == nil {
		lc.unlock()
		return
	}
	m := g.members[uid]
	if m == nil || m.state == memberBound || m.state == memberPending {
		lc.unlock()
		return
	}
	wasReleased := m.state == memberReleased
	g.setState(m, memberPending)
	m.node, m.planned = "", false
	var rel *release
	if !wasReleased && g.phase == PhasePlanned {
		if !lc.clock.Now().Before(g.expires) {
			rel = lc.releaseLocked(g, ReasonTimeout, timeoutMessage(g))
		} else {
			rel = lc.releaseLocked(g, ReasonPlanBroken, "member "+name+" was released before the gang was complete; replanning")
		}
	}
	lc.unlock()
	lc.notify(rel)
}

// Placed is the number of members that count toward the quorum: bound, or
// reserved by this scheduler.
func (lc *Lifecycle) Placed(ref Ref) int {
	lc.mu.Lock()
	defer lc.unlock()
	if g := lc.gangs[ref]; g != nil {
		return placedLocked(g)
	}
	return 0
}

// Untouched reports whether the gang has no plan or reservation and no
// member placed: nothing of it has begun.
func (lc *Lifecycle) Untouched(ref Ref) bool {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gangs[ref]
	return g == nil || (g.phase == PhaseIdle && placedLocked(g) == 0)
}

func placedLocked(g *gangState) int {
	return g.count[memberReserved] + g.count[memberBound]
}

func (g *gangState) setState(m *member, s memberState) {
	g.count[m.state]--
	m.state = s
	g.count[s]++
}

// Incomplete reports whether the gang has a plan, or members bound or
// reserved, and fewer than its quorum placed: it holds capacity it cannot
// use until it is complete, so its members go first. A plan counts from
// the moment it is made: it wakes the members before the first of them is
// reserved, and the scheduling queue orders a pod when it enters, not
// after.
func (lc *Lifecycle) Incomplete(ref Ref) bool {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gangs[ref]
	if g == nil {
		return false
	}
	placed := placedLocked(g)
	return placed < g.min && (placed > 0 || g.phase == PhasePlanned)
}

// IsPlaced reports whether the member is bound or reserved.
func (lc *Lifecycle) IsPlaced(ref Ref, uid types.UID) bool {
	lc.mu.Lock()
	defer lc.unlock()
	if g := lc.gangs[ref]; g != nil {
		if m := g.members[uid]; m != nil {
			return m.state == memberReserved || m.state == memberBound
		}
	}
	return false
}

// PlacedUIDs returns the members that count toward the quorum.
func (lc *Lifecycle) PlacedUIDs(ref Ref) sets.Set[types.UID] {
	lc.mu.Lock()
	defer lc.unlock()
	out := sets.New[types.UID]()
	if g := lc.gangs[ref]; g != nil {
		for uid, m := range g.members {
			if m.state == memberReserved || m.state == memberBound {
				out.Insert(uid)
			}
		}
	}
	return out
}

// PlacedShapes counts the gang's reserved members by shape (bound members
// the API shows carry no shape: they count under "").
func (lc *Lifecycle) PlacedShapes(ref Ref) map[string]int {
	lc.mu.Lock()
	defer lc.unlock()
	out := map[string]int{}
	if g := lc.gangs[ref]; g != nil {
		for _, m := range g.members {
			if m.state == memberReserved || m.state == memberBound {
				out[m.shape]++
			}
		}
	}
	return out
}

// PlacedNodes returns the nodes of the gang's bound and reserved members, in
// no particular order: it is asked once per member's cycle, and sorting a
// 1024-member gang's nodes each time was a tenth of the scheduler's CPU.
func (lc *Lifecycle) PlacedNodes(ref Ref) []string {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gangs[ref]
	if g == nil {
		return nil
	}
	out := make([]string, 0, placedLocked(g))
	for _, m := range g.members {
		if m.state == memberReserved || m.state == memberBound {
			out = append(out, m.node)
		}
	}
	return out
}

// Reserved returns the members reserved by this scheduler and not yet bound.
func (lc *Lifecycle) Reserved(ref Ref) []types.UID {
	lc.mu.Lock()
	defer lc.unlock()
	if g := lc.gangs[ref]; g != nil {
		return reservedLocked(g)
	}
	return nil
}

func reservedLocked(g *gangState) []types.UID {
	var out []types.UID
	for uid, m := range g.members {
		if m.state == memberReserved {
			out = append(out, uid)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// --- plans ---------------------------------------------------------------

// CommitPlan records a plan for the gang and holds its capacity until ttl
// passes, the quorum is reached or the plan breaks. A reservation the gang
// held is replaced. Members reserved before keep their reservations.
func (lc *Lifecycle) CommitPlan(ref Ref, plan *Plan, shapes map[string]resources.List, ttl time.Duration) {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gang(ref)
	lc.clearHoldsLocked(g)
	lc.setSlotsLocked(g, plan, shapes)
	g.growth = g.min > 0 && placedLocked(g) >= g.min
	g.phase = PhasePlanned
	g.expires, g.ttl = lc.clock.Now().Add(ttl), ttl
	g.failed, g.reason = false, ""
	g.waitingSince, g.partialSince = time.Time{}, time.Time{}
	gen := g.generation
	g.timer = lc.clock.AfterFunc(ttl, func() { go lc.expire(ref, gen) })
}

func (lc *Lifecycle) setSlotsLocked(g *gangState, plan *Plan, shapes map[string]resources.List) {
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
	lc.generation++
	g.generation = lc.generation
	g.shapes = shapes
	g.slots = make(map[string]map[string]int, len(plan.Slots))
	g.nodes = g.nodes[:0]
	for node, byShape := range plan.Slots {
		open := make(map[string]int, len(byShape))
		for shape, n := range byShape {
			if n > 0 {
				open[shape] = n
			}
		}
		if len(open) == 0 {
			continue
		}
		g.slots[node] = open
		g.nodes = append(g.nodes, node)
		if lc.holds[node] == nil {
			lc.holds[node] = map[Ref]*gangState{}
		}
		lc.holds[node][g.ref] = g
		lc.holdsChangedLocked(g.ref)
	}
	sort.Strings(g.nodes)
}

// expire ends a plan that ran out of time before its quorum.
func (lc *Lifecycle) expire(ref Ref, generation uint64) {
	lc.mu.Lock()
	g := lc.gangs[ref]
	var rel *release
	if g != nil && g.generation == generation {
		g.timer = nil // it fired
		switch g.phase {
		case PhasePlanned:
			rel = lc.releaseLocked(g, ReasonTimeout, timeoutMessage(g))
		case PhaseReserving:
			lc.clearReservationLocked(g)
		}
	}
	lc.unlock()
	lc.notify(rel)
}

func timeoutMessage(g *gangState) string {
	return "only " + itoa(placedLocked(g)) + " of " + itoa(g.min) + " members were placed within " +
		g.ttl.String() + "; all members released"
}

// Phase returns the gang's phase.
func (lc *Lifecycle) Phase(ref Ref) Phase {
	lc.mu.Lock()
	defer lc.unlock()
	if g := lc.gangs[ref]; g != nil {
		return g.phase
	}
	return PhaseIdle
}

// NextSlot returns the node the next member of the shape goes to under the
// gang's plan. live is false when the gang has no plan; node is "" when the
// plan has no open slot for the shape (the member is beyond the plan).
func (lc *Lifecycle) NextSlot(ref Ref, shape string) (node string, live bool) {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gangs[ref]
	if g == nil || g.phase != PhasePlanned {
		return "", false
	}
	for _, n := range g.nodes {
		if g.slots[n][shape] > 0 {
			return n, true
		}
	}
	return "", true
}

// Remaining is how long the gang's plan has left; zero without one.
func (lc *Lifecycle) Remaining(ref Ref) time.Duration {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gangs[ref]
	if g == nil || g.phase != PhasePlanned {
		return 0
	}
	return g.expires.Sub(lc.clock.Now())
}

// Quorum reports whether the gang has at least min members placed. The first
// time it does, the plan is consumed (its holds are gone: every planned member
// is assumed) and first is true. A gang below its quorum again (a member lost
// after starting) is no longer Started.
func (lc *Lifecycle) Quorum(ref Ref, min int) (reached, first bool, placed int) {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gang(ref)
	placed = placedLocked(g)
	if placed < min {
		if g.phase == PhaseStarted {
			g.phase = PhaseIdle
		}
		return false, false, placed
	}
	if g.phase == PhaseStarted {
		return true, false, placed
	}
	if g.phase == PhasePlanned && g.growth && openSlotsLocked(g) > 0 {
		// A plan beyond the quorum (a sub-group that grows a started gang)
		// goes through whole, too.
		return false, false, placed
	}
	lc.clearHoldsLocked(g)
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
	g.phase = PhaseStarted
	g.startedWith = min
	g.waitingSince, g.partialSince = time.Time{}, time.Time{}
	lc.endPauseLocked(g)
	g.timeouts = 0
	return true, true, placed
}

// Release tears the gang's plan or reservation down, once: holds are freed,
// reserved members are released for the caller to reject, and the listener
// hears the reason. It reports whether there was anything to release.
func (lc *Lifecycle) Release(ref Ref, reason, message string) bool {
	lc.mu.Lock()
	g := lc.gangs[ref]
	var rel *release
	if g != nil {
		switch g.phase {
		case PhasePlanned:
			rel = lc.releaseLocked(g, reason, message)
		case PhaseReserving:
			lc.clearReservationLocked(g)
			lc.unlock()
			return true
		}
	}
	lc.unlock()
	lc.notify(rel)
	return rel != nil
}

type release struct {
	ref             Ref
	reserved        []types.UID
	reason, message string
}

func (lc *Lifecycle) releaseLocked(g *gangState, reason, message string) *release {
	rel := &release{ref: g.ref, reserved: reservedLocked(g), reason: reason, message: message}
	for _, m := range g.members {
		if m.state == memberReserved {
			g.setState(m, memberReleased)
		}
	}
	lc.clearHoldsLocked(g)
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
	g.phase = PhaseIdle
	g.slots, g.nodes = nil, nil
	lc.generation++
	g.generation = lc.generation
	lc.version++
	if reason == ReasonTimeout {
		pause := lc.pauseLocked(g)
		rel.message += "; planning again after " + pause.String() + " (holding nothing meanwhile)"
	}
	return rel
}

// Pauses after timed-out plans: the first lasts half the plan's timeout,
// each further one in a row twice the last, within these bounds.
const (
	minTimeoutPause = time.Second
	maxTimeoutPause = 5 * time.Minute
)

// TimeoutPause is how long a gang waits before it plans again after its
// n-th plan in a row ended at its timeout ttl: a member that cannot reach the
// scheduler (a missing volume or claim, a wrong schedulerName) would
// otherwise make the gang hold its nodes again at once, over and over.
func TimeoutPause(ttl time.Duration, n int) time.Duration {
	pause := ttl / 2
	for i := 1; i < n && pause < maxTimeoutPause; i++ {
		pause *= 2
	}
	return min(max(pause, minTimeoutPause), maxTimeoutPause).Round(100 * time.Millisecond)
}

func (lc *Lifecycle) pauseLocked(g *gangState) time.Duration {
	g.timeouts++
	pause := TimeoutPause(g.ttl, g.timeouts)
	lc.endPauseLocked(g)
	g.pausedUntil = lc.clock.Now().Add(pause)
	ref, until := g.ref, g.pausedUntil
	g.pauseTimer = lc.clock.AfterFunc(pause, func() { go lc.resume(ref, until) })
	return pause
}

func (lc *Lifecycle) endPauseLocked(g *gangState) {
	if g.pauseTimer != nil {
		g.pauseTimer.Stop()
		g.pauseTimer = nil
	}
	g.pausedUntil = time.Time{}
}

// resume ends a pause that is still the gang's and tells the listener.
func (lc *Lifecycle) resume(ref Ref, until time.Time) {
	lc.mu.Lock()
	g := lc.gangs[ref]
	ended := g != nil && g.pausedUntil.Equal(until)
	if ended {
		g.pauseTimer = nil
		g.pausedUntil = time.Time{}
	}
	lc.unlock()
	if rl, ok := lc.listener.(ResumeListener); ended && ok {
		rl.Resumed(ref)
	}
}

// Paused reports whether the gang waits out a pause after a timed-out plan,
// and until when. Its members are turned away meanwhile.
func (lc *Lifecycle) Paused(ref Ref) (time.Time, bool) {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gangs[ref]
	if g == nil || g.pausedUntil.IsZero() || !lc.clock.Now().Before(g.pausedUntil) {
		return time.Time{}, false
	}
	return g.pausedUntil, true
}

func (lc *Lifecycle) notify(rel *release) {
	if rel != nil && lc.listener != nil {
		lc.listener.Released(rel.ref, rel.reserved, rel.reason, rel.message)
	}
}

// --- holds ---------------------------------------------------------------

// Held returns the capacity that gangs other than except hold on node
// against a pod of the given priority: the open slots of plans (against
// every pod) and of reservations of equal or higher priority.
func (lc *Lifecycle) Held(node string, except Ref, priority int32) (resources.List, int64) {
	return lc.HeldFrom(node, Claimant{Ref: except, Priority: priority})
}

// Claimant is who asks for room: its gang (zero for a plain pod), its
// priority, and when it is sure to be gone (its pods' activeDeadlineSeconds
// from now; zero: no limit).
type Claimant struct {
	Ref      Ref
	Priority int32
	Ends     time.Time
}

// HeldFrom is Held for a claimant that may end in time: a starvation
// reservation whose room is sure to be free only after the claimant ends
// (readyBy) does not hold against it — it backfills without delaying the
// reservation (conservative backfill, on run-time limits).
func (lc *Lifecycle) HeldFrom(node string, c Claimant) (resources.List, int64) {
	return lc.held(node, func(ref Ref, g *gangState) bool {
		switch {
		case ref == c.Ref:
			return true
		case g.phase != PhaseReserving:
			return false // a plan holds against every pod
		case c.Priority > g.priority:
			return true
		}
		return g.kind == ReservationStarved && !g.readyBy.IsZero() && !c.Ends.IsZero() && !c.Ends.After(g.readyBy)
	})
}

// HeldAhead returns what a starving gang that asks for a reservation must
// leave alone on node: every hold but its own and the starvation
// reservations of its queue that it goes before (Reserve would displace
// them, so their room is the gang's to claim).
func (lc *Lifecycle) HeldAhead(node string, req ReservationRequest, ref Ref) (resources.List, int64) {
	return lc.held(node, func(other Ref, g *gangState) bool {
		return other == ref || (g.phase == PhaseReserving && g.kind == ReservationStarved && req.Kind == ReservationStarved &&
			g.queue == req.Queue && goesFirst(req.Priority, req.Created, ref, g.priority, g.created, other))
	})
}

func (lc *Lifecycle) held(node string, skip func(Ref, *gangState) bool) (resources.List, int64) {
	lc.mu.Lock()
	defer lc.unlock()
	var held resources.List
	var pods int64
	for ref, g := range lc.holds[node] {
		if skip(ref, g) {
			continue
		}
		for shape, n := range g.slots[node] {
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

// HoldsAnywhere reports whether any gang holds capacity (a cheap guard for
// the Filter fast path).
func (lc *Lifecycle) HoldsAnywhere() bool {
	lc.mu.Lock()
	defer lc.unlock()
	return len(lc.holds) > 0
}

// HeldByGang returns, per gang that holds capacity, the resources its open
// slots hold: queue accounting charges them to the gang's queue.
func (lc *Lifecycle) HeldByGang() map[Ref]resources.List {
	lc.mu.Lock()
	defer lc.unlock()
	out := map[Ref]resources.List{}
	for _, byGang := range lc.holds {
		for ref, g := range byGang {
			if _, seen := out[ref]; !seen {
				out[ref] = heldLocked(g)
			}
		}
	}
	return out
}

// HeldOf returns what HeldByGang says of one gang: nil when it holds nothing.
func (lc *Lifecycle) HeldOf(ref Ref) resources.List {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gangs[ref]
	if g == nil {
		return nil
	}
	for node := range g.slots {
		if lc.holds[node][ref] == g {
			if sum := heldLocked(g); !sum.IsZero() {
				return sum
			}
			return nil
		}
	}
	return nil
}

// openSlotsLocked counts the plan's members not placed yet.
func openSlotsLocked(g *gangState) int {
	n := 0
	for _, byShape := range g.slots {
		for _, c := range byShape {
			n += c
		}
	}
	return n
}

// heldLocked sums the gang's open slots.
func heldLocked(g *gangState) resources.List {
	sum := resources.List{}
	for _, byShape := range g.slots {
		for shape, n := range byShape {
			sum.AddScaled(g.shapes[shape], int64(n))
		}
	}
	return sum
}

// clearHoldsLocked gives up every open slot of the gang: capacity no member
// took is free again (the FreedListener hears of it).
func (lc *Lifecycle) clearHoldsLocked(g *gangState) {
	for node, byShape := range g.slots {
		if lc.holds[node][g.ref] == g {
			for _, n := range byShape {
				if n > 0 {
					lc.freed = true
				}
			}
		}
		lc.removeHoldLocked(g, node)
	}
}

func (lc *Lifecycle) dropHoldIfEmptyLocked(g *gangState, node string) {
	for _, n := range g.slots[node] {
		if n > 0 {
			return
		}
	}
	lc.removeHoldLocked(g, node)
}

func (lc *Lifecycle) removeHoldLocked(g *gangState, node string) {
	if byGang := lc.holds[node]; byGang != nil && byGang[g.ref] == g {
		delete(byGang, g.ref)
		if len(byGang) == 0 {
			delete(lc.holds, node)
		}
		lc.holdsChangedLocked(g.ref)
	}
}

// --- failures and capacity changes ---------------------------------------

// Changed records that capacity may have changed (a pod left a node, a node
// or the topology changed). Cached plan failures from before are void. It
// returns the new capacity version.
func (lc *Lifecycle) Changed() uint64 {
	lc.mu.Lock()
	defer lc.unlock()
	lc.version++
	return lc.version
}

// Version is the capacity version: it moves with every capacity change.
func (lc *Lifecycle) Version() uint64 {
	lc.mu.Lock()
	defer lc.unlock()
	return lc.version
}

// Fail caches why the gang could not be planned (by member uid's cycle): its
// members are turned away with this reason, without planning again, until
// capacity changes.
func (lc *Lifecycle) Fail(ref Ref, uid types.UID, reason string) {
	lc.FailAt(ref, uid, reason, lc.Version())
}

// FailAt is Fail for a plan that saw capacity version version: a change
// since (a node added while the gang was planned) voids the failure at once.
func (lc *Lifecycle) FailAt(ref Ref, uid types.UID, reason string, version uint64) {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gang(ref)
	g.failed, g.failedAt, g.failedTime, g.reason = true, version, lc.clock.Now(), reason
	g.representative = uid
	if g.waitingSince.IsZero() {
		g.waitingSince = g.failedTime
	}
}

// Failed returns the cached failure of the gang if nothing changed since.
func (lc *Lifecycle) Failed(ref Ref) (string, bool) {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gangs[ref]
	if g == nil || !g.failed || g.failedAt != lc.version {
		return "", false
	}
	return g.reason, true
}

// Representative returns the member that stands for a gang whose plan
// failed (zero when the gang has not failed or that member is gone): cluster
// events retry it alone, and its plan wakes the others.
func (lc *Lifecycle) Representative(ref Ref) types.UID {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gangs[ref]
	if g == nil || !g.failed {
		return ""
	}
	if m := g.members[g.representative]; m == nil || m.state != memberPending {
		return ""
	}
	return g.representative
}

// FailedSince reports whether uid stands for the gang (Representative) and
// the gang's failed plan began at capacity version v or later.
func (lc *Lifecycle) FailedSince(ref Ref, uid types.UID, v uint64) bool {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gangs[ref]
	if g == nil || !g.failed || g.representative != uid || g.failedAt < v {
		return false
	}
	m := g.members[uid]
	return m != nil && m.state == memberPending
}

// Retry voids the gang's cached failure, so its next member plans again.
func (lc *Lifecycle) Retry(ref Ref) {
	lc.mu.Lock()
	defer lc.unlock()
	if g := lc.gangs[ref]; g != nil {
		g.failed = false
	}
}

// FailedBefore lists the gangs whose last plan failed longer than age ago:
// what changed since may not have produced a capacity change (another
// queue's demand, a victim growing old enough to reclaim), so they are
// planned again now and then.
func (lc *Lifecycle) FailedBefore(age time.Duration) []Ref {
	lc.mu.Lock()
	defer lc.unlock()
	now := lc.clock.Now()
	var out []Ref
	for ref, g := range lc.gangs {
		if g.failed && now.Sub(g.failedTime) >= age {
			out = append(out, ref)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// FailedCycleOverhead is what a failed cycle costs beyond the plan: the
// framework writes the member's PodScheduled condition, and its message
// changes with the numbers in it, so it is rarely skipped. The write runs
// inside the scheduling loop unless SchedulerAsyncAPICalls is on, which
// moves it out of the loop but not off the API server. At 64 nodes a
// failed plan takes a millisecond or two; counted alone, it let a few dozen
// gangs that did not fit be retried on every pod that finished, each retry
// with its write, and the loop spent its time there (docs/benchmarks.md).
// 20 ms is above the writes measured on the 2-core test machine (about
// 10 ms each under a trace replay).
const FailedCycleOverhead = 20 * time.Millisecond

// FailCost records what the gang's failed plan cost the scheduling loop.
func (lc *Lifecycle) FailCost(ref Ref, d time.Duration) {
	lc.mu.Lock()
	defer lc.unlock()
	if g := lc.gangs[ref]; g != nil && g.failed {
		g.failedCost = d
	}
}

// FailedGangs lists the gangs whose last plan failed, and what their failed
// plans took together.
func (lc *Lifecycle) FailedGangs() (refs []Ref, cost time.Duration) {
	lc.mu.Lock()
	defer lc.unlock()
	for ref, g := range lc.gangs {
		if g.failed {
			refs = append(refs, ref)
			cost += g.failedCost
		}
	}
	SortRefs(refs)
	return refs, cost
}

// Stalled lists the gangs whose last plan failed while nothing has changed
// since (Failed holds for each), and the gangs paused after a timed-out plan:
// they cannot use room that is free now.
func (lc *Lifecycle) Stalled() []Ref {
	lc.mu.Lock()
	defer lc.unlock()
	var out []Ref
	now := lc.clock.Now()
	for ref, g := range lc.gangs {
		if (g.failed && g.failedAt == lc.version) || now.Before(g.pausedUntil) {
			out = append(out, ref)
		}
	}
	SortRefs(out)
	return out
}

// WaitingSince is when the gang started failing to plan (zero if it is not
// waiting).
func (lc *Lifecycle) WaitingSince(ref Ref) time.Time {
	lc.mu.Lock()
	defer lc.unlock()
	if g := lc.gangs[ref]; g != nil {
		return g.waitingSince
	}
	return time.Time{}
}

// Forget removes everything known about a gang (its group object is gone).
func (lc *Lifecycle) Forget(ref Ref) {
	lc.mu.Lock()
	defer lc.unlock()
	if g := lc.gangs[ref]; g != nil {
		lc.clearHoldsLocked(g)
		if g.timer != nil {
			g.timer.Stop()
		}
		lc.endPauseLocked(g)
		delete(lc.gangs, ref)
		lc.version++
	}
}

// ForgetIfEmpty drops a gang that has no members and holds nothing, so
// finished gangs do not accumulate.
func (lc *Lifecycle) ForgetIfEmpty(ref Ref) {
	lc.mu.Lock()
	defer lc.unlock()
	if g := lc.gangs[ref]; g != nil && len(g.members) == 0 && len(g.slots) == 0 && g.phase != PhaseReserving {
		if g.timer != nil {
			g.timer.Stop()
		}
		lc.endPauseLocked(g)
		delete(lc.gangs, ref)
	}
}

// --- partial gangs -------------------------------------------------------

// notePartialLocked tracks gangs that are partly bound without a plan: some
// members bound, fewer than the quorum, others still pending (a crash during
// binding, a member that failed to bind after the quorum).
func (lc *Lifecycle) notePartialLocked(g *gangState) {
	bound, pending := g.count[memberBound], g.count[memberPending]
	partial := g.min > 0 && bound > 0 && bound < g.min && pending > 0
	if g.startedWith > 0 && bound >= g.startedWith {
		// Running as it started; a raised minimum waits for more members
		// without taking the running ones away.
		partial = false
	}
	switch {
	case !partial:
		g.partialSince = time.Time{}
	case g.partialSince.IsZero():
		g.partialSince = lc.clock.Now()
	}
}

// Stranded returns gangs that have been partly bound, with no plan and no
// reservation, for longer than their timeout, and that cannot be completed:
// their last plan failed, or fewer members exist than the quorum. They hold
// capacity they cannot use, so their bound members should go.
func (lc *Lifecycle) Stranded(defaultTimeout time.Duration) []Ref {
	lc.mu.Lock()
	defer lc.unlock()
	now := lc.clock.Now()
	var out []Ref
	for ref, g := range lc.gangs {
		if g.partialSince.IsZero() || g.phase == PhasePlanned || g.phase == PhaseReserving {
			continue
		}
		if !g.failed && len(g.members) >= g.min {
			continue
		}
		timeout := g.timeout
		if timeout <= 0 {
			timeout = defaultTimeout
		}
		if now.Sub(g.partialSince) >= timeout {
			out = append(out, ref)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// BoundMembers returns the members the API shows bound.
func (lc *Lifecycle) BoundMembers(ref Ref) []types.UID {
	lc.mu.Lock()
	defer lc.unlock()
	var out []types.UID
	if g := lc.gangs[ref]; g != nil {
		for uid, m := range g.members {
			if m.state == memberBound {
				out = append(out, uid)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }
