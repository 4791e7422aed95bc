package topology

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// hyperNodes decodes YAML documents (separated by "---") the way an informer
// would hand them over: JSON numbers become int64.
func hyperNodes(t *testing.T, docs string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(docs, "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		j, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("yaml: %v", err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(j); err != nil {
			t.Fatalf("decode %s: %v", j, err)
		}
		out = append(out, u)
	}
	return out
}

// hn renders one HyperNode document; members is YAML for spec.members.
func hn(name, tier, members string) string {
	return fmt.Sprintf(`apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata:
  name: %s
spec:
  tier: %s
  members:
%s`, name, tier, members)
}

// hnLabeled is hn with metadata labels (for labelMatch on HyperNodes).
func hnLabeled(name, tier, lbls, members string) string {
	return fmt.Sprintf(`apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata:
  name: %s
  labels: {%s}
spec:
  tier: %s
  members:
%s`, name, lbls, tier, members)
}

func exactM(typ, name string) string {
	return fmt.Sprintf("  - {type: %s, selector: {exactMatch: {name: %q}}}\n", typ, name)
}

func regexM(typ, pattern string) string {
	return fmt.Sprintf("  - {type: %s, selector: {regexMatch: {pattern: %q}}}\n", typ, pattern)
}

func labelM(typ, selector string) string {
	return fmt.Sprintf("  - {type: %s, selector: {labelMatch: %s}}\n", typ, selector)
}

func docs(d ...string) string { return strings.Join(d, "\n---\n") }

