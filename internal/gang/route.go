package gang

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/lifecycle"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

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
func (m *Manager) Route(ref ident.Ref, spec *gangspec.Spec, shape string) Route {
	node, live := m.NextSlot(ref, shape)
	if live && node != "" {
		return Route{Node: node}
	}
	if sg := spec.SubGroups; sg != nil && sg.Of != nil && sg.Err == "" {
		// A gang of sub-groups: a member beyond the plan never goes alone.
		return m.routeSubGroup(ref, spec, shape, live)
	}
	if m.Placed(ref) >= gangspec.Quorum(spec) {
		return Route{}
	}
	if live {
		return Route{Node: node}
	}
	return m.routeToPlan(ref)
}

// routeToPlan turns the member away while the gang's pause after a timeout
// or its cached failure stands, else plans.
func (m *Manager) routeToPlan(ref ident.Ref) Route {
	if until, paused := m.Paused(ref); paused {
		return Route{Refusal: fmt.Sprintf("the gang's last plan ended at its timeout; it plans again at %s and holds nothing until then",
			until.UTC().Format(time.RFC3339))}
	}
	if reason, failed := m.Failed(ref); failed {
		return Route{Refusal: reason}
	}
	return Route{Plan: true}
}

// routeSubGroup routes a member of a gang of sub-groups that its gang's plan
// has no slot for: while a plan is being placed, it waits for it; before the
// quorum, the gang is planned; after it, the member's sub-group is planned
// whole when all its members are there and none is placed, waits for its
// members when some are missing, and joins freely when the sub-group
// already has placed members (a replacement).
func (m *Manager) routeSubGroup(ref ident.Ref, spec *gangspec.Spec, shape string, planLive bool) Route {
	sg := spec.SubGroups
	own := planner.SubGroupOfShape(shape)
	if planLive {
		return Route{Refusal: fmt.Sprintf("sub-group %s waits for the gang's plan being placed now; it is planned whole after", own)}
	}
	if m.Placed(ref) < gangspec.Quorum(spec) {
		return m.routeToPlan(ref)
	}
	if own == "" {
		return Route{Refusal: "the member has no rank: it belongs to no sub-group (label scheduling.phalanx.dev/rank or its operator's index label)"}
	}
	for key, n := range m.PlacedShapes(ref) {
		if n > 0 && planner.SubGroupOfShape(key) == own {
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
func (m *Manager) Fits(node string, c lifecycle.Claimant, request resources.List, room func() (resources.List, int64)) bool {
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
func (m *Manager) MissedSlot(ref ident.Ref, spec *gangspec.Spec, member, shape string) (string, bool) {
	if m.Placed(ref) >= gangspec.Quorum(spec) {
		return "", false
	}
	node, _ := m.NextSlot(ref, shape)
	msg := fmt.Sprintf("plan broken: member %s does not fit its planned node %s; replanning the gang", member, node)
	m.Release(ref, lifecycle.ReasonPlanBroken, msg)
	return msg, true
}
