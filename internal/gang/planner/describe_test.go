package planner

import (
	"reflect"
	"strings"
	"testing"
)

func TestDescribeFailure(t *testing.T) {
	// Two racks of two 4-CPU nodes; one node of r2 fails a filter. Five
	// 2-CPU members need one rack: r1 takes four, r2 two.
	nodes := []Node{
		withDomains(node("a1", 4000, "w"), "r1"), withDomains(node("a2", 4000, "w"), "r1"),
		withDomains(node("b1", 4000, "w"), "r2"), withDomains(node("b2", 4000), "r2"),
	}
	names := []string{"a1", "a2", "b1", "b2"}
	verdicts := []Verdict{{Fits: true}, {Fits: true}, {Fits: true}, {Plugin: "NodeAffinity", Reasons: []string{"node(s) didn't match"}}}
	req := Request{Shapes: []Shape{{Key: "w", Request: cpu(2000), Count: 5}}, Nodes: nodes, Levels: []string{"rack"}, Required: "rack"}
	plan, diag := Place(req)
	if plan != nil {
		t.Fatalf("plan = %v, want none", plan.Slots)
	}
	got := DescribeFailure(diag, 1, 6, DescribeConstraint("rack", ""), req, names, verdicts)
	for _, want := range []string{
		"no placement for 5 more members (minMember 6, 1 placed) with topology required rack",
		"at most 4 fit in rack r1",
		"tried r1 (room for 4), r2 (room for 2; 1 of 2 nodes fail NodeAffinity)",
		"1 of 4 nodes fail filters; 1 × NodeAffinity: node(s) didn't match",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("DescribeFailure = %q\nmissing %q", got, want)
		}
	}

	// A level that does not exist is named, with the levels there are.
	req.Required, req.Levels = "spine", nil
	_, diag = Place(req)
	got = DescribeFailure(diag, 0, 5, DescribeConstraint("spine", ""), req, names, verdicts)
	if want := `topology level "spine" is not defined (levels: none defined)`; !strings.Contains(got, want) {
		t.Errorf("DescribeFailure = %q\nmissing %q", got, want)
	}
}

func TestDescribeFailureBoundsTheLists(t *testing.T) {
	// Six racks tried, five filter reasons: four racks and three reasons
	// are named, the rest counted.
	var nodes []Node
	var names []string
	var verdicts []Verdict
	for i, r := range []string{"r1", "r2", "r3", "r4", "r5", "r6"} {
		n := withDomains(node(r+"-n", 1000, "w"), r)
		nodes, names = append(nodes, n), append(names, n.Name)
		verdicts = append(verdicts, Verdict{Fits: true})
		bad := r + "-bad"
		nodes, names = append(nodes, withDomains(node(bad, 1000), r)), append(names, bad)
		verdicts = append(verdicts, Verdict{Plugin: "P", Reasons: []string{string(rune('a' + i%5))}})
	}
	req := Request{Shapes: []Shape{{Key: "w", Request: cpu(1000), Count: 2}}, Nodes: nodes, Levels: []string{"rack"}, Required: "rack"}
	_, diag := Place(req)
	got := DescribeFailure(diag, 0, 2, "required rack", req, names, verdicts)
	if !strings.Contains(got, ", and 2 more") {
		t.Errorf("DescribeFailure = %q, want the last two racks counted", got)
	}
	if !strings.HasSuffix(got, "; …") || strings.Count(got, " × P: ") != 3 {
		t.Errorf("DescribeFailure = %q, want three reasons then …", got)
	}
}

func TestSubGroupKeys(t *testing.T) {
	key := SubGroupShape("abc", "12")
	if SubGroupOfShape(key) != "12" || SubGroupOfShape("abc") != "" {
		t.Errorf("SubGroupOfShape(%q) = %q, of a flat shape %q", key, SubGroupOfShape(key), SubGroupOfShape("abc"))
	}
	shapes := []Shape{
		{Key: SubGroupShape("x", "10"), Count: 1}, {Key: SubGroupShape("x", "2"), Count: 1},
		{Key: SubGroupShape("y", "10"), Count: 2}, {Key: SubGroupShape("x", "b"), Count: 1}, {Key: SubGroupShape("x", "a"), Count: 1},
	}
	var got []string
	sizes := map[string]int{}
	for _, sg := range SubGroupsOf(shapes) {
		got = append(got, sg.Key)
		sizes[sg.Key] = sg.members()
	}
	if want := []string{"2", "10", "a", "b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("SubGroupsOf order = %v, want %v (numbers numerically, then names)", got, want)
	}
	if sizes["10"] != 3 {
		t.Errorf("sub-group 10 has %d members, want both its shapes' 3", sizes["10"])
	}
	for _, tt := range []struct {
		a, b string
		want bool
	}{{"2", "10", true}, {"10", "2", false}, {"a", "b", true}, {"10", "a", true}, {"3", "3", false}} {
		if got := SubGroupLess(tt.a, tt.b); got != tt.want {
			t.Errorf("SubGroupLess(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestDescribeSubGroups(t *testing.T) {
	for _, tt := range []struct {
		name string
		diag *Diagnosis
		want string
	}{
		{name: "a flat gang", diag: &Diagnosis{}, want: ""},
		{name: "in the cluster", diag: &Diagnosis{SubGroups: &SubGroupDiagnosis{Level: "clique", Size: 4, Need: 3, Placed: 1}},
			want: "1 of 3 sub-groups of 4 members fit in one clique each"},
		{name: "inside a domain", diag: &Diagnosis{SubGroups: &SubGroupDiagnosis{Level: "clique", Size: 4, Need: 3, Placed: 2, In: Domain{Level: "spine", Value: "s1"}}},
			want: "2 of 3 sub-groups of 4 members fit in one clique each inside spine s1"},
	} {
		if got := DescribeSubGroups(tt.diag); got != tt.want {
			t.Errorf("%s: DescribeSubGroups = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestWithMemoAgreesWithoutIt: remembered member counts give the plans a
// fresh count gives, copy after copy, as callers replace a node's room.
func TestWithMemoAgreesWithoutIt(t *testing.T) {
	build := func() []Node {
		var out []Node
		for i, free := range []int64{8000, 3000, 5000, 2000} {
			out = append(out, withDomains(node(string(rune('a'+i)), free, "w"), []string{"r1", "r2"}[i%2]))
		}
		return out
	}
	plain, memo := build(), build()
	WithMemo(memo)
	shapes := []Shape{{Key: "w", Request: cpu(1000), Count: 3}}
	for copyN := 0; ; copyN++ {
		p1, _ := Place(Request{Shapes: shapes, Nodes: plain, Levels: []string{"rack"}, Required: "rack"})
		p2, _ := Place(Request{Shapes: shapes, Nodes: memo, Levels: []string{"rack"}, Required: "rack"})
		if (p1 == nil) != (p2 == nil) || (p1 != nil && !reflect.DeepEqual(p1.Slots, p2.Slots)) {
			t.Fatalf("copy %d: plan %v without memo, %v with", copyN, p1, p2)
		}
		if p1 == nil {
			if copyN != 5 {
				t.Errorf("%d copies fit, want 5 (four in r1's 13 CPUs, one in r2's 5)", copyN)
			}
			return
		}
		for _, nodes := range [][]Node{plain, memo} {
			for i := range nodes {
				if c := p1.Slots[nodes[i].Name]["w"]; c > 0 {
					nodes[i].Free = nodes[i].Free.Clone()
					nodes[i].Free.AddScaled(cpu(1000), -int64(c))
				}
			}
		}
	}
}
