// Package gang is the whole-gang core: the manager that plans a gang's
// minimum before anything is reserved, reserves for it when starved and
// makes room for it, over the sub-packages that hold its parts (gangspec,
// lifecycle, planner, preempt, consolidate, copies, starvation).
package gang

import (
	"context"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/phalanx-sched/phalanx/internal/devices"
	"github.com/phalanx-sched/phalanx/internal/gang/consolidate"
	"github.com/phalanx-sched/phalanx/internal/gang/expected"
	"github.com/phalanx-sched/phalanx/internal/gang/fragment"
	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/lifecycle"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
	"github.com/phalanx-sched/phalanx/internal/gang/preempt"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Manager owns a gang's decisions: plan or fail, reserve when starved, make
// room by whole-gang preemption or reclaim, and the dry run that counts how
// many whole copies of a gang fit. It keeps the lifecycle (members, plans,
// holds) and reaches the scheduler only through its ports.
type Manager struct {
	*lifecycle.Lifecycle
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
	Workload *fragment.ShapeHistory
	// Consolidation moves running gangs to free a domain for a gang that
	// waits for one (off while its After is 0).
	Consolidation consolidate.Config
	consolidated  consolidate.Log
	// requests caches pods' requests when devices is nil (Devices has its
	// own).
	requests resources.RequestCache
}

// NewManager returns a manager over lc. devices may be nil.
func NewManager(lc *lifecycle.Lifecycle, dir Directory, fx Effects, dev *devices.Devices) *Manager {
	return &Manager{Lifecycle: lc, dir: dir, fx: fx, devices: dev}
}

// FragmentationAfter is how much placing one pod of request on node raises
// the expected GPU fragmentation for the workload (FragmentationDelta), on
// the node's free room net of what gangs hold against priority.
func (m *Manager) FragmentationAfter(node string, free, request resources.List, priority int32, workload []fragment.WorkloadShape) float64 {
	if held, _ := m.Held(node, ident.Ref{}, priority); held != nil {
		free = free.Clone()
		free.Sub(held)
	}
	return fragment.FragmentationDelta(free, request, 1, workload)
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

func (m *Manager) demand() planner.DemandFunc {
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
	Ref      ident.Ref      // zero outside gangs
	Spec     *gangspec.Spec // nil outside gangs
	Priority int32
	// Prober runs the filters for the member on every node.
	Prober Prober
	// Queue, Limiter and Topology are the other plugins' parts; nil where a
	// plugin is not enabled.
	Queue    *Admission
	Limiter  planner.Limiter
	Topology *Constraint

	groups []planner.ShapeGroup
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

// Plan places the gang's remaining minimum: the filters' verdict for the
// member on every node, each node sized by arithmetic net of what other gangs
// hold, the topology constraint and NUMA zones, then the planner. A plan is
// committed and holds its capacity; it returns the member's planned node. No
// plan fails the gang until capacity changes — and, for a gang that waited
// long enough, reserves the nodes it waits for — and returns why.
func (m *Manager) Plan(ctx context.Context, a *Attempt) (string, error) {
	// A failure is stamped with the capacity version seen before the probe:
	// a change during the plan voids it.
	p := &planRun{start: m.Now(), version: m.Version()}
	a.placed = m.Placed(a.Ref)
	p.needed, p.pending = m.toPlace(a)
	if err := m.freeStaleClaims(ctx, a, p.pending); err != nil {
		return "", err
	}
	if err := m.checkSubGroups(a, p.version); err != nil {
		return "", err
	}
	if err := m.groupMembers(a, p); err != nil {
		return "", err
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
		return "", m.planFailed(ctx, a, p, req, diag, constraint)
	}
	return m.commitPlan(ctx, a, p, plan), nil
}

// planRun is what one Plan call's steps share.
type planRun struct {
	start   time.Time
	version uint64
	// needed members are planned, out of pending.
	needed  int
	pending []*v1.Pod
}

// toPlace is how many members the plan places and the pending members it
// chooses them from.
func (m *Manager) toPlace(a *Attempt) (int, []*v1.Pod) {
	spec := a.Spec
	needed := gangspec.Quorum(spec) - a.placed
	pending := m.dir.Pending(a.Ref)
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
	return needed, pending
}

// freeStaleClaims frees the claims allocated for members that never bound;
// an error says the gang plans again in a fresh cycle.
func (m *Manager) freeStaleClaims(ctx context.Context, a *Attempt, pending []*v1.Pod) error {
	if m.devices == nil {
		return nil
	}
	// A group-level claim is the gang's while any member is placed: its
	// first member may be mid-bind.
	if freed := m.devices.FreeStale(ctx, pending, a.placed == 0); len(freed) > 0 {
		// This cycle read the claims as they were (the DynamicResources
		// PreFilter ran first): plan in a fresh cycle, which the claims'
		// update events start.
		klog.FromContext(ctx).V(2).Info("Freed claims allocated for members that never bound", "gang", a.Ref, "claims", freed)
		return fmt.Errorf("freed %d claims allocated for members that never bound; planning again", len(freed))
	}
	return nil
}

// checkSubGroups fails a gang whose sub-groups cannot be planned.
func (m *Manager) checkSubGroups(a *Attempt, version uint64) error {
	sg := a.Spec.SubGroups
	if sg == nil {
		return nil
	}
	why := sg.Err
	switch {
	case why != "":
	case a.Topology == nil:
		why = "sub-groups need the NetworkTopology plugin in the profile"
	case a.Topology.SubErr != "":
		why = a.Topology.SubErr
	}
	if why == "" {
		return nil
	}
	msg := gangspec.InvalidSubGroupsMessage(why)
	m.fx.SetCondition(a.Spec, ReasonInvalidSubGroups, msg)
	m.FailAt(a.Ref, a.Pod.UID, msg, version)
	return fmt.Errorf("%s", msg)
}

// groupMembers groups the members to plan by shape (a.groups); too few
// members wait.
func (m *Manager) groupMembers(a *Attempt, p *planRun) error {
	var short string
	var bound map[string]int
	bound, a.boundIn = m.boundBySubGroup(a)
	a.groups, short = gangspec.GroupForPlan(a.Spec, a.Pod, p.pending, p.needed, m.demand(), bound)
	if have := planner.Members(a.groups); have < p.needed {
		msg := fmt.Sprintf("%d members are placed and %d wait, fewer than minMember %d", a.placed, have, gangspec.Quorum(a.Spec))
		if short != "" {
			msg = fmt.Sprintf("%s (%d members placed)", short, a.placed)
		}
		m.fx.SetCondition(a.Spec, ReasonMembersPending, msg)
		return fmt.Errorf("%s", msg)
	}
	return nil
}

// planFailed caches why the gang does not fit, reserves for it when it has
// waited long enough, and returns the reason.
func (m *Manager) planFailed(ctx context.Context, a *Attempt, p *planRun, req planner.Request, diag *planner.Diagnosis, constraint string) error {
	ref, spec := a.Ref, a.Spec
	m.fx.Observe("unschedulable", m.Now().Sub(p.start))
	msg := planner.DescribeFailure(diag, a.placed, gangspec.Quorum(spec), constraint, req, a.view.NodeNames(), a.view.Verdicts)
	if a.devices != nil {
		if why := a.devices.Explain(p.needed); why != "" {
			msg += "; " + why
		}
	}
	klog.FromContext(ctx).V(2).Info("Gang cannot be placed", "gang", ref, "reason", msg)
	m.FailAt(ref, a.Pod.UID, msg, p.version)
	reason := ReasonUnschedulable
	if note, ok := m.reserve(ctx, a); ok {
		msg, reason = note, ReasonReserving
	} else if note != "" {
		msg += "; " + note
	}
	// Bad input is named, not silently dropped: such a gang cannot backfill.
	for _, annotations := range []map[string]string{a.Pod.Annotations, spec.Annotations} {
		if why := expected.Invalid(annotations); why != "" {
			msg += "; ignored: " + why
			break
		}
	}
	m.fx.SetCondition(spec, reason, msg)
	m.FailCost(ref, m.Now().Sub(p.start)+lifecycle.FailedCycleOverhead)
	return fmt.Errorf("%s", msg)
}

// commitPlan commits the plan, wakes the gang's members and returns the
// cycle member's planned node.
func (m *Manager) commitPlan(ctx context.Context, a *Attempt, p *planRun, plan *planner.Plan) string {
	ref, spec := a.Ref, a.Spec
	_, shapes := planner.Shapes(a.groups)
	m.CommitPlan(ref, plan, shapes, m.scheduleTimeout(spec))
	if a.devices != nil {
		a.devices.Commit(ref.String())
	}
	m.fx.Observe("planned", m.Now().Sub(p.start))
	klog.FromContext(ctx).V(3).Info("Gang planned", "gang", ref, "members", plan.Members(), "nodes", len(plan.Slots))
	// Siblings come next in the queue order; wake those that wait elsewhere.
	m.fx.Wake(ref)
	node, _ := m.NextSlot(ref, gangspec.MemberShape(spec, a.Pod))
	// Only a failed plan's view is read again (MakeRoom).
	a.view, a.devices = nil, nil
	return node
}

// room is node i's room for the attempt: free net of what other gangs hold,
// plus what victims would free.
func (m *Manager) room(a *Attempt, freed map[string]preempt.Usage) planner.Capacity {
	claimant := lifecycle.Claimant{Ref: a.Ref, Priority: a.Priority, Ends: m.endsBy(a)}
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
func (m *Manager) request(a *Attempt, room planner.Capacity, relaxed bool) (planner.Request, string) {
	shapes, _ := planner.Shapes(a.groups)
	var limiter planner.Limiter = a.Limiter
	if a.devices != nil {
		limiter = planner.Limiters{a.Limiter, a.devices}
	}
	req := planner.Request{Shapes: shapes, Nodes: planner.CandidateNodes(a.groups, a.view.Nodes, a.view.Verdicts, room, relaxed, limiter),
		Workload: m.Workload.Workload(m.Now())}
	if a.Spec == nil {
		return req, ""
	}
	if a.Topology == nil {
		required, _ := gangspec.TopologyConstraint(a.Spec.Annotations, a.groups[0].Rep.Annotations)
		req.Required = required
		if required != "" {
			return req, "required " + required + " (the NetworkTopology plugin is not enabled)"
		}
		return req, ""
	}
	req.Constrain(a.Topology.Tree, a.Topology.Required, a.Topology.Preferred, m.PlacedNodes(a.Ref))
	if sg := a.Spec.SubGroups; sg != nil {
		req.SubGroups = planner.SubGroupsOf(shapes)
		for i := range req.SubGroups {
			req.SubGroups[i].In = a.boundIn[req.SubGroups[i].Key]
		}
		req.SubLevel, req.SubPreferred = a.Topology.SubRequired, false
		if req.SubLevel == "" {
			req.SubLevel, req.SubPreferred = a.Topology.SubPreferred, true
		}
	}
	return req, planner.DescribeConstraint(a.Topology.Required, a.Topology.Preferred)
}

func (m *Manager) scheduleTimeout(spec *gangspec.Spec) time.Duration {
	if spec.Timeout > 0 {
		return spec.Timeout
	}
	return m.Timeout
}

// boundBySubGroup counts the gang's bound members per sub-group and where
// they are at the sub-groups' level (BoundBySubGroup).
func (m *Manager) boundBySubGroup(a *Attempt) (map[string]int, map[string]string) {
	if a.Spec.SubGroups == nil {
		return nil, nil
	}
	var topo planner.Topology
	li := -1
	if a.Topology != nil && a.Topology.Tree != nil {
		topo = a.Topology.Tree
		li = slices.Index(topo.Levels(), a.Topology.SubRequired+a.Topology.SubPreferred)
	}
	return gangspec.BoundBySubGroup(a.Spec, m.dir.Members(a.Ref), topo, li)
}
