package gang

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/gang/consolidate"
	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/lifecycle"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
	"github.com/phalanx-sched/phalanx/internal/gang/preempt"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// ReasonConsolidated is the condition and event reason of a gang moved to
// free a domain for a waiting gang.
const ReasonConsolidated = "Consolidated"

// retryLater is retryAfter, once per gang for a given time.
func (m *Manager) retryLater(a *Attempt, d time.Duration) {
	now := m.Now()
	if m.consolidated.ClaimWake(a.Ref, now, now.Add(d)) {
		m.retryAfter(a, d)
	}
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
func (m *Manager) consolidate(ctx context.Context, a *Attempt, all *preempt.Running, planFor func([]preempt.Victim) *planner.Plan) (*Room, string) {
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
	if ok, next := m.consolidated.Allowed(queueName, now, c.PerHour); !ok {
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
	cands, youngest := c.Candidates(all.Victims, all.Pods, a.Priority, m.settled, &m.consolidated, now, a.Topology.Tree, li)
	if len(cands) == 0 {
		if youngest > 0 {
			m.retryLater(a, youngest)
			return nil, fmt.Sprintf("no consolidation: the gangs it could move have run less than %v (retrying in %v)", c.MinRuntime, youngest.Round(time.Second))
		}
		return nil, "no consolidation: no running gang it could move"
	}
	best := consolidate.Cheapest(cands, planFor, m.relocation(a).Relocate)
	if best == nil {
		return nil, fmt.Sprintf("no consolidation: no %s can be freed by moving gangs that fit elsewhere now", a.Topology.Required)
	}
	m.consolidated.Record(queueName, now, best.Victims)
	why := fmt.Sprintf("no %s fits it; consolidating %s %s (%.0f GPU-seconds of work lost)", a.Topology.Required, a.Topology.Required, best.Domain, best.Cost)
	room, msg := m.evict(ctx, a, all, best.Victims, best.Plan, ReasonConsolidated, why, queueName)
	// Each moved gang's new place is held for it (against equal and lower
	// priority) until its pods come back and plan, or for twice its
	// schedule timeout after the grace its pods may take to leave.
	for _, mv := range best.Moves {
		spec, err := m.dir.Spec(mv.Ref)
		if err != nil {
			continue
		}
		m.Reserve(mv.Ref, lifecycle.ReservationRequest{Kind: lifecycle.ReservationMoved, Priority: mv.Priority, Created: spec.Created,
			Plan: mv.Plan, Shapes: mv.Shapes, TTL: 2*m.scheduleTimeout(spec) + c.EvictionGrace})
	}
	return room, msg
}

// settled says whether a running gang may be moved: not still binding or
// waiting for more room, its group object there, no sub-groups. It gives
// the group object's annotations (a checkpoint time).
func (m *Manager) settled(v preempt.Victim) (map[string]string, bool) {
	if ph := m.Phase(v.Ref); ph == lifecycle.PhasePlanned || ph == lifecycle.PhaseReserving {
		return nil, false
	}
	spec, err := m.dir.Spec(v.Ref)
	if err != nil || spec.SubGroups != nil {
		return nil, false
	}
	return spec.Annotations, true
}

// relocation is where the attempt's moved gangs may go: its view, less what
// others hold against them.
func (m *Manager) relocation(a *Attempt) consolidate.Relocation {
	_, requests := planner.Shapes(a.groups)
	return consolidate.Relocation{
		Nodes: a.view.Nodes, Requests: requests, Demand: m.demand(), Limiter: a.Limiter, Tree: a.Topology.Tree,
		Held: func(node string, priority int32) (resources.List, int64) { return m.Held(node, a.Ref, priority) },
		Required: func(ref ident.Ref, rep *v1.Pod) (string, bool) {
			spec, err := m.dir.Spec(ref)
			if err != nil {
				return "", false
			}
			required, _ := gangspec.TopologyConstraint(spec.Annotations, rep.Annotations)
			return required, true
		},
	}
}
