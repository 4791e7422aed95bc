package gang

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/resources"
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

// subGroupSep separates a member's shape from its sub-group in its shape
// key: members of different sub-groups are never interchangeable.
const subGroupSep = "#sg="

// MemberShape is the key a member is planned, held and steered under: its
// shape, and its sub-group in a gang of sub-groups.
func MemberShape(spec *Spec, pod *v1.Pod) string {
	if spec == nil || spec.SubGroups == nil || spec.SubGroups.Of == nil {
		return ShapeKey(pod)
	}
	return ShapeKey(pod) + subGroupSep + spec.SubGroups.Of(pod)
}

// SubGroupOfShape is the sub-group of a member shape key ("" for none).
func SubGroupOfShape(key string) string {
	if i := strings.Index(key, subGroupSep); i >= 0 {
		return key[i+len(subGroupSep):]
	}
	return ""
}

// GroupForPlan picks the members a plan places, as GroupPending does; in a
// gang of sub-groups, only whole sub-groups (every one of its Size members
// pending and ranked), the cycle pod's own first, then in sub-group order.
// short says what keeps sub-groups from being whole ("" when enough are).
// Queue admission charges exactly these members.
// placed counts each sub-group's members already bound (after a crash in the
// middle of its binds, say): a sub-group is whole with the pending rest of
// it, and only that rest is planned.
func GroupForPlan(spec *Spec, pod *v1.Pod, pending []*v1.Pod, needed int, demand DemandFunc, placed map[string]int) (groups []ShapeGroup, short string) {
	sg := spec.SubGroups
	if sg == nil || sg.Of == nil || sg.Size < 1 {
		return GroupPending(pod, pending, needed, demand), ""
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
		return subGroupLess(whole[i], whole[j])
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
	return groupByKey(members, demand, func(p *v1.Pod) string { return MemberShape(spec, p) }), short
}

// BoundBySubGroup counts a gang's bound members per sub-group, and the
// domain of level li each sub-group's bound members are in (li < 0: none).
func BoundBySubGroup(spec *Spec, members []*v1.Pod, topo Topology, li int) (bound map[string]int, in map[string]string) {
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

// SubGroup is one sub-group of a planner request.
type SubGroup struct {
	Key    string
	Shapes []Shape
	// In is the domain the sub-group must go to: its members already bound
	// are there ("" for none).
	In string
}

func (sg SubGroup) members() int {
	n := 0
	for _, s := range sg.Shapes {
		n += s.Count
	}
	return n
}

// SubGroupsOf splits a request's shapes into sub-groups by their keys'
// sub-group, in sub-group order (numbers numerically).
func SubGroupsOf(shapes []Shape) []SubGroup {
	index := map[string]int{}
	var out []SubGroup
	for _, s := range shapes {
		k := SubGroupOfShape(s.Key)
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, SubGroup{Key: k})
		}
		out[i].Shapes = append(out[i].Shapes, s)
	}
	sort.SliceStable(out, func(i, j int) bool { return subGroupLess(out[i].Key, out[j].Key) })
	return out
}

func subGroupLess(a, b string) bool {
	na, ea := strconv.Atoi(a)
	nb, eb := strconv.Atoi(b)
	if ea == nil && eb == nil {
		return na < nb
	}
	return a < b
}

// SubGroupDiagnosis says how far a gang of sub-groups got in its closest
// domain.
type SubGroupDiagnosis struct {
	Level  string // the sub-groups' level
	Size   int
	Need   int // sub-groups the plan needed
	Placed int // whole sub-groups the closest domain took
	// In is that domain (zero: the cluster).
	In Domain
}

// DescribeSubGroups says how far a gang of sub-groups got, "" for a flat
// gang.
func DescribeSubGroups(diag *Diagnosis) string {
	sg := diag.SubGroups
	if sg == nil {
		return ""
	}
	where := ""
	if sg.In.Level != "" {
		where = " inside " + sg.In.Level + " " + sg.In.Value
	}
	return fmt.Sprintf("%d of %d sub-groups of %d members fit in one %s each%s", sg.Placed, sg.Need, sg.Size, sg.Level, where)
}

// fillIn places the request's members on nodes: its shapes by fill, or, for
// a gang of sub-groups, each sub-group whole inside one domain of its level.
func (req Request) fillIn(nodes []Node, diag *Diagnosis, in Domain) (map[string]map[string]int, int) {
	if len(req.SubGroups) == 0 {
		return fill(req.Shapes, nodes, req.Workload)
	}
	slots, placed, groups := req.fillSubGroups(nodes)
	if sg := diag.SubGroups; sg != nil && (groups > sg.Placed || groups == sg.Placed && sg.In == Domain{} && in.Level != "") {
		sg.Placed, sg.In = groups, in
	}
	return slots, placed
}

// fillSubGroups places the sub-groups in order, each whole in the tightest
// domain of the sub-groups' level that takes it (partly used domains fill
// first, empty ones stay whole); with a preferred level, a sub-group no
// single domain takes spreads over the nodes. It returns the slots, the
// members placed and the sub-groups placed whole.
func (req Request) fillSubGroups(nodes []Node) (map[string]map[string]int, int, int) {
	li := slices.Index(req.Levels, req.SubLevel)
	// The nodes' room as sub-groups take it: copies, changed on write.
	room := append([]Node(nil), nodes...)
	pos := make(map[string]int, len(room))
	for i := range room {
		pos[room[i].Name] = i
	}
	var domains []domainGroup
	if li >= 0 {
		domains = groupByDomain(room, li)
	}
	slots := map[string]map[string]int{}
	placed, groups := 0, 0
	take := func(s map[string]map[string]int) {
		for node, byShape := range s {
			i := pos[node]
			n := room[i]
			free := n.Free.Clone()
			for key, c := range byShape {
				free.AddScaled(shapeRequest(req.Shapes, key), -int64(c))
				n.FreePods -= int64(c)
				if slots[node] == nil {
					slots[node] = map[string]int{}
				}
				slots[node][key] += c
				placed += c
			}
			n.Free, n.memo = free, nil
			room[i] = n
		}
	}
	for _, sg := range req.SubGroups {
		need := sg.members()
		best, bestCap := -1, 0
		var bestSlots map[string]map[string]int
		for di, d := range domains {
			if sg.In != "" && d.value != sg.In {
				continue
			}
			dn := make([]Node, len(d.nodes))
			for k, n := range d.nodes {
				dn[k] = room[pos[n.Name]]
			}
			c := isolatedCapacity(sg.Shapes, dn)
			if c < sg.Shapes[0].Count || (best >= 0 && c >= bestCap) {
				continue
			}
			s, p := fill(sg.Shapes, dn, req.Workload)
			if p < need {
				continue
			}
			best, bestCap, bestSlots = di, c, s
		}
		switch {
		case best >= 0:
			take(bestSlots)
			groups++
		case req.SubPreferred:
			if s, p := fill(sg.Shapes, room, req.Workload); p == need {
				take(s)
				groups++
			}
		}
	}
	return slots, placed, groups
}

func shapeRequest(shapes []Shape, key string) resources.List {
	for _, s := range shapes {
		if s.Key == key {
			return s.Request
		}
	}
	return nil
}
