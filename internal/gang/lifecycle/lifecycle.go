// Package lifecycle tracks every gang the scheduler works on: its members,
// its plan or reservation and the capacity they hold on nodes, its cached
// plan failures and pauses. It decides a plan's end and reports it once.
package lifecycle

import (
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
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
	Released(ref ident.Ref, reserved []types.UID, reason, message string)
}

// ResumeListener is a Listener that also hears when a gang's pause after a
// timed-out plan ends (Paused), outside the lifecycle's lock, so its members
// can be woken to plan again. It must not block.
type ResumeListener interface {
	Resumed(ref ident.Ref)
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
	HoldsChanged(ref ident.Ref)
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
	gangs map[ident.Ref]*gangState
	// holds indexes gangs with open slots by node, so that Held costs
	// O(gangs holding that node).
	holds map[string]map[ident.Ref]*gangState
	// version counts capacity changes; plan failures are cached per version.
	version    uint64
	generation uint64
	// heldChanged: gangs whose holds changed under the lock, told to the
	// HoldsListener by unlock.
	heldChanged map[ident.Ref]struct{}
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
func (lc *Lifecycle) holdsChangedLocked(ref ident.Ref) {
	if lc.heldChanged == nil {
		lc.heldChanged = map[ident.Ref]struct{}{}
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
	ref     ident.Ref
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
	return &Lifecycle{clock: clk, listener: l, gangs: map[ident.Ref]*gangState{}, holds: map[string]map[ident.Ref]*gangState{}}
}

// Tracked is how many gangs the lifecycle keeps state for.
func (lc *Lifecycle) Tracked() int {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return len(lc.gangs)
}

// Tracks reports whether the lifecycle keeps state for the gang.
func (lc *Lifecycle) Tracks(ref ident.Ref) bool {
	lc.mu.Lock()
	defer lc.unlock()
	_, ok := lc.gangs[ref]
	return ok
}

// Now is the lifecycle's clock.
func (lc *Lifecycle) Now() time.Time { return lc.clock.Now() }

// AfterFunc runs f after d on the lifecycle's clock.
func (lc *Lifecycle) AfterFunc(d time.Duration, f func()) { lc.clock.AfterFunc(d, f) }

func (lc *Lifecycle) gang(ref ident.Ref) *gangState {
	g := lc.gangs[ref]
	if g == nil {
		g = &gangState{ref: ref, phase: PhaseIdle, members: map[types.UID]*member{}}
		lc.gangs[ref] = g
	}
	return g
}

// SetSpec records the gang's quorum and timeout (from its group object).
func (lc *Lifecycle) SetSpec(ref ident.Ref, minMember int, timeout time.Duration) {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gang(ref)
	g.min, g.timeout = minMember, timeout
	lc.notePartialLocked(g)
}

func (lc *Lifecycle) notify(rel *release) {
	if rel != nil && lc.listener != nil {
		lc.listener.Released(rel.ref, rel.reserved, rel.reason, rel.message)
	}
}

// Forget removes everything known about a gang (its group object is gone).
func (lc *Lifecycle) Forget(ref ident.Ref) {
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
func (lc *Lifecycle) ForgetIfEmpty(ref ident.Ref) {
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

func itoa(n int) string { return strconv.Itoa(n) }
