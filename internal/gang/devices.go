package gang

import (
	"context"
	"math"
	"sort"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/devices"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// unlimited stands for device resources a node does not publish: the
// allocator, not arithmetic, caps them.
const unlimited = math.MaxInt64 / 4

// maxDeviceReplans bounds how often a plan is made again after members'
// devices did not fit in planned order (devices shared between nodes, or
// claims shared between members).
const maxDeviceReplans = 3

// openDevices gives the attempt its device view when a member asks for DRA
// devices: the scheduler's allocated and in-flight devices plus what other
// gangs' live plans hold.
func (m *Manager) openDevices(ctx context.Context, a *Attempt) {
	if m.devices == nil || a.view == nil {
		return
	}
	var members []*v1.Pod
	for _, g := range a.groups {
		members = append(members, g.Members...)
	}
	nodes := make(map[string]*v1.Node, len(a.view.Nodes))
	for _, ns := range a.view.Nodes {
		nodes[ns.Node.Name] = ns.Node
	}
	holding := map[string]bool{}
	for ref := range m.HeldByGang() {
		holding[ref.String()] = true
	}
	a.devices = m.devices.Session(ctx, a.Ref.String(), members, func(n string) *v1.Node { return nodes[n] },
		func(ref string) bool { return holding[ref] })
	if a.devices == nil {
		return
	}
	names := m.devices.ResourceNames()
	a.uncounted = map[v1.ResourceName]bool{}
	for _, g := range a.groups {
		for name := range g.Request {
			if names.Has(name) {
				a.uncounted[name] = true
			}
		}
	}
}

// leaveDevicesToAllocator lifts, on a node that does not publish a device
// resource as allocatable, the arithmetic cap on it.
func (a *Attempt) leaveDevicesToAllocator(free resources.List) {
	for name := range a.uncounted {
		if _, published := free[name]; !published {
			free[name] = unlimited
		}
	}
}

// place runs the planner; with devices, it then allocates members' devices
// in planned order, and where a member's devices do not fit its node, caps
// the node at the members that fit and plans again.
func (m *Manager) place(a *Attempt, req planner.Request) (*planner.Plan, *planner.Diagnosis) {
	plan, diag := planner.Place(req)
	if plan == nil || a.devices == nil {
		return plan, diag
	}
	groupOf := map[*v1.Pod]string{}
	for _, g := range a.groups {
		groupOf[g.Rep] = g.Key
		for _, m := range g.Members {
			groupOf[m] = g.Key
		}
	}
	keyOf := func(p *v1.Pod) string {
		if k, ok := groupOf[p]; ok {
			return k
		}
		return planner.ShapeKey(p)
	}
	for try := 0; ; try++ {
		order := placements(plan, a.groups)
		failed, ok := a.devices.Assign(order)
		if ok {
			return plan, nil
		}
		if try == maxDeviceReplans {
			return nil, &planner.Diagnosis{Needed: planner.Members(a.groups), Placed: failed}
		}
		// Cap the failing member's node and group (its shape, and its
		// sub-group in a gang of sub-groups) at the members of that group
		// placed there before it.
		bad := order[failed]
		key := keyOf(bad.Pod)
		fitted := 0
		for _, p := range order[:failed] {
			if p.Node == bad.Node && keyOf(p.Pod) == key {
				fitted++
			}
		}
		for i := range req.Nodes {
			if req.Nodes[i].Name == bad.Node {
				req.Nodes[i].SetLimit(key, fitted)
			}
		}
		if plan, diag = planner.Place(req); plan == nil {
			return nil, diag
		}
	}
}

// placements lists the plan's members in planned order: shape by shape,
// nodes by name, each group's members oldest first.
func placements(plan *planner.Plan, groups []planner.ShapeGroup) []devices.Placement {
	nodes := make([]string, 0, len(plan.Slots))
	for n := range plan.Slots {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	var out []devices.Placement
	for _, g := range groups {
		next := 0
		for _, n := range nodes {
			for c := plan.Slots[n][g.Key]; c > 0; c-- {
				p := devices.Placement{Node: n, Like: g.Rep, Pod: g.Rep}
				if next < len(g.Members) {
					p.Pod = g.Members[next]
				}
				next++
				out = append(out, p)
			}
		}
	}
	return out
}
