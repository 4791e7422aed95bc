package coscheduling

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/internal/gang"
	"github.com/phalanx-sched/phalanx/internal/resources"
	"github.com/phalanx-sched/phalanx/plugins/runtime"
)

// planning is one cycle's plan of a gang.
//
// The plan asks every Filter plugin of the profile about the gang's member on
// every node. That can only be done once every PreFilter has run: until then
// the framework does not know which Filter plugins skip this pod, and calling
// them would fail. So PreFilter marks the cycle, and the first Filter call
// makes the plan, once, from the nodes PreFilter saw; the framework's other
// Filter calls of the cycle wait for it and then admit only the member's
// planned node. A profile that places Coscheduling first among Filter plugins
// (the canonical one does) always gets that call; otherwise PostFilter makes
// the plan when every node failed an earlier filter.
type planning struct {
	once   sync.Once
	nodes  []fwk.NodeInfo
	target string
	status *fwk.Status
	// probe is what the planner learned, kept for PostFilter when the gang
	// could not be placed.
	probe *probe
}

func newPlanning(nodes []fwk.NodeInfo) *planning {
	return &planning{nodes: nodes}
}

// run makes the plan once and returns the member's planned node, or why the
// gang cannot be placed.
func (p *planning) run(plan func() (string, *fwk.Status)) (string, *fwk.Status) {
	p.once.Do(func() { p.target, p.status = plan() })
	return p.target, p.status
}

// probe is the cluster as one planning attempt saw it.
type probe struct {
	groups   []gang.ShapeGroup
	nodes    []gang.NodeState
	infos    []fwk.NodeInfo
	verdicts []gang.Verdict
	// placed counts members already bound or reserved.
	placed int
}

