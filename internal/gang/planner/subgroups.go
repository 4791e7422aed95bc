package planner

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

// subGroupSep separates a member's shape from its sub-group in its shape
// key: members of different sub-groups are never interchangeable.
const subGroupSep = "#sg="

// SubGroupShape is the member shape key of a member of shape shapeKey in
// sub-group subGroup (MemberShape).
func SubGroupShape(shapeKey, subGroup string) string { return shapeKey + subGroupSep + subGroup }

// SubGroupOfShape is the sub-group of a member shape key ("" for none).
func SubGroupOfShape(key string) string {
	if i := strings.Index(key, subGroupSep); i >= 0 {
		return key[i+len(subGroupSep):]
	}
	return ""
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
	sort.SliceStable(out, func(i, j int) bool { return SubGroupLess(out[i].Key, out[j].Key) })
	return out
}

// SubGroupLess is the sub-groups' order: numbers numerically, else by name.
func SubGroupLess(a, b string) bool {
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
