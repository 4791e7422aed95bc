package gang

import (
	"context"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/phalanx-sched/phalanx/internal/devices"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Manager owns a gang's decisions: plan or fail, reserve when starved, make
// room by whole-gang preemption or reclaim, and the dry run that counts how
// many whole copies of a gang fit. It keeps the lifecycle (members, plans,
// holds) and reaches the scheduler only through its ports.
type Manager struct {
	*Lifecycle
	dir Directory
	fx  Effects
	// devices allocates members' DRA devices as plans are made; nil when
	// the scheduler does not serve DRA.
	devices *devices.Devices
	// Timeout is a plan's default time to reach its quorum; a gang's own
	// timeout wins.
	Timeout time.Duration
	// ReserveAfter is how long a gang fails to plan before it reserves.
	ReserveAfter time.Duration
	// Workload is the GPU pod shapes seen, whose room plans keep whole
	// (nil or empty: no fragmentation tie-break).
	Workload *ShapeHistory
	// Consolidation moves running gangs to free a domain for a gang that
	// waits for one (off while its After is 0).
	Consolidation Consolidation
	consolidated  consolidationLog
	// requests caches pods' requests when devices is nil (Devices has its
	// own).
	requests resources.RequestCache
}

// NewManager returns a manager over lc. devices may be nil.
func NewManager(lc *Lifecycle, dir Directory, fx Effects, dev *devices.Devices) *Manager {
	return &Manager{Lifecycle: lc, dir: dir, fx: fx, devices: dev}
}

// FragmentationAfter is how much placing one pod of request on node raises
// the expected GPU fragmentation for the workload (FragmentationDelta), on
// the node's free room net of what gangs hold against priority.
func (m *Manager) FragmentationAfter(node string, free, request resources.List, priority int32, workload []WorkloadShape) float64 {
	if held, _ := m.Held(node, Ref{}, priority); held != nil {
		free = free.Clone()
		free.Sub(held)
	}
	return FragmentationDelta(free, request, 1, workload)
}

// Demand is a pod's request as plans and queues count it: its DRA devices
// count as their classes' queue resources. The list may be shared
// (resources.RequestCache): callers must not change it.
func (m *Manager) Demand(pod *v1.Pod) resources.List {
	if m.devices == nil {
		return m.requests.Of(pod)
	}
	return m.devices.Demand(pod)
}

func (m *Manager) demand() DemandFunc {
	if m.devices == nil {
		return nil
	}
	return m.devices.Demand
}

// Attempt is one scheduling cycle's question about a pod: plan its gang, or
// make room for it. The adapter fills it from the cycle; the manager keeps
// what it learns (the view) for the rest of the cycle.
type Attempt struct {
	Pod      *v1.Pod
	Ref      Ref   // zero outside gangs
	Spec     *Spec // nil outside gangs
	Priority int32
	// Prober runs the filters for the member on every node.
	Prober Prober
	// Queue, Limiter and Topology are the other plugins' parts; nil where a
	// plugin is not enabled.
	Queue    *Admission
	Limiter  Limiter
	Topology *Constraint

	groups []ShapeGroup
	// boundIn is, in a gang of sub-groups, the domain of each sub-group's
	// members already bound: the rest of it goes there too.
	boundIn map[string]string
	view    *View
	placed  int
	// devices is the attempt's device view (nil when no member asks for
	// devices); uncounted are the device resources whose node arithmetic
	// is the allocator's.
	devices   *devices.Session
	uncounted map[v1.ResourceName]bool
}

// Quorum is the number of members that must be placed together: the gang's
// minimum, or for an elastic gang of sub-groups its minimum of whole
// sub-groups.
func Quorum(spec *Spec) int {
	if sg := spec.SubGroups; sg != nil && sg.Min > 0 && sg.Size > 0 {
		return sg.Min * sg.Size
	}
	return max(spec.MinMember, 1)
}

// Plan places the gang's remaining minimum: the filters' verdict for the
// member on every node, each node sized by arithmetic net of what other gangs
// hold, the topology constraint and NUMA zones, then the planner. A plan is
// committed and holds its capacity; it returns the member's planned node. No
// plan fails the gang until capacity changes — and, for a gang that waited
// long enough, reserves the nodes it waits for — and returns why.
func (m *Manager) Plan(ctx context.Context, a *Attempt) (string, error) {
	logger := klog.FromContext(ctx)
	start := m.Now()
	ref, spec := a.Ref, a.Spec
	// A failure is stamped with the capacity version seen before the probe:
	// a change during the plan voids it.
	version := m.Version()
	a.placed = m.Placed(ref)
	needed := Quorum(spec) - a.placed
	pending := m.dir.Pending(ref)
	if needed <= 0 && spec.SubGroups != nil {
		// A started gang of sub-groups grows by one whole sub-group: the
		// cycle pod's.
		needed = spec.SubGroups.Size
		own := spec.SubGroups.Of(a.Pod)
		mine := pending[:0:0]
		for _, p := range pending {
			if spec.SubGroups.Of(p) == own {
				mine = append(mine, p)
			}
		}
		pending = mine
	}
	if m.devices != nil {
		// A group-level claim is the gang's while any member is placed: its
		// first member may be mid-bind.
		if freed := m.devices.FreeStale(ctx, pending, a.placed == 0); len(freed) > 0 {
			// This cycle read the claims as they were (the DynamicResources
			// PreFilter ran first): plan in a fresh cycle, which the claims'
			// update events start.
			logger.V(2).Info("Freed claims allocated for members that never bound", "gang", ref, "claims", freed)
			return "", fmt.Errorf("freed %d claims allocated for members that never bound; planning again", len(freed))
		}
	}
	if sg := spec.SubGroups; sg != nil {
		why := sg.Err
		switch {
		case why != "":
		case a.Topology == nil:
			why = "sub-groups need the NetworkTopology plugin in the profile"
		case a.Topology.SubErr != "":
			why = a.Topology.SubErr
		}
		if why != "" {
			msg := InvalidSubGroupsMessage(why)
			m.fx.SetCondition(spec, ReasonInvalidSubGroups, msg)
			m.FailAt(ref, a.Pod.UID, msg, version)
			return "", fmt.Errorf("%s", msg)
		}
	}
	var short string
	var bound map[string]int
	bound, a.boundIn = m.boundBySubGroup(a)
	a.groups, short = GroupForPlan(spec, a.Pod, pending, needed, m.demand(), bound)
	if have := Members(a.groups); have < needed {
		msg := fmt.Sprintf("%d members are placed and %d wait, fewer than minMember %d", a.placed, have, Quorum(spec))
		if short != "" {
			msg = fmt.Sprintf("%s (%d members placed)", short, a.placed)
		}
		m.fx.SetCondition(spec, ReasonMembersPending, msg)
		return "", fmt.Errorf("%s", msg)
	}
	a.view = a.Prober.Probe(ctx, a.Pod)
	if a.view == nil || ctx.Err() != nil {
		// The cycle ended under the probe (the scheduler stops): decide
		// nothing from a partial view.
		a.view = nil
		return "", fmt.Errorf("planning interrupted: %v", context.Cause(ctx))
	}
	if a.Queue != nil && !a.Queue.Admitted {
		// Refused by its queue: nothing is planned; the caller may reclaim.
		return "", fmt.Errorf("%s", a.Queue.Refusal)
	}
	m.openDevices(ctx, a)
	req, constraint := m.request(a, m.room(a, nil), false)
	plan, diag := m.place(a, req)
	if plan == nil {
		m.fx.Observe("unschedulable", m.Now().Sub(start))
		msg := DescribeFailure(diag, a.placed, Quorum(spec), constraint, req, a.view.NodeNames(), a.view.Verdicts)
		if a.devices != nil {
			if why := a.devices.Explain(needed); why != "" {
				msg += "; " + why
			}
		}
		logger.V(2).Info("Gang cannot be placed", "gang", ref, "reason", msg)
		m.FailAt(ref, a.Pod.UID, msg, version)
		reason := ReasonUnschedulable
		if note, ok := m.reserve(ctx, a); ok {
			msg, reason = note, ReasonReserving
		} else if note != "" {
			msg += "; " + note
		}
		m.fx.SetCondition(spec, reason, msg)
		m.FailCost(ref, m.Now().Sub(start)+FailedCycleOverhead)
		return "", fmt.Errorf("%s", msg)
	}
	_, shapes := Shapes(a.groups)
	m.CommitPlan(ref, plan, shapes, m.scheduleTimeout(spec))
	if a.devices != nil {
		a.devices.Commit(ref.String())
	}
	m.fx.Observe("planned", m.Now().Sub(start))
	logger.V(3).Info("Gang planned", "gang", ref, "members", plan.Members(), "nodes", len(plan.Slots))
	// Siblings come next in the queue order; wake those that wait elsewhere.
	m.fx.Wake(ref)
	node, _ := m.NextSlot(ref, MemberShape(spec, a.Pod))
	// Only a failed plan's view is read again (MakeRoom).
	a.view, a.devices = nil, nil
	return node, nil
}

// room is node i's room for the attempt: free net of what other gangs hold,
// plus what victims would free.
func (m *Manager) room(a *Attempt, freed map[string]Usage) Capacity {
	claimant := Claimant{Ref: a.Ref, Priority: a.Priority, Ends: m.endsBy(a)}
	return func(i int) (resources.List, int64) {
		ns := a.view.Nodes[i]
		free, pods := ns.Free.Clone(), ns.FreePods
		held, heldPods := m.HeldFrom(ns.Node.Name, claimant)
		free.Sub(held)
		if f, ok := freed[ns.Node.Name]; ok {
			free.Add(f.Request)
			pods += f.Pods
		}
		a.leaveDevicesToAllocator(free)
		return free, pods - heldPods
	}
}

// request builds the planner's request from the attempt's view: candidate
// nodes sized by room (relaxed: nodes that fail for capacity only are
// candidates too), NUMA zones and the topology constraint.
func (m *Manager) request(a *Attempt, room Capacity, relaxed bool) (Request, string) {
	shapes, _ := Shapes(a.groups)
	var limiter Limiter = a.Limiter
	if a.devices != nil {
		limiter = Limiters{a.Limiter, a.devices}
	}
	req := Request{Shapes: shapes, Nodes: CandidateNodes(a.groups, a.view.Nodes, a.view.Verdicts, room, relaxed, limiter),
		Workload: m.Workload.Workload(m.Now())}
	if a.Spec == nil {
		return req, ""
	}
	if a.Topology == nil {
		required, _ := TopologyConstraint(a.Spec.Annotations, a.groups[0].Rep.Annotations)
		req.Required = required
		if required != "" {
			return req, "required " + required + " (the NetworkTopology plugin is not enabled)"
		}
		return req, ""
	}
	req.Constrain(a.Topology.Tree, a.Topology.Required, a.Topology.Preferred, m.PlacedNodes(a.Ref))
	if sg := a.Spec.SubGroups; sg != nil {
		req.SubGroups = SubGroupsOf(shapes)
		for i := range req.SubGroups {
			req.SubGroups[i].In = a.boundIn[req.SubGroups[i].Key]
		}
		req.SubLevel, req.SubPreferred = a.Topology.SubRequired, false
		if req.SubLevel == "" {
			req.SubLevel, req.SubPreferred = a.Topology.SubPreferred, true
		}
	}
	return req, DescribeConstraint(a.Topology.Required, a.Topology.Preferred)
}

func (m *Manager) scheduleTimeout(spec *Spec) time.Duration {
	if spec.Timeout > 0 {
		return spec.Timeout
	}
	return m.Timeout
}

// reserve gives a gang that has waited at least ReserveAfter a reservation:
// the nodes it would take once running pods of equal or lower priority leave
// are held against gangs of equal or lower priority, which only backfill
// what the reservation does not need. One gang per queue holds one, the
// first in the queue's order; reservations never overlap, and none is made
// for a gang that cannot fit the cluster at all. It returns what the gang's
// condition should say, and whether the gang holds a reservation.
func (m *Manager) reserve(ctx context.Context, a *Attempt) (string, bool) {
	ref, spec := a.Ref, a.Spec
	if r, ok := m.ReservationOf(ref); ok {
		switch r.Kind {
		case ReservationPreempting:
			return reservationNote(r, a.view, "preempted victims are leaving"), true
		case ReservationMoved:
			return reservationNote(r, a.view, "consolidation moved the gang here; its pods come back to it"), true
		}
	}
	since := m.WaitingSince(ref)
	if since.IsZero() || m.Now().Sub(since) < m.ReserveAfter {
		if _, ok := m.ReservationOf(ref); ok {
			m.DropReservation(ref)
		}
		return "", false
	}
	// Room once running pods of equal or lower priority leave, net of what
	// every other gang holds (reservations do not overlap).
	n := len(a.view.Nodes)
	if a.devices != nil {
		// Devices of the pods it may wait for count as free.
		var leaving []*v1.Pod
		for i := range a.view.Nodes {
			for _, p := range a.view.PodsOn(i) {
				if m.dir.PriorityOf(p) <= a.Priority {
					leaving = append(leaving, p)
				}
			}
		}
		defer a.devices.Without(leaving)()
	}
	queueName := ""
	if a.Queue != nil {
		queueName = a.Queue.Queue
	}
	ask := ReservationRequest{Kind: ReservationStarved, Queue: queueName, Priority: a.Priority, Created: spec.Created}
	future, futurePods, busy := make([]resources.List, n), make([]int64, n), make([]int64, n)
	unheld, unheldPods := make([]resources.List, n), make([]int64, n)
	othersHold := false
	for i, ns := range a.view.Nodes {
		f, pods, b := m.futureRoom(ns, a.view.PodsOn(i), a.Priority)
		a.leaveDevicesToAllocator(f)
		unheld[i], unheldPods[i] = f.Clone(), pods
		// A reservation of its queue behind it is no obstacle: Reserve
		// moves it to this gang.
		held, heldPods := m.HeldAhead(ns.Node.Name, ask, ref)
		othersHold = othersHold || !held.IsZero() || heldPods > 0
		f.Sub(held)
		future[i], futurePods[i], busy[i] = f, pods-heldPods, b
	}
	placeOn := func(room []resources.List, pods []int64) *Plan {
		req, _ := m.request(a, func(i int) (resources.List, int64) { return room[i], pods[i] }, true)
		for i := range req.Nodes {
			if j, ok := a.view.index(req.Nodes[i].Name); ok {
				req.Nodes[i].Busy = busy[j]
			}
		}
		plan, _ := m.place(a, req)
		return plan
	}
	plan := placeOn(future, futurePods)
	if plan == nil {
		if r, ok := m.ReservationOf(ref); ok && r.Kind == ReservationStarved {
			m.DropReservation(ref)
		}
		if othersHold && placeOn(unheld, unheldPods) != nil {
			// Say so: it would fit once pods leave, but that room is
			// already promised to gangs ahead of it.
			return "nothing is reserved for it yet: the room it would wait for is held for gangs ahead of it", false
		}
		return "nothing is reserved: the gang does not fit the cluster even when pods of equal or lower priority leave", false
	}
	_, ask.Shapes = Shapes(a.groups)
	ask.Plan, ask.ReadyBy = plan, m.readyBy(a, plan)
	granted, displaced := m.Reserve(ref, ask)
	if !displaced.IsZero() {
		klog.FromContext(ctx).V(2).Info("Reservation moved to a gang ahead in the queue", "from", displaced, "to", ref)
		m.fx.WakeOne(displaced, WakeDisplaced)
	}
	if !granted {
		return fmt.Sprintf("waiting behind another gang of queue %q that holds the queue's reservation", queueName), false
	}
	r, _ := m.ReservationOf(ref)
	m.fx.Observe("reserved", 0)
	return reservationNote(r, a.view, "gangs of equal or lower priority only backfill around it"), true
}

// EndsBy is when a pod is sure to be gone if it starts now: its
// activeDeadlineSeconds from now (zero: no limit).
func EndsBy(pod *v1.Pod, now time.Time) time.Time {
	if d := pod.Spec.ActiveDeadlineSeconds; d != nil && *d > 0 {
		return now.Add(time.Duration(*d) * time.Second)
	}
	return time.Time{}
}

// endsBy is EndsBy for the attempt's pod and every pending shape of its
// gang: the latest, or zero if one has no limit.
func (m *Manager) endsBy(a *Attempt) time.Time {
	now := m.Now()
	end := EndsBy(a.Pod, now)
	for _, g := range a.groups {
		e := EndsBy(g.Rep, now)
		if e.IsZero() || end.IsZero() {
			return time.Time{}
		}
		if e.After(end) {
			end = e
		}
	}
	return end
}

// readyBy is the latest the plan's room is free: when the last pod of equal
// or lower priority on its nodes reaches its activeDeadlineSeconds (zero
// when one has no limit).
func (m *Manager) readyBy(a *Attempt, plan *Plan) time.Time {
	ready := m.Now()
	for i, ns := range a.view.Nodes {
		if _, used := plan.Slots[ns.Node.Name]; !used {
			continue
		}
		for _, p := range a.view.PodsOn(i) {
			if p.DeletionTimestamp != nil || m.dir.PriorityOf(p) > a.Priority {
				continue
			}
			d := p.Spec.ActiveDeadlineSeconds
			if d == nil || *d <= 0 {
				return time.Time{}
			}
			if end := boundAt(p).Add(time.Duration(*d) * time.Second); end.After(ready) {
				ready = end
			}
		}
	}
	return ready
}

// futureRoom is a node's room for the gang once the pods it may wait for
// (equal or lower priority) leave; busy is how many pods hold that room now.
func (m *Manager) futureRoom(ns NodeState, running []*v1.Pod, priority int32) (resources.List, int64, int64) {
	free, pods := ns.Free.Clone(), ns.FreePods
	busy := int64(0)
	for _, p := range running {
		if m.dir.PriorityOf(p) > priority {
			continue
		}
		free.Add(resources.PodRequests(p))
		pods++
		busy++
	}
	return free, pods, busy
}

// reservationNote says what a reserving gang holds and how much of it is
// still in use.
func reservationNote(r Reservation, view *View, tail string) string {
	members, waiting := 0, 0
	for node, byShape := range r.Slots {
		i, ok := view.index(node)
		for shape, n := range byShape {
			members += n
			if !ok {
				waiting += n
				continue
			}
			fit := view.Nodes[i].Free.Copies(r.Shapes[shape], int64(n))
			waiting += n - int(min(fit, view.Nodes[i].FreePods))
		}
	}
	return fmt.Sprintf("reserving %d nodes for %d members since %s; room for %d of them is still in use by running pods; %s",
		len(r.Slots), members, r.Since.UTC().Format(time.RFC3339), max(waiting, 0), tail)
}

// Route is what a member's cycle does, decided before any filter runs.
type Route struct {
	// Node: steer the member to its planned node.
	Node string
	// Refusal: the gang's last plan failed and nothing changed since.
	Refusal string
	// Plan: this cycle plans the gang.
	Plan bool
}

// Route decides a member's cycle: a gang with its quorum schedules further
// members as capacity allows; a planned gang steers the member to its next
// slot (or lets an extra member of another shape pass); a gang paused after
// a timed-out plan, or whose plan failed, is turned away until the pause ends
// or capacity changes; any other gang is planned.
func (m *Manager) Route(ref Ref, spec *Spec, shape string) Route {
	node, live := m.NextSlot(ref, shape)
	if live && node != "" {
		return Route{Node: node}
	}
	if sg := spec.SubGroups; sg != nil && sg.Of != nil && sg.Err == "" {
		// A gang of sub-groups: a member beyond the plan never goes alone.
		return m.routeSubGroup(ref, spec, shape, live)
	}
	if m.Placed(ref) >= Quorum(spec) {
		return Route{}
	}
	if live {
		return Route{Node: node}
	}
	return m.routeToPlan(ref)
}

// routeToPlan turns the member away while the gang's pause after a timeout
// or its cached failure stands, else plans.
func (m *Manager) routeToPlan(ref Ref) Route {
	if until, paused := m.Paused(ref); paused {
		return Route{Refusal: fmt.Sprintf("the gang's last plan ended at its timeout; it plans again at %s and holds nothing until then",
			until.UTC().Format(time.RFC3339))}
	}
	if reason, failed := m.Failed(ref); failed {
		return Route{Refusal: reason}
	}
	return Route{Plan: true}
}

// boundBySubGroup counts the gang's bound members per sub-group and where
// they are at the sub-groups' level (BoundBySubGroup).
func (m *Manager) boundBySubGroup(a *Attempt) (map[string]int, map[string]string) {
	if a.Spec.SubGroups == nil {
		return nil, nil
	}
	var topo Topology
	li := -1
	if a.Topology != nil && a.Topology.Tree != nil {
		topo = a.Topology.Tree
		li = slices.Index(topo.Levels(), a.Topology.SubRequired+a.Topology.SubPreferred)
	}
	return BoundBySubGroup(a.Spec, m.dir.Members(a.Ref), topo, li)
}

// routeSubGroup routes a member of a gang of sub-groups that its gang's plan
// has no slot for: while a plan is being placed, it waits for it; before the
// quorum, the gang is planned; after it, the member's sub-group is planned
// whole when all its members are there and none is placed, waits for its
// members when some are missing, and joins freely when the sub-group
// already has placed members (a replacement).
func (m *Manager) routeSubGroup(ref Ref, spec *Spec, shape string, planLive bool) Route {
	sg := spec.SubGroups
	own := SubGroupOfShape(shape)
	if planLive {
		return Route{Refusal: fmt.Sprintf("sub-group %s waits for the gang's plan being placed now; it is planned whole after", own)}
	}
	if m.Placed(ref) < Quorum(spec) {
		return m.routeToPlan(ref)
	}
	if own == "" {
		return Route{Refusal: "the member has no rank: it belongs to no sub-group (label scheduling.phalanx.dev/rank or its operator's index label)"}
	}
	for key, n := range m.PlacedShapes(ref) {
		if n > 0 && SubGroupOfShape(key) == own {
			return Route{}
		}
	}
	for _, p := range m.dir.Members(ref) {
		if p.Spec.NodeName != "" && sg.Of(p) == own {
			return Route{}
		}
	}
	pending := 0
	for _, p := range m.dir.Pending(ref) {
		if sg.Of(p) == own {
			pending++
		}
	}
	if pending < sg.Size {
		return Route{Refusal: fmt.Sprintf("sub-group %s has %d of its %d members pending; it is planned whole once all are there", own, pending, sg.Size)}
	}
	return m.routeToPlan(ref)
}

// Fits reports whether a pod asking request fits a node's free room once
// what other gangs' plans and reservations hold there is taken away. room
// is asked only when something is held there (Filter runs per node and pod)
// and returns a list Fits may change.
func (m *Manager) Fits(node string, c Claimant, request resources.List, room func() (resources.List, int64)) bool {
	held, heldPods := m.HeldFrom(node, c)
	if held == nil && heldPods == 0 {
		return true
	}
	free, freePods := room()
	if m.devices != nil {
		// Devices the node does not publish as allocatable are the
		// allocator's to count (the DynamicResources filter). Classes are
		// listed only for a request that names such a resource.
		var names sets.Set[v1.ResourceName]
		for name := range request {
			if _, published := free[name]; published {
				continue
			}
			if names == nil {
				names, request = m.devices.ResourceNames(), request.Clone()
			}
			if names.Has(name) {
				delete(request, name)
			}
		}
	}
	free.Sub(held)
	return freePods-heldPods >= 1 && free.Fits(request)
}

// MissedSlot tears down, once, the plan of a gang whose member fits no node
// although it was steered to its planned one; it returns why, or false
// when the gang has its quorum (no plan to break).
func (m *Manager) MissedSlot(ref Ref, spec *Spec, member, shape string) (string, bool) {
	if m.Placed(ref) >= Quorum(spec) {
		return "", false
	}
	node, _ := m.NextSlot(ref, shape)
	msg := fmt.Sprintf("plan broken: member %s does not fit its planned node %s; replanning the gang", member, node)
	m.Release(ref, ReasonPlanBroken, msg)
	return msg, true
}