// plan places the gang's remaining minimum: the filters' verdict for the
// member on every node (in parallel), each node sized by arithmetic net of
// what other gangs hold, the topology constraint and NUMA zones, then the
// planner. A plan is committed to the lifecycle and holds its capacity; no
// plan fails every member of the gang until capacity changes, and — for a
// gang that waited long enough — reserves the nodes it waits for.
func (pl *Coscheduling) plan(ctx context.Context, state fwk.CycleState, pod *v1.Pod, cs *cycleState, p *planning) (string, *fwk.Status) {
	logger := klog.FromContext(ctx)
	start := time.Now()
	ref, spec := cs.ref, cs.spec
	placed := pl.lc.Placed(ref)
	needed := quorum(spec) - placed
	groups := gang.GroupPending(pod, pl.gangs.Pending(ref), needed)
	if have := gang.Members(groups); have < needed {
		msg := fmt.Sprintf("%d members are placed and %d wait, fewer than minMember %d", placed, have, quorum(spec))
		pl.gangs.Status.Set(spec, runtime.Condition{Status: metav1.ConditionFalse, Reason: runtime.ReasonMembersPending, Message: msg})
		return "", fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	pr := pl.probe(ctx, state, pod, groups, p.nodes)
	pr.placed = placed
	p.probe = pr
	if qc := runtime.ReadQueueCycle(state); qc != nil && !qc.Admitted {
		// Refused by its queue: nothing is planned; PostFilter may reclaim.
		return "", fwk.NewStatus(fwk.UnschedulableAndUnresolvable, qc.Refusal)
	}

	room := func(i int) (resources.List, int64) {
		free, pods := pr.nodes[i].Free.Clone(), pr.nodes[i].FreePods
		held, heldPods := pl.lc.Held(pr.nodes[i].Node.Name, ref, cs.priority)
		free.Sub(held)
		return free, pods - heldPods
	}
	req, constraint := pl.request(state, pr, room, false)
	plan, diag := gang.Place(req)
	runtime.PlanDuration.Observe(time.Since(start).Seconds())
	if plan == nil {
		msg := gang.DescribeFailure(diag, placed, quorum(spec), constraint, req, nodeNames(pr.nodes), pr.verdicts)
		logger.V(2).Info("Gang cannot be placed", "gang", ref, "reason", msg)
		pl.lc.Fail(ref, pod.UID, msg)
		reason := runtime.ReasonUnschedulable
		if note, ok := pl.reserve(ctx, state, cs, pr); ok {
			msg, reason = note, runtime.ReasonReserving
		} else if note != "" {
			msg += "; " + note
		}
		pl.gangs.Status.Set(spec, runtime.Condition{Status: metav1.ConditionFalse, Reason: reason, Message: msg})
		runtime.PlanOutcomes.WithLabelValues("unschedulable").Inc()
		return "", fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	_, shapes := gang.Shapes(groups)
	// Only a failed plan's probe is read again (PostFilter); the member
	// keeps its cycle state while it waits in Permit, so let the probe go.
	p.probe, p.nodes = nil, nil
	pl.lc.CommitPlan(ref, plan, shapes, pl.scheduleTimeout(spec))
	runtime.PlanOutcomes.WithLabelValues("planned").Inc()
	logger.V(3).Info("Gang planned", "gang", ref, "members", plan.Members(), "nodes", len(plan.Slots), "duration", time.Since(start))
	// Siblings come next in the queue order; wake those that wait elsewhere.
	pl.gangs.Wake(ref)
	node, _ := pl.lc.NextSlot(ref, cs.shape)
	cs.steered = true
	return node, nil
}

// probe asks the profile's Filter plugins about the gang's member on every
// node, in parallel. The probe's state skips this plugin's own Filter: the
// planner accounts for held capacity itself.
func (pl *Coscheduling) probe(ctx context.Context, state fwk.CycleState, pod *v1.Pod, groups []gang.ShapeGroup, infos []fwk.NodeInfo) *probe {
	probeState := state.Clone()
	skip := sets.New[string](Name)
	if s := state.GetSkipFilterPlugins(); s != nil {
		skip = skip.Union(s)
	}
	probeState.SetSkipFilterPlugins(skip)
	pr := &probe{groups: groups, infos: infos, nodes: make([]gang.NodeState, len(infos)), verdicts: make([]gang.Verdict, len(infos))}
	pl.h.Parallelizer().Until(ctx, len(infos), func(i int) {
		ni := infos[i]
		free, pods := freeOn(ni)
		pr.nodes[i] = gang.NodeState{Node: ni.Node(), Free: free, FreePods: pods}
		pr.verdicts[i] = verdictOf(pl.h.RunFilterPluginsWithNominatedPods(ctx, probeState, pod, ni))
	}, Name)
	return pr
}

// resourcePlugins reject a node for lack of free capacity only: the member
// would fit there if pods left.
var resourcePlugins = sets.New("NodeResourcesFit", "NUMATopology")

func verdictOf(st *fwk.Status) gang.Verdict {
	if st.IsSuccess() {
		return gang.Verdict{Fits: true}
	}
	return gang.Verdict{
		Plugin:       st.Plugin(),
		Reasons:      st.Reasons(),
		ResourceOnly: st.Code() == fwk.Unschedulable && resourcePlugins.Has(st.Plugin()),
	}
}

// request builds the planner's request from a probe: candidate nodes sized
// by room (relaxed: nodes that fail for capacity only are candidates too),
// NUMA zones and the topology constraint from the other plugins' part of
// the cycle.
func (pl *Coscheduling) request(state fwk.CycleState, pr *probe, room gang.Capacity, relaxed bool) (gang.Request, string) {
	var limiter gang.Limiter
	if nc := runtime.ReadNUMACycle(state); nc != nil {
		limiter = nc.Limiter
	}
	shapes, _ := gang.Shapes(pr.groups)
	req := gang.Request{Shapes: shapes, Nodes: gang.CandidateNodes(pr.groups, pr.nodes, pr.verdicts, room, relaxed, limiter)}
	cs := readState(state)
	if cs == nil || cs.spec == nil {
		return req, ""
	}
	tc := runtime.ReadTopologyCycle(state)
	if tc == nil {
		required, _ := gang.TopologyConstraint(cs.spec.Annotations, pr.groups[0].Rep.Annotations)
		req.Required = required
		if required != "" {
			return req, "required " + required + " (the NetworkTopology plugin is not enabled)"
		}
		return req, ""
	}
	req.Constrain(tc.Tree, tc.Required, tc.Preferred, pl.lc.PlacedNodes(cs.ref))
	return req, gang.DescribeConstraint(tc.Required, tc.Preferred)
}

func nodeNames(nodes []gang.NodeState) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Node.Name
	}
	return out
}

func (pl *Coscheduling) scheduleTimeout(spec *gang.Spec) time.Duration {
	if spec.Timeout > 0 {
		return spec.Timeout
	}
	return pl.timeout
}

