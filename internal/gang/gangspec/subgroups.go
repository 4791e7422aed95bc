package gangspec

import (
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/gang/planner"
)

// SubGroups splits a gang into sub-groups (tensor-parallel groups, the
// groups of an upstream CompositePodGroup): each sub-group is placed whole
// inside one domain of its level, and the gang inside one domain of its own.
type SubGroups struct {
	// Size is the members of one sub-group.
	Size int
	// Min is how many whole sub-groups the gang starts with (elastic); 0:
	// as many as the gang's minimum holds.
	Min int
	// Required and Preferred name the level of a sub-group's domain.
	Required, Preferred string
	// Key is a node label key naming the sub-groups' level where no
	// NetworkTopology level does (an upstream topology constraint).
	Key string
	// Of is a member's sub-group ("" when the member has none yet, e.g. no
	// rank).
	Of func(pod *v1.Pod) string
	// Source says how members map to sub-groups, for messages ("by rank",
	// "by PodGroup").
	Source string
	// Err says why the sub-groups are invalid: the gang is not planned.
	Err string
}

// InvalidSubGroups is the condition message of a gang whose sub-groups cannot be
// formed (ReasonInvalidSubGroups), "" when they can or the gang has none.
// It comes before any count of members: the gang's size is not known.
func (s *Spec) InvalidSubGroups() string {
	if s.SubGroups == nil || s.SubGroups.Err == "" {
		return ""
	}
	return InvalidSubGroupsMessage(s.SubGroups.Err)
}

// InvalidSubGroupsMessage is the message of ReasonInvalidSubGroups for why.
func InvalidSubGroupsMessage(why string) string { return "invalid sub-groups: " + why }

// MemberShape is the key a member is planned, held and steered under: its
// shape, and its sub-group in a gang of sub-groups.
func MemberShape(spec *Spec, pod *v1.Pod) string {
	if spec == nil || spec.SubGroups == nil || spec.SubGroups.Of == nil {
		return planner.ShapeKey(pod)
	}
	return planner.SubGroupShape(planner.ShapeKey(pod), spec.SubGroups.Of(pod))
}

// GroupForPlan picks the members a plan places, as GroupPending does; in a
// gang of sub-groups, only whole sub-groups (every one of its Size members
// pending and ranked), the cycle pod's own first, then in sub-group order.
// short says what keeps sub-groups from being whole ("" when enough are).
// Queue admission charges exactly these members.
// placed counts each sub-group's members already bound (after a crash in the
// middle of its binds, say): a sub-group is whole with the pending rest of
// it, and only that rest is planned.
func GroupForPlan(spec *Spec, pod *v1.Pod, pending []*v1.Pod, needed int, demand planner.DemandFunc, placed map[string]int) (groups []planner.ShapeGroup, short string) {
	sg := spec.SubGroups
	if sg == nil || sg.Of == nil || sg.Size < 1 {
		return planner.GroupPending(pod, pending, needed, demand), ""
	}
	bySG := map[string][]*v1.Pod{}
	unranked := 0
	seen := false
	for _, m := range append([]*v1.Pod{pod}, pending...) {
		if m.UID == pod.UID && seen {
			continue
		}
		seen = seen || m.UID == pod.UID
		id := sg.Of(m)
		if id == "" {
			unranked++
			continue
		}
		bySG[id] = append(bySG[id], m)
	}
	var whole []string
	for id, ms := range bySG {
		if len(ms)+placed[id] >= sg.Size {
			whole = append(whole, id)
		}
	}
	own := sg.Of(pod)
	sort.Slice(whole, func(i, j int) bool {
		if (whole[i] == own) != (whole[j] == own) {
			return whole[i] == own
		}
		return planner.SubGroupLess(whole[i], whole[j])
	})
	var members []*v1.Pod
	for _, id := range whole {
		if len(members) >= needed {
			break
		}
		ms := bySG[id]
		sort.Slice(ms, func(i, j int) bool { return ms[i].Name < ms[j].Name })
		members = append(members, ms[:max(sg.Size-placed[id], 0)]...)
	}
	if len(members) < needed {
		short = fmt.Sprintf("%d of %d sub-groups %s have all their %d members pending", len(whole), (needed+sg.Size-1)/sg.Size, sg.Source, sg.Size)
		if unranked > 0 {
			short += fmt.Sprintf("; %d members have no rank (label %s or their operator's index label)", unranked, "scheduling.phalanx.dev/rank")
		}
	}
	return planner.GroupByKey(members, demand, func(p *v1.Pod) string { return MemberShape(spec, p) }), short
}

// BoundBySubGroup counts a gang's bound members per sub-group, and the
// domain of level li each sub-group's bound members are in (li < 0: none).
func BoundBySubGroup(spec *Spec, members []*v1.Pod, topo planner.Topology, li int) (bound map[string]int, in map[string]string) {
	sg := spec.SubGroups
	if sg == nil || sg.Of == nil {
		return nil, nil
	}
	bound, in = map[string]int{}, map[string]string{}
	// Members of one sub-group bound in several domains (a node relabelled
	// under them) name the domain holding most of them, then the first by
	// name: never the list order.
	count := map[string]map[string]int{}
	for _, p := range members {
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil {
			continue
		}
		id := sg.Of(p)
		bound[id]++
		if topo != nil && li >= 0 {
			if d := topo.Domains(p.Spec.NodeName); li < len(d) && d[li] != "" {
				if count[id] == nil {
					count[id] = map[string]int{}
				}
				count[id][d[li]]++
			}
		}
	}
	for id, by := range count {
		best := ""
		for dom, n := range by {
			if best == "" || n > by[best] || (n == by[best] && dom < best) {
				best = dom
			}
		}
		in[id] = best
	}
	return bound, in
}
