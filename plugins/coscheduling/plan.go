package coscheduling

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/gang"
	"github.com/phalanx-sched/phalanx/internal/resources"
	"github.com/phalanx-sched/phalanx/plugins/shared"
)

// shapeGroup is one shape of members still to be placed.
type shapeGroup struct {
	key   string
	rep   *v1.Pod
	req   resources.List
	count int
}

// plan runs at the first member of a gang without a live plan. It asks every
// Filter plugin whether the member fits each node (in parallel), sizes each
// node by arithmetic, and lets the planner place the whole minimum.
func (pl *Coscheduling) plan(ctx context.Context, p *planning, cs *cycleState) (sets.Set[string], *fwk.Status) {
	logger := klog.FromContext(ctx)
	pod, pg, members, placed, nodes := p.pod, p.pg, p.members, p.placed, p.nodes
	// The planner's filter runs see a state whose Coscheduling entry only
	// checks holds, so they do not recurse into planning.
	state := p.state.Clone()
	state.Write(stateKey, &cycleState{gangKey: cs.gangKey, shape: cs.shape, request: cs.request, nested: true})
	start := time.Now()
	needed := int(pg.Spec.MinMember) - len(placed)

	groups := pendingShapes(pod, cs, members, placed, needed)
	have := 0
	for _, g := range groups {
		have += g.count
	}
	if have < needed {
		msg := fmt.Sprintf("%d members are placed and %d wait, fewer than minMember %d", len(placed), have, pg.Spec.MinMember)
		pl.s.Status.Set(pg, metav1.ConditionFalse, shared.ReasonMembersPending, msg)
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}

	candidates := make([]gang.Node, len(nodes))
	failures := make([]*fwk.Status, len(nodes))
	primaryOnePerNode := gang.OnePerNode(pod)
	limiter := pl.s.NodeLimiter()
	pl.h.Parallelizer().Until(ctx, len(nodes), func(i int) {
		ni := nodes[i]
		node := ni.Node()
		free, freePods := freeOn(ni)
		held, heldPods := pl.s.Gangs.Held(node.Name, cs.gangKey)
		free.Sub(held)
		c := gang.Node{Name: node.Name, Free: free, FreePods: freePods - heldPods, Limit: map[string]int{}}
		if st := pl.h.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni); st.IsSuccess() {
			c.Limit[cs.shape] = limitFor(primaryOnePerNode, needed)
		} else {
			failures[i] = st
		}
		for _, g := range groups[1:] {
			if gang.NodeAdmits(g.rep, node) {
				c.Limit[g.key] = limitFor(gang.OnePerNode(g.rep), needed)
			}
		}
		// Per-zone fit (NUMA) caps members per node beyond arithmetic.
		if limiter != nil {
			for _, g := range groups {
				if l, ok := c.Limit[g.key]; ok {
					c.Limit[g.key] = limiter.Limit(g.rep, node.Name, l)
				}
			}
		}
		candidates[i] = c
	}, Name)

	shapes := make([]gang.Shape, len(groups))
	requests := make(map[string]resources.List, len(groups))
	for i, g := range groups {
		shapes[i] = gang.Shape{Key: g.key, Request: g.req, Count: g.count}
		requests[g.key] = g.req
	}
	req := gang.Request{Shapes: shapes, Nodes: candidates}
	constraint := pl.constrain(pg, pod, cs.gangKey, members, &req)
	plan, diag := gang.Place(req)
	planDuration.Observe(time.Since(start).Seconds())
	key := cs.gangKey
	if plan == nil {
		failed := make(map[string]*fwk.Status, len(nodes))
		for i, st := range failures {
			if st != nil {
				failed[nodes[i].Node().Name] = st
			}
		}
		msg := describeFailure(diag, len(placed), int(pg.Spec.MinMember), constraint, req, failed, len(nodes))
		logger.V(2).Info("Gang cannot be placed", "podGroup", key, "reason", msg)
		pl.s.Gangs.Fail(key, msg)
		pl.mu.Lock()
		pl.failed[key] = true
		pl.mu.Unlock()
		pl.s.Status.Set(pg, metav1.ConditionFalse, shared.ReasonUnschedulable, msg)
		planOutcomes.WithLabelValues("unschedulable").Inc()
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}

	ttl := pl.scheduleTimeout(pg)
	gen := pl.s.Gangs.SetPlan(key, plan, requests, ttl)
	time.AfterFunc(ttl, func() {
		if pl.s.Gangs.ExpireIf(key, gen) {
			pl.s.CapacityFreed()
		}
	})
	planOutcomes.WithLabelValues("planned").Inc()
	logger.V(3).Info("Gang planned", "podGroup", key, "members", plan.Members(), "nodes", len(plan.Slots))
	// Siblings come next in the queue order; wake those that wait elsewhere.
	pl.activatePending([]string{key})

	open, _ := pl.s.Gangs.OpenNodes(key, cs.shape)
	return open, nil
}