// reversed returns a copy in reverse order; rotated a copy rotated by one.
func reversed[T any](s []T) []T {
	out := make([]T, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

func rotated[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return append(append([]T(nil), s[1:]...), s[0])
}

func errStrings(errs []error) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// equivalentTopology is one cluster described twice: by HyperNodes and by the
// node labels ibLabel (tier-2) and leafLabel (tier-1).
//
//	ib-a (tier 2): leaf-1 (exactMatch), leaf-2 (regexMatch)
//	  leaf-1 (tier 1): n1 (exactMatch), gpu-a-* (regexMatch)
//	  leaf-2 (tier 1): rack=r2 (labelMatch matchLabels), rack in (r3) (matchExpressions)
//	ib-b (tier 2): HyperNodes labelled ib=b (labelMatch on HyperNode labels)
//	  leaf-3 (tier 1): n9
//	leaf-orphan (tier 1, no parent): lonely
//	free: no HyperNode at all
func equivalentTopology(t *testing.T) ([]*unstructured.Unstructured, []*v1.Node) {
	hns := hyperNodes(t, docs(
		hn("ib-a", "2", exactM("HyperNode", "leaf-1")+regexM("HyperNode", "^leaf-2$")),
		hn("leaf-1", "1", exactM("Node", "n1")+regexM("Node", "^gpu-a-[0-9]+$")),
		hn("leaf-2", "1", labelM("Node", "{matchLabels: {rack: r2}}")+
			labelM("Node", "{matchExpressions: [{key: rack, operator: In, values: [r3]}]}")),
		hn("ib-b", "2", labelM("HyperNode", "{matchLabels: {ib: b}}")),
		hnLabeled("leaf-3", "1", "ib: b", exactM("Node", "n9")),
		hn("leaf-orphan", "1", exactM("Node", "lonely")),
	))
	nodes := []*v1.Node{
		node("n1", ibLabel, "ib-a", leafLabel, "leaf-1"),
		node("gpu-a-1", ibLabel, "ib-a", leafLabel, "leaf-1"),
		node("gpu-a-2", ibLabel, "ib-a", leafLabel, "leaf-1"),
		node("n2", "rack", "r2", ibLabel, "ib-a", leafLabel, "leaf-2"),
		node("n3", "rack", "r3", ibLabel, "ib-a", leafLabel, "leaf-2"),
		node("n9", ibLabel, "ib-b", leafLabel, "leaf-3"),
		node("lonely", leafLabel, "leaf-orphan"),
		node("free"),
		node("gpu-b-1", "rack", "r4"), // near-misses of every selector
	}
	return hns, nodes
}

func TestFromHyperNodesMatchesFromLevels(t *testing.T) {
	hns, nodes := equivalentTopology(t)
	got, errs := FromHyperNodes(hns, nodes)
	if len(errs) != 0 {
		t.Fatalf("errors: %v", errs)
	}
	want := FromLevels([]Level{{Name: "tier-2", NodeLabel: ibLabel}, {Name: "tier-1", NodeLabel: leafLabel}}, nodes)

	if !reflect.DeepEqual(got.Levels(), want.Levels()) {
		t.Fatalf("Levels() = %v, want %v", got.Levels(), want.Levels())
	}
	// Spot-check the expected shape, not only the equivalence.
	for n, d := range map[string][]string{
		"n1":      {"ib-a", "leaf-1"},
		"gpu-a-2": {"ib-a", "leaf-1"},
		"n2":      {"ib-a", "leaf-2"},
		"n3":      {"ib-a", "leaf-2"},
		"n9":      {"ib-b", "leaf-3"},
		"lonely":  {"", "leaf-orphan"},
		"free":    {"", ""},
		"gpu-b-1": {"", ""},
	} {
		if g := got.Domains(n); !reflect.DeepEqual(g, d) {
			t.Errorf("Domains(%q) = %v, want %v", n, g, d)
		}
	}
	for _, n := range nodes {
		if g, w := got.Domains(n.Name), want.Domains(n.Name); !reflect.DeepEqual(g, w) {
			t.Errorf("Domains(%q) = %v, FromLevels gives %v", n.Name, g, w)
		}
		for _, m := range nodes {
			if g, w := got.Distance(n.Name, m.Name), want.Distance(n.Name, m.Name); g != w {
				t.Errorf("Distance(%q, %q) = %d, FromLevels gives %d", n.Name, m.Name, g, w)
			}
		}
	}
	for _, level := range want.Levels() {
		if g, w := got.Values(level), want.Values(level); !reflect.DeepEqual(g, w) {
			t.Errorf("Values(%q) = %v, FromLevels gives %v", level, g, w)
		}
		for _, v := range want.Values(level) {
			if g, w := got.Nodes(level, v), want.Nodes(level, v); !reflect.DeepEqual(g, w) {
				t.Errorf("Nodes(%q, %q) = %v, FromLevels gives %v", level, v, g, w)
			}
		}
	}
	if g := got.Distance("n1", "gpu-a-1"); g != 1 {
		t.Errorf("Distance within a leaf = %d, want 1", g)
	}
	if g := got.Distance("n1", "n2"); g != 2 {
		t.Errorf("Distance within ib-a across leaves = %d, want 2", g)
	}
	if g := got.Distance("n1", "n9"); g != 3 {
		t.Errorf("Distance across ib = %d, want 3", g)
	}
}

func TestFromHyperNodesInputOrder(t *testing.T) {
	hns, nodes := equivalentTopology(t)
	// Add conflicts so that errors are compared too.
	hns = append(hns, hyperNodes(t, docs(
		hn("leaf-0", "1", exactM("Node", "n1")+regexM("Node", "^n[23]$")),
		hn("ib-0", "2", exactM("HyperNode", "leaf-2")),
		hn("bad", "x", ""),
	))...)
	base, baseErrs := FromHyperNodes(hns, nodes)
	if len(baseErrs) == 0 {
		t.Fatal("expected conflict errors")
	}
	for name, in := range map[string]struct {
		hns   []*unstructured.Unstructured
		nodes []*v1.Node
	}{
		"reversed": {reversed(hns), reversed(nodes)},
		"rotated":  {rotated(hns), rotated(nodes)},
		"mixed":    {rotated(reversed(hns)), nodes},
	} {
		t.Run(name, func(t *testing.T) {
			tr, errs := FromHyperNodes(in.hns, in.nodes)
			if !reflect.DeepEqual(errStrings(errs), errStrings(baseErrs)) {
				t.Fatalf("errors differ:\n%v\nvs\n%v", errStrings(errs), errStrings(baseErrs))
			}
			if !reflect.DeepEqual(tr.Levels(), base.Levels()) {
				t.Fatalf("Levels differ: %v vs %v", tr.Levels(), base.Levels())
			}
			for _, n := range nodes {
				if g, w := tr.Domains(n.Name), base.Domains(n.Name); !reflect.DeepEqual(g, w) {
					t.Fatalf("Domains(%q) = %v, want %v", n.Name, g, w)
				}
			}
		})
	}
}

func TestFromHyperNodesShapes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		hns     string
		nodes   []*v1.Node
		levels  []string
		domains map[string][]string
	}{
		{
			name:    "no HyperNodes: nodes known, no levels",
			nodes:   []*v1.Node{node("a")},
			levels:  []string{},
			domains: map[string][]string{"a": {}},
		},
		{
			name: "skipped tier: tier-3 holds a tier-1 directly",
			hns: docs(
				hn("spine", "3", exactM("HyperNode", "leaf")),
				hn("leaf", "1", exactM("Node", "a")),
			),
			nodes:   []*v1.Node{node("a"), node("b")},
			levels:  []string{"tier-3", "tier-1"},
			domains: map[string][]string{"a": {"spine", "leaf"}, "b": {"", ""}},
		},
		{
			name: "node member of a tier-2 HyperNode",
			hns: docs(
				hn("ib", "2", exactM("Node", "a")),
				hn("leaf", "1", exactM("Node", "b")),
			),
			nodes:   []*v1.Node{node("a"), node("b")},
			levels:  []string{"tier-2", "tier-1"},
			domains: map[string][]string{"a": {"ib", ""}, "b": {"", "leaf"}},
		},
		{
			name: "three tiers, members naming missing nodes and HyperNodes",
			hns: docs(
				hn("dc", "3", exactM("HyperNode", "ib")+exactM("HyperNode", "ghost")),
				hn("ib", "2", regexM("HyperNode", "^leaf")),
				hn("leaf", "1", exactM("Node", "a")+exactM("Node", "missing")),
			),
			nodes:   []*v1.Node{node("a")},
			levels:  []string{"tier-3", "tier-2", "tier-1"},
			domains: map[string][]string{"a": {"dc", "ib", "leaf"}, "missing": nil},
		},
		{
			name: "one HyperNode selecting a node twice is no conflict",
			hns: docs(
				hn("leaf", "1", exactM("Node", "a")+regexM("Node", "^a$")),
			),
			nodes:   []*v1.Node{node("a")},
			levels:  []string{"tier-1"},
			domains: map[string][]string{"a": {"leaf"}},
		},
		{
			name: "tier as a JSON float with an integral value",
			hns: docs(
				hn("leaf", "1.0", exactM("Node", "a")),
			),
			nodes:   []*v1.Node{node("a")},
			levels:  []string{"tier-1"},
			domains: map[string][]string{"a": {"leaf"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, errs := FromHyperNodes(hyperNodes(t, tc.hns), tc.nodes)
			if len(errs) != 0 {
				t.Fatalf("errors: %v", errs)
			}
			if got := tr.Levels(); !(len(got) == 0 && len(tc.levels) == 0) && !reflect.DeepEqual(got, tc.levels) {
				t.Fatalf("Levels() = %v, want %v", got, tc.levels)
			}
			for n, want := range tc.domains {
				if got := tr.Domains(n); !reflect.DeepEqual(got, want) {
					t.Errorf("Domains(%q) = %#v, want %#v", n, got, want)
				}
			}
		})
	}
}

func TestFromHyperNodesErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hns   string
		extra []*unstructured.Unstructured
		nodes []*v1.Node
		// errs lists, per expected error, substrings it must contain
		// (the first is always the HyperNode at fault).
		errs    [][]string
		levels  []string
		domains map[string][]string
	}{
		{
			name: "missing tier",
			hns: docs(
				`{apiVersion: topology.volcano.sh/v1alpha1, kind: HyperNode, metadata: {name: notier}, spec: {members: [{type: Node, selector: {exactMatch: {name: a}}}]}}`,
				hn("leaf", "1", exactM("Node", "b")),
			),
			nodes:   []*v1.Node{node("a"), node("b")},
			errs:    [][]string{{`"notier"`, "tier is missing"}},
			levels:  []string{"tier-1"},
			domains: map[string][]string{"a": {""}, "b": {"leaf"}},
		},
		{
			name: "tier is a string",
			hns: docs(
				hn("strtier", `"2"`, exactM("Node", "a")),
				hn("leaf", "1", exactM("Node", "b")),
			),
			nodes:   []*v1.Node{node("a"), node("b")},
			errs:    [][]string{{`"strtier"`, "not an integer"}},
			levels:  []string{"tier-1"},
			domains: map[string][]string{"a": {""}, "b": {"leaf"}},
		},
		{
			name:    "tier zero",
			hns:     hn("zero", "0", exactM("Node", "a")),
			nodes:   []*v1.Node{node("a")},
			errs:    [][]string{{`"zero"`, "out of range"}},
			levels:  []string{},
			domains: map[string][]string{"a": {}},
		},
		{
			name:    "negative tier",
			hns:     hn("neg", "-1", exactM("Node", "a")),
			nodes:   []*v1.Node{node("a")},
			errs:    [][]string{{`"neg"`, "out of range"}},
			levels:  []string{},
			domains: map[string][]string{"a": {}},
		},
		{
			name:    "fractional tier",
			hns:     hn("frac", "1.5", exactM("Node", "a")),
			nodes:   []*v1.Node{node("a")},
			errs:    [][]string{{`"frac"`, "not an integer"}},
			levels:  []string{},
			domains: map[string][]string{"a": {}},
		},
		{
			name:    "invalid regex: the member is dropped, the rest kept",
			hns:     hn("leaf", "1", regexM("Node", "([a-")+exactM("Node", "b")),
			nodes:   []*v1.Node{node("a"), node("b")},
			errs:    [][]string{{`"leaf"`, "spec.members[0]", "invalid regexMatch"}},
			levels:  []string{"tier-1"},
			domains: map[string][]string{"a": {""}, "b": {"leaf"}},
		},
		{
			name:    "unknown member type",
			hns:     hn("leaf", "1", exactM("Switch", "a")+exactM("Node", "b")),
			nodes:   []*v1.Node{node("a"), node("b")},
			errs:    [][]string{{`"leaf"`, "spec.members[0]", `unknown type "Switch"`}},
			levels:  []string{"tier-1"},
			domains: map[string][]string{"a": {""}, "b": {"leaf"}},
		},
		{
			name:    "member without type",
			hns:     hn("leaf", "1", "  - {selector: {exactMatch: {name: a}}}\n"),
			nodes:   []*v1.Node{node("a")},
			errs:    [][]string{{`"leaf"`, "no type"}},
			levels:  []string{"tier-1"},
			domains: map[string][]string{"a": {""}},
		},
		{
			name: "bad selectors: none, two, empty labelMatch, empty name",
			hns: hn("leaf", "1",
				"  - {type: Node}\n"+
					"  - {type: Node, selector: {}}\n"+
					"  - {type: Node, selector: {exactMatch: {name: a}, regexMatch: {pattern: a}}}\n"+
					labelM("Node", "{}")+
					exactM("Node", "")+
					labelM("Node", "{matchExpressions: [{key: rack, operator: Bogus}]}")+
					exactM("Node", "b")),
			nodes: []*v1.Node{node("a"), node("b")},
			errs: [][]string{
				{`"leaf"`, "members[0]", "no selector"},
				{`"leaf"`, "members[1]", "none of"},
				{`"leaf"`, "members[2]", "more than one"},
				{`"leaf"`, "members[3]", "labelMatch is empty"},
				{`"leaf"`, "members[4]", "no name"},
				{`"leaf"`, "members[5]", "invalid labelMatch"},
			},
			levels:  []string{"tier-1"},
			domains: map[string][]string{"a": {""}, "b": {"leaf"}},
		},
		{
			name: "node claimed by two HyperNodes of the same tier",
			hns: docs(
				hn("leaf-b", "1", exactM("Node", "a")+exactM("Node", "c")),
				hn("leaf-a", "1", regexM("Node", "^[ab]$")),
			),
			nodes:   []*v1.Node{node("a"), node("b"), node("c")},
			errs:    [][]string{{`"leaf-b"`, `node "a"`, `"leaf-a"`}},
			levels:  []string{"tier-1"},
			domains: map[string][]string{"a": {"leaf-a"}, "b": {"leaf-a"}, "c": {"leaf-b"}},
		},
		{
			name: "HyperNode claimed by two parents of the same tier",
			hns: docs(
				hn("ib-b", "2", exactM("HyperNode", "leaf-1")+exactM("HyperNode", "leaf-2")),
				hn("ib-a", "2", regexM("HyperNode", "^leaf-1$")),
				hn("leaf-1", "1", exactM("Node", "a")),
				hn("leaf-2", "1", exactM("Node", "b")),
			),
			nodes:   []*v1.Node{node("a"), node("b")},
			errs:    [][]string{{`"ib-b"`, `HyperNode "leaf-1"`, `"ib-a"`}},
			levels:  []string{"tier-2", "tier-1"},
			domains: map[string][]string{"a": {"ib-a", "leaf-1"}, "b": {"ib-b", "leaf-2"}},
		},
		{
			name: "node under two tier-2 HyperNodes through different paths",
			hns: docs(
				hn("ib-a", "2", exactM("HyperNode", "leaf-1")),
				hn("ib-b", "2", exactM("Node", "a")),
				hn("leaf-1", "1", exactM("Node", "a")),
			),
			nodes:   []*v1.Node{node("a")},
			errs:    [][]string{{`"ib-b"`, `node "a"`, `"ib-a"`}},
			levels:  []string{"tier-2", "tier-1"},
			domains: map[string][]string{"a": {"ib-a", "leaf-1"}},
		},
		{
			name: "parent tier not greater than its member's",
			hns: docs(
				hn("leaf-x", "1", exactM("HyperNode", "leaf-y")+exactM("Node", "a")),
				hn("leaf-y", "1", exactM("Node", "b")),
				hn("ib", "2", exactM("HyperNode", "spine")+exactM("HyperNode", "leaf-y")),
				hn("spine", "3", exactM("Node", "c")),
				hn("self", "2", exactM("HyperNode", "self")),
			),
			nodes: []*v1.Node{node("a"), node("b"), node("c")},
			errs: [][]string{
				{`"ib"`, `member HyperNode "spine" has tier 3`},
				{`"leaf-x"`, `member HyperNode "leaf-y" has tier 1`},
				{`"self"`, `member HyperNode "self" has tier 2`},
			},
			levels:  []string{"tier-3", "tier-2", "tier-1"},
			domains: map[string][]string{"a": {"", "", "leaf-x"}, "b": {"", "ib", "leaf-y"}, "c": {"spine", "", ""}},
		},
		{
			name: "duplicate HyperNode name",
			hns: docs(
				hn("leaf", "1", exactM("Node", "a")),
				hn("leaf", "1", exactM("Node", "b")),
				hn("other", "1", exactM("Node", "c")),
			),
			nodes:   []*v1.Node{node("a"), node("b"), node("c")},
			errs:    [][]string{{`"leaf"`, "given 2 times"}},
			levels:  []string{"tier-1"},
			domains: map[string][]string{"a": {""}, "b": {""}, "c": {"other"}},
		},
		{
			name: "wrong kind",
			hns: docs(
				`{apiVersion: v1, kind: ConfigMap, metadata: {name: cm}, spec: {tier: 1, members: [{type: Node, selector: {exactMatch: {name: a}}}]}}`,
			),
			nodes:   []*v1.Node{node("a")},
			errs:    [][]string{{`"cm"`, "ConfigMap"}},
			levels:  []string{},
			domains: map[string][]string{"a": {}},
		},
		{
			name:    "nil objects are skipped",
			extra:   []*unstructured.Unstructured{nil},
			nodes:   []*v1.Node{node("a"), nil},
			levels:  []string{},
			domains: map[string][]string{"a": {}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := append(hyperNodes(t, tc.hns), tc.extra...)
			tr, errs := FromHyperNodes(in, tc.nodes)
			if len(errs) != len(tc.errs) {
				t.Fatalf("got %d errors %q, want %d", len(errs), errStrings(errs), len(tc.errs))
			}
			for i, subs := range tc.errs {
				for _, s := range subs {
					if !strings.Contains(errs[i].Error(), s) {
						t.Errorf("error %d %q does not contain %q", i, errs[i], s)
					}
				}
				if !strings.HasPrefix(errs[i].Error(), "HyperNode "+subs[0]) {
					t.Errorf("error %d %q does not start with the HyperNode at fault %s", i, errs[i], subs[0])
				}
			}
			if got := tr.Levels(); !(len(got) == 0 && len(tc.levels) == 0) && !reflect.DeepEqual(got, tc.levels) {
				t.Fatalf("Levels() = %v, want %v", got, tc.levels)
			}
			for n, want := range tc.domains {
				if got := tr.Domains(n); !reflect.DeepEqual(got, want) {
					t.Errorf("Domains(%q) = %#v, want %#v", n, got, want)
				}
			}
			// The same result whatever the input order.
			tr2, errs2 := FromHyperNodes(reversed(in), reversed(tc.nodes))
			if !reflect.DeepEqual(errStrings(errs2), errStrings(errs)) {
				t.Fatalf("reversed input: errors %q, want %q", errStrings(errs2), errStrings(errs))
			}
			for n := range tc.domains {
				if !reflect.DeepEqual(tr2.Domains(n), tr.Domains(n)) {
					t.Fatalf("reversed input: Domains(%q) = %v, want %v", n, tr2.Domains(n), tr.Domains(n))
				}
			}
		})
	}
}
