package planner

import (
	"fmt"
	"sort"
	"testing"

	"github.com/phalanx-sched/phalanx/internal/gang/fragment"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// cliqueCluster: spines s0..s(spines-1), each with cliques c0..c(cliques-1)
// of nodes of 4 GPUs; used[node] GPUs are taken already.
func cliqueCluster(spines, cliques, nodesPer int, used map[string]int64, shapes ...string) []Node {
	var out []Node
	for s := 0; s < spines; s++ {
		for c := 0; c < cliques; c++ {
			for n := 0; n < nodesPer; n++ {
				name := fmt.Sprintf("s%d-c%d-n%d", s, c, n)
				node := Node{Name: name, Free: resources.List{fragment.GPUResource: 4 - used[name]}, FreePods: 110, Limit: map[string]int{},
					Domains: []string{fmt.Sprintf("s%d", s), fmt.Sprintf("s%d-c%d", s, c), name}}
				for _, sh := range shapes {
					node.Limit[sh] = 1 << 20
				}
				out = append(out, node)
			}
		}
	}
	return out
}

// subGroupRequest asks for groups sub-groups of size one-GPU members.
func subGroupRequest(nodes []Node, groups, size int) Request {
	var shapes []Shape
	for g := 0; g < groups; g++ {
		shapes = append(shapes, Shape{Key: "w" + subGroupSep + fmt.Sprint(g), Request: resources.List{fragment.GPUResource: 1}, Count: size})
	}
	req := Request{Shapes: shapes, Nodes: nodes, Levels: []string{"spine", "clique", "host"}, Required: "spine", SubLevel: "clique"}
	req.SubGroups = SubGroupsOf(shapes)
	for i := range req.Nodes {
		for _, s := range shapes {
			req.Nodes[i].Limit[s.Key] = 1 << 20
		}
	}
	return req
}

// cliquesOf maps each sub-group to the cliques its members landed in.
func cliquesOf(p *Plan) map[string][]string {
	seen := map[string]map[string]bool{}
	for node, byShape := range p.Slots {
		clique := node[:len("s0-c0")]
		for key, n := range byShape {
			if n == 0 {
				continue
			}
			sg := SubGroupOfShape(key)
			if seen[sg] == nil {
				seen[sg] = map[string]bool{}
			}
			seen[sg][clique] = true
		}
	}
	out := map[string][]string{}
	for sg, cs := range seen {
		for c := range cs {
			out[sg] = append(out[sg], c)
		}
		sort.Strings(out[sg])
	}
	return out
}

// TestPlaceSubGroups: every sub-group lands whole in one clique, the gang
// in one spine; partly used cliques fill first (empty ones stay whole);
// sub-groups that would each fit somewhere but not all inside one spine
// give no plan, and the diagnosis says how many fit where.
func TestPlaceSubGroups(t *testing.T) {
	// Spine s0: c0 has 8 GPUs used of 16 (room for one sub-group of 8),
	// c1 and c2 are empty. Spine s1: all empty.
	used := map[string]int64{"s0-c0-n0": 4, "s0-c0-n1": 4}
	t.Run("partly used cliques first", func(t *testing.T) {
		req := subGroupRequest(cliqueCluster(2, 3, 4, used), 3, 8)
		plan, diag := Place(req)
		if plan == nil {
			t.Fatalf("no plan: %+v", diag)
		}
		got := cliquesOf(plan)
		for sg, cs := range got {
			if len(cs) != 1 {
				t.Fatalf("sub-group %s spans cliques %v", sg, cs)
			}
		}
		// The spine with the partly used clique is the tightest, and the
		// partly used clique takes a sub-group first.
		if plan.Domains[0].Value != "s0" {
			t.Fatalf("gang in %v, want spine s0", plan.Domains)
		}
		if got["0"][0] != "s0-c0" {
			t.Fatalf("sub-group 0 in %v, want the partly used clique s0-c0 first (all: %v)", got["0"], got)
		}
		// Then c1 (the tie by name), and c1 again once partly used: c2
		// stays whole.
		if got["1"][0] != "s0-c1" || got["2"][0] != "s0-c1" {
			t.Fatalf("sub-groups 1 and 2 in %v and %v, want both in s0-c1 (c2 kept whole)", got["1"], got["2"])
		}
	})
	t.Run("each fits, not all in one spine", func(t *testing.T) {
		// Every spine has room for 2 sub-groups of 16 (one per empty clique
		// pair); 3 are asked for.
		full := map[string]int64{}
		for s := 0; s < 2; s++ {
			for n := 0; n < 4; n++ {
				full[fmt.Sprintf("s%d-c2-n%d", s, n)] = 4
			}
		}
		req := subGroupRequest(cliqueCluster(2, 3, 4, full), 3, 16)
		plan, diag := Place(req)
		if plan != nil {
			t.Fatalf("planned across spines: %v", cliquesOf(plan))
		}
		if diag.SubGroups == nil || diag.SubGroups.Placed != 2 || diag.SubGroups.Need != 3 {
			t.Fatalf("diagnosis %+v, want 2 of 3 sub-groups in the closest spine", diag.SubGroups)
		}
		if msg := DescribeSubGroups(diag); msg != "2 of 3 sub-groups of 16 members fit in one clique each inside spine s0" {
			t.Fatalf("description %q", msg)
		}
	})
	t.Run("preferred sub-level spreads a sub-group no clique takes", func(t *testing.T) {
		req := subGroupRequest(cliqueCluster(1, 2, 2, nil), 1, 12)
		req.SubPreferred = true
		plan, diag := Place(req)
		if plan == nil {
			t.Fatalf("no plan: %+v", diag)
		}
		if got := cliquesOf(plan)["0"]; len(got) != 2 {
			t.Fatalf("sub-group in %v, want spread over both cliques", got)
		}
	})
}
