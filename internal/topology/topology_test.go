package topology

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	ibLabel   = "network.example.com/ib-cluster"
	leafLabel = "network.example.com/leaf"
	hostLabel = "kubernetes.io/hostname"
)

var threeLevels = []Level{
	{Name: "ib-cluster", NodeLabel: ibLabel},
	{Name: "leaf", NodeLabel: leafLabel},
	{Name: "host", NodeLabel: hostLabel},
}

func node(name string, kv ...string) *v1.Node {
	l := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[kv[i]] = kv[i+1]
	}
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
}

// labelNodes: ib-a{leaf-1{n1,n2}, leaf-2{n3}}, ib-b{leaf-3{n4}}, n5 has a
// leaf but no ib-cluster, n6 has no labels at all.
func labelNodes() []*v1.Node {
	return []*v1.Node{
		node("n3", ibLabel, "ib-a", leafLabel, "leaf-2", hostLabel, "n3"),
		node("n1", ibLabel, "ib-a", leafLabel, "leaf-1", hostLabel, "n1"),
		node("n2", ibLabel, "ib-a", leafLabel, "leaf-1", hostLabel, "n2"),
		node("n4", ibLabel, "ib-b", leafLabel, "leaf-3", hostLabel, "n4"),
		node("n5", leafLabel, "leaf-4", hostLabel, "n5"),
		node("n6"),
	}
}

func TestFromLevelsLevels(t *testing.T) {
	tr := FromLevels(threeLevels, labelNodes())
	if got, want := tr.Levels(), []string{"ib-cluster", "leaf", "host"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Levels() = %v, want %v", got, want)
	}
	// The returned slice is a copy.
	tr.Levels()[0] = "changed"
	if tr.Levels()[0] != "ib-cluster" {
		t.Fatal("Levels() exposes the tree's slice")
	}
}

func TestFromLevelsDomains(t *testing.T) {
	tr := FromLevels(threeLevels, labelNodes())
	for _, tc := range []struct {
		node string
		want []string
	}{
		{"n1", []string{"ib-a", "leaf-1", "n1"}},
		{"n3", []string{"ib-a", "leaf-2", "n3"}},
		{"n4", []string{"ib-b", "leaf-3", "n4"}},
		{"n5", []string{"", "leaf-4", "n5"}}, // no ib-cluster label
		{"n6", []string{"", "", ""}},         // no labels
		{"unknown", nil},
		{"", nil},
	} {
		t.Run(tc.node, func(t *testing.T) {
			got := tr.Domains(tc.node)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Domains(%q) = %#v, want %#v", tc.node, got, tc.want)
			}
			if (got != nil) != tr.Has(tc.node) {
				t.Fatalf("Has(%q) = %v disagrees with Domains", tc.node, tr.Has(tc.node))
			}
		})
	}
	tr.Domains("n1")[0] = "changed"
	if tr.Domains("n1")[0] != "ib-a" {
		t.Fatal("Domains() exposes the tree's slice")
	}
}

func TestFromLevelsNodes(t *testing.T) {
	tr := FromLevels(threeLevels, labelNodes())
	for _, tc := range []struct {
		name, level, value string
		want               []string
	}{
		{"widest", "ib-cluster", "ib-a", []string{"n1", "n2", "n3"}},
		{"widest other", "ib-cluster", "ib-b", []string{"n4"}},
		{"middle", "leaf", "leaf-1", []string{"n1", "n2"}},
		{"node without wider label", "leaf", "leaf-4", []string{"n5"}},
		{"narrowest", "host", "n2", []string{"n2"}},
		{"empty value is no domain", "ib-cluster", "", nil},
		{"unknown value", "leaf", "leaf-9", nil},
		{"unknown level", "rack", "leaf-1", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tr.Nodes(tc.level, tc.value); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Nodes(%q, %q) = %v, want %v", tc.level, tc.value, got, tc.want)
			}
		})
	}
	if got, want := tr.Values("leaf"), []string{"leaf-1", "leaf-2", "leaf-3", "leaf-4"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Values(leaf) = %v, want %v", got, want)
	}
	if got := tr.Values("rack"); got != nil {
		t.Fatalf("Values(rack) = %v, want nil", got)
	}
	tr.Nodes("ib-cluster", "ib-a")[0] = "changed"
	if tr.Nodes("ib-cluster", "ib-a")[0] != "n1" {
		t.Fatal("Nodes() exposes the tree's slice")
	}
}