// constrain applies the gang's network-topology constraint. Without the
// NetworkTopology plugin a required level cannot be honoured, and says so.
func (pl *Coscheduling) constrain(pg *pgv1alpha1.PodGroup, pod *v1.Pod, key string, members []*v1.Pod, req *gang.Request) string {
	t := pl.s.Topology()
	if t == nil {
		req.Required = pg.Annotations[phalanxv1alpha1.TopologyRequiredAnnotation]
		if req.Required == "" {
			req.Required = pod.Annotations[phalanxv1alpha1.TopologyRequiredAnnotation]
		}
		if req.Required != "" {
			return "required " + req.Required + " (the NetworkTopology plugin is not enabled)"
		}
		return ""
	}
	var placedNodes []string
	for _, m := range members {
		if m.Spec.NodeName != "" && m.DeletionTimestamp == nil {
			placedNodes = append(placedNodes, m.Spec.NodeName)
		}
	}
	placedNodes = append(placedNodes, pl.s.Gangs.ReservedNodes(key)...)
	return t.Constrain(pg, pod, placedNodes, req)
}

func limitFor(onePerNode bool, needed int) int {
	if onePerNode {
		return 1
	}
	return needed
}

// pendingShapes picks the members to plan for (the pod in the cycle first,
// then the oldest) and groups them by shape, the cycle's shape first.
func pendingShapes(pod *v1.Pod, cs *cycleState, members []*v1.Pod, placed map[types.UID]bool, needed int) []shapeGroup {
	pending := make([]*v1.Pod, 0, len(members))
	for _, m := range members {
		if m.UID != pod.UID && !placed[m.UID] && m.Spec.NodeName == "" && m.DeletionTimestamp == nil {
			pending = append(pending, m)
		}
	}
	sort.Slice(pending, func(i, j int) bool {
		ti, tj := pending[i].CreationTimestamp, pending[j].CreationTimestamp
		if !ti.Equal(&tj) {
			return ti.Before(&tj)
		}
		return pending[i].Name < pending[j].Name
	})
	groups := []shapeGroup{{key: cs.shape, rep: pod, req: cs.request, count: 1}}
	index := map[string]int{cs.shape: 0}
	for total := 1; total < needed && len(pending) > 0; total++ {
		m := pending[0]
		pending = pending[1:]
		k := gang.ShapeKey(m)
		i, ok := index[k]
		if !ok {
			i = len(groups)
			index[k] = i
			groups = append(groups, shapeGroup{key: k, rep: m, req: resources.PodRequests(m)})
		}
		groups[i].count++
	}
	return groups
}

// describeFailure says why no placement exists, in terms users can act on:
// how many members fit, in which domains, and which filters rejected nodes.
func describeFailure(diag *gang.Diagnosis, placed, minMember int, constraint string, req gang.Request,
	failed map[string]*fwk.Status, nodes int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "no placement for %d more members (minMember %d, %d placed)", diag.Needed, minMember, placed)
	if constraint != "" {
		fmt.Fprintf(&b, " with topology %s", constraint)
	}
	fmt.Fprintf(&b, ": at most %d fit", diag.Placed)
	if diag.Best.Level != "" {
		fmt.Fprintf(&b, " in %s %s", diag.Best.Level, diag.Best.Value)
	}
	if diag.UnknownLevel != "" {
		fmt.Fprintf(&b, "; topology level %q is not defined (levels: %s)", diag.UnknownLevel, strings.Join(req.Levels, ", "))
	}
	if len(diag.Tried) > 0 {
		li := slices.Index(req.Levels, diag.Tried[0].Domain.Level)
		b.WriteString("; tried")
		for i, d := range diag.Tried {
			if i == 4 {
				fmt.Fprintf(&b, ", and %d more", len(diag.Tried)-i)
				break
			}
			total, filteredOut := 0, map[string]int{}
			for _, n := range req.Nodes {
				if li >= 0 && li < len(n.Domains) && n.Domains[li] == d.Domain.Value {
					total++
					if st := failed[n.Name]; st != nil {
						filteredOut[st.Plugin()]++
					}
				}
			}
			sep := ","
			if i == 0 {
				sep = ""
			}
			fmt.Fprintf(&b, "%s %s (room for %d", sep, d.Domain.Value, d.Placed)
			for _, plugin := range sortedKeys(filteredOut) {
				fmt.Fprintf(&b, "; %d of %d nodes fail %s", filteredOut[plugin], total, plugin)
			}
			b.WriteString(")")
		}
	}
	byReason := map[string]int{}
	for _, st := range failed {
		byReason[st.Plugin()+": "+strings.Join(st.Reasons(), ", ")]++
	}
	fmt.Fprintf(&b, "; %d of %d nodes fail filters", len(failed), nodes)
	reasons := sortedKeys(byReason)
	sort.SliceStable(reasons, func(i, j int) bool { return byReason[reasons[i]] > byReason[reasons[j]] })
	for i, r := range reasons {
		if i == 3 {
			fmt.Fprintf(&b, "; …")
			break
		}
		fmt.Fprintf(&b, "; %d × %s", byReason[r], r)
	}
	return b.String()
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