// reserve gives a gang that has waited at least reservationAfter a
// reservation: the nodes it would take once running pods of equal or lower
// priority leave are held against gangs of equal or lower priority, which
// only backfill what the reservation does not need. One gang per queue holds
// one, the first in the queue's order; reservations never overlap, and none is
// made for a gang that cannot fit the cluster at all. It returns what the
// gang's condition should say, and whether the gang holds a reservation.
func (pl *Coscheduling) reserve(ctx context.Context, state fwk.CycleState, cs *cycleState, pr *probe) (string, bool) {
	ref, spec := cs.ref, cs.spec
	if r, ok := pl.lc.ReservationOf(ref); ok && r.Kind == gang.ReservationPreempting {
		return pl.reservationNote(r, pr, "preempted victims are leaving"), true
	}
	since := pl.lc.WaitingSince(ref)
	if since.IsZero() || pl.lc.Now().Sub(since) < pl.reserveAfter {
		if _, ok := pl.lc.ReservationOf(ref); ok {
			pl.lc.DropReservation(ref)
		}
		return "", false
	}
	// Room once running pods of equal or lower priority leave, net of what
	// every other gang holds (reservations do not overlap).
	future := make([]resources.List, len(pr.nodes))
	futurePods := make([]int64, len(pr.nodes))
	busy := make([]int64, len(pr.nodes))
	for i, ni := range pr.infos {
		f, pods, b := pl.futureRoom(ni, cs.priority)
		held, heldPods := pl.lc.Held(ni.Node().Name, ref, math.MinInt32)
		f.Sub(held)
		future[i], futurePods[i], busy[i] = f, pods-heldPods, b
	}
	req, _ := pl.request(state, pr, func(i int) (resources.List, int64) { return future[i], futurePods[i] }, true)
	for i := range req.Nodes {
		req.Nodes[i].Busy = busy[indexOf(pr, req.Nodes[i].Name)]
	}
	plan, _ := gang.Place(req)
	if plan == nil {
		if r, ok := pl.lc.ReservationOf(ref); ok && r.Kind == gang.ReservationStarved {
			pl.lc.DropReservation(ref)
		}
		return "nothing is reserved: the gang does not fit the cluster even when pods of equal or lower priority leave", false
	}
	queueName := ""
	if qc := runtime.ReadQueueCycle(state); qc != nil {
		queueName = qc.Queue
	}
	_, shapes := gang.Shapes(pr.groups)
	granted, displaced := pl.lc.Reserve(ref, gang.ReservationRequest{
		Kind: gang.ReservationStarved, Queue: queueName, Priority: cs.priority, Created: spec.Created,
		Plan: plan, Shapes: shapes,
	})
	if !displaced.IsZero() {
		klog.FromContext(ctx).V(2).Info("Reservation moved to a gang ahead in the queue", "from", displaced, "to", ref)
		pl.gangs.Wake(displaced)
	}
	if !granted {
		return fmt.Sprintf("waiting behind another gang of queue %q that holds the queue's reservation", queueName), false
	}
	r, _ := pl.lc.ReservationOf(ref)
	runtime.PlanOutcomes.WithLabelValues("reserved").Inc()
	return pl.reservationNote(r, pr, "gangs of equal or lower priority only backfill around it"), true
}

// futureRoom is a node's room for the gang once the pods it may wait for
// (equal or lower priority) leave; busy is how many pods hold that room now.
func (pl *Coscheduling) futureRoom(ni fwk.NodeInfo, priority int32) (resources.List, int64, int64) {
	free, pods := freeOn(ni)
	busy := int64(0)
	for _, pi := range ni.GetPods() {
		p := pi.GetPod()
		if pl.gangs.PriorityOf(p) > priority {
			continue
		}
		free.Add(resources.PodRequests(p))
		pods++
		busy++
	}
	return free, pods, busy
}

func indexOf(pr *probe, node string) int {
	for i, n := range pr.nodes {
		if n.Node.Name == node {
			return i
		}
	}
	return 0
}

// reservationNote says what a reserving gang holds and how much of it is
// still in use.
func (pl *Coscheduling) reservationNote(r gang.Reservation, pr *probe, tail string) string {
	members, waiting := 0, 0
	byName := make(map[string]int, len(pr.nodes))
	for i, n := range pr.nodes {
		byName[n.Node.Name] = i
	}
	for node, byShape := range r.Slots {
		i, ok := byName[node]
		for shape, n := range byShape {
			members += n
			if !ok {
				waiting += n
				continue
			}
			fit := pr.nodes[i].Free.Copies(r.Shapes[shape], int64(n))
			waiting += n - int(min(fit, pr.nodes[i].FreePods))
		}
	}
	return fmt.Sprintf("reserving %d nodes for %d members since %s; room for %d of them is still in use by running pods; %s",
		len(r.Slots), members, r.Since.UTC().Format(time.RFC3339), max(waiting, 0), tail)
}

func setOf(node string) sets.Set[string] { return sets.New(node) }