func TestDistance(t *testing.T) {
	tr := FromLevels(threeLevels, labelNodes())
	// 3 levels: 1 = same host value, 2 = same leaf, 3 = same ib-cluster,
	// 4 (= len(Levels())+1) = nothing shared or unknown.
	for _, tc := range []struct {
		name string
		a, b string
		want int
	}{
		{"same node", "n1", "n1", 0},
		{"same unknown node", "x", "x", 0},
		{"same leaf", "n1", "n2", 2},
		{"same ib-cluster, different leaf", "n1", "n3", 3},
		{"different ib-cluster", "n1", "n4", 4},
		{"missing wider label, different leaf", "n1", "n5", 4},
		{"no labels at all", "n6", "n1", 4},
		{"both without labels", "n6", "n5", 4},
		{"unknown node", "n1", "x", 4},
		{"unknown node first", "x", "n1", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tr.Distance(tc.a, tc.b); got != tc.want {
				t.Fatalf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
			}
			if got := tr.Distance(tc.b, tc.a); got != tc.want {
				t.Fatalf("Distance(%q, %q) = %d, want %d (not symmetric)", tc.b, tc.a, got, tc.want)
			}
		})
	}

	// Two distinct nodes sharing the narrowest level's value are 1 apart.
	shared := FromLevels(threeLevels, []*v1.Node{
		node("a", ibLabel, "ib", leafLabel, "l", hostLabel, "h"),
		node("b", ibLabel, "ib", leafLabel, "l", hostLabel, "h"),
	})
	if got := shared.Distance("a", "b"); got != 1 {
		t.Fatalf("Distance with shared narrowest domain = %d, want 1", got)
	}

	// Without levels, distinct nodes share nothing: 0 levels + 1.
	flat := FromLevels(nil, labelNodes())
	if got := flat.Distance("n1", "n2"); got != 1 {
		t.Fatalf("Distance without levels = %d, want 1", got)
	}
	if got := flat.Domains("n1"); got == nil || len(got) != 0 {
		t.Fatalf("Domains without levels = %#v, want empty non-nil", got)
	}
}

func TestFromLevelsEdgeCases(t *testing.T) {
	for _, tc := range []struct {
		name   string
		levels []Level
		nodes  []*v1.Node
		check  func(t *testing.T, tr *Tree)
	}{
		{
			name:   "nil nodes are skipped, first duplicate wins",
			levels: threeLevels[:1],
			nodes:  []*v1.Node{nil, node("a", ibLabel, "x"), node("a", ibLabel, "y")},
			check: func(t *testing.T, tr *Tree) {
				if got := tr.Domains("a"); !reflect.DeepEqual(got, []string{"x"}) {
					t.Fatalf("Domains(a) = %v, want [x]", got)
				}
				if got := tr.Nodes("ib-cluster", "y"); got != nil {
					t.Fatalf("Nodes(y) = %v, want nil", got)
				}
			},
		},
		{
			name:   "level without label key",
			levels: []Level{{Name: "ib-cluster", NodeLabel: ibLabel}, {Name: "empty"}},
			nodes:  []*v1.Node{node("a", ibLabel, "x", "", "v")},
			check: func(t *testing.T, tr *Tree) {
				if got := tr.Domains("a"); !reflect.DeepEqual(got, []string{"x", ""}) {
					t.Fatalf("Domains(a) = %v, want [x \"\"]", got)
				}
			},
		},
		{
			name:   "repeated level name: Nodes uses the first",
			levels: []Level{{Name: "l", NodeLabel: ibLabel}, {Name: "l", NodeLabel: leafLabel}},
			nodes:  []*v1.Node{node("a", ibLabel, "x", leafLabel, "y")},
			check: func(t *testing.T, tr *Tree) {
				if got := tr.Nodes("l", "x"); !reflect.DeepEqual(got, []string{"a"}) {
					t.Fatalf("Nodes(l, x) = %v, want [a]", got)
				}
			},
		},
		{
			name: "nil tree",
			check: func(t *testing.T, _ *Tree) {
				var tr *Tree
				if tr.Levels() != nil || tr.Domains("a") != nil || tr.Nodes("l", "v") != nil || tr.Values("l") != nil || tr.Has("a") {
					t.Fatal("nil tree is not empty")
				}
				if tr.Distance("a", "a") != 0 || tr.Distance("a", "b") != 1 {
					t.Fatal("nil tree distances wrong")
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(t, FromLevels(tc.levels, tc.nodes))
		})
	}
}
