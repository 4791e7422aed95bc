package topology

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// HyperNodeGVR is the resource of Volcano HyperNodes (cluster-scoped).
var HyperNodeGVR = schema.GroupVersionResource{Group: "topology.volcano.sh", Version: "v1alpha1", Resource: "hypernodes"}

// HyperNodeKind is the kind of Volcano HyperNodes.
const HyperNodeKind = "HyperNode"

// Member types of a HyperNode.
const (
	MemberNode      = "Node"
	MemberHyperNode = "HyperNode"
)

// TierLevel names the level of HyperNode tier n ("tier-<n>").
func TierLevel(tier int) string { return "tier-" + strconv.Itoa(tier) }

// hyperNode is the part of a HyperNode the tree needs.
type hyperNode struct {
	name    string
	tier    int
	labels  labels.Set
	members []member
}

// member is one parsed spec.members[] entry; exactly one matcher is set.
type member struct {
	typ   string
	exact string
	re    *regexp.Regexp
	sel   labels.Selector
}

func (m member) matches(name string, l labels.Set) bool {
	switch {
	case m.exact != "":
		return name == m.exact
	case m.re != nil:
		return m.re.MatchString(name)
	case m.sel != nil:
		return m.sel.Matches(l)
	}
	return false
}

// FromHyperNodes builds a tree from Volcano HyperNode objects
// (topology.volcano.sh/v1alpha1) and the cluster's nodes.
//
// Levels are named tier-<n>, one per tier used by a valid HyperNode, widest
// (highest tier) first. A node's domain at tier-k is the name of the tier-k
// HyperNode containing it directly (a Node member) or through its chain of
// parents (HyperNode members), "" if none. Every given node is known to the
// tree, members or not; members naming nodes or HyperNodes that do not exist
// are ignored.
//
// Member selectors follow Volcano: exactMatch compares the name, regexMatch is
// an unanchored Go regular expression on the name (anchor it with ^...$), and
// labelMatch is a label selector on the Node's or the HyperNode's labels.
//
// Problems are returned, never panicked on, and the tree is built from the
// rest; every message names the HyperNode at fault:
//   - a missing or invalid spec.tier (must be an integer >= 1): the HyperNode
//     is ignored;
//   - a member with an unknown type, no selector, more than one selector, an
//     empty exactMatch name or regexMatch pattern, an invalid regex, or an
//     invalid or empty labelMatch: that member is ignored;
//   - a HyperNode member whose tier is not lower than its parent's: that
//     membership is ignored;
//   - a node or HyperNode claimed by two HyperNodes of the same tier (directly
//     or through parents): the lexicographically first HyperNode keeps it,
//     the other is reported;
//   - a HyperNode name given more than once: every copy is ignored.
//
// The result (tree and errors) does not depend on the order of the inputs.
func FromHyperNodes(hyperNodes []*unstructured.Unstructured, nodes []*v1.Node) (*Tree, []error) {
	b := &hnBuilder{}
	hns := b.parse(hyperNodes)

	// Direct containment: child -> tier -> claiming HyperNodes (sorted,
	// since hns is sorted by name).
	nodeNames, nodeLabels := sortedNodes(nodes)
	nodeClaims := map[string]map[int][]string{}
	hnParents := map[string]map[int][]string{}
	for _, h := range hns {
		for _, m := range h.members {
			switch m.typ {
			case MemberNode:
				if m.exact != "" { // the common case: no scan
					if _, ok := nodeLabels[m.exact]; ok {
						addClaim(nodeClaims, m.exact, h.tier, h.name)
					}
					continue
				}
				for _, n := range nodeNames {
					if m.matches(n, nodeLabels[n]) {
						addClaim(nodeClaims, n, h.tier, h.name)
					}
				}
			case MemberHyperNode:
				for _, c := range hns {
					if !m.matches(c.name, c.labels) {
						continue
					}
					if c.tier >= h.tier {
						b.errorf("HyperNode %q (tier %d): member HyperNode %q has tier %d; a parent's tier must be greater than its members'", h.name, h.tier, c.name, c.tier)
						continue
					}
					addClaim(hnParents, c.name, h.tier, h.name)
				}
			}
		}
	}

	// Ancestors of every HyperNode, resolved once each, in name order so
	// that the errors come out in a fixed order.
	b.parents = hnParents
	b.ancestors = map[string]map[int]string{}
	for _, h := range hns {
		b.ancestorsOf(h.name)
	}

	tierSet := map[int]bool{}
	for _, h := range hns {
		tierSet[h.tier] = true
	}
	tiers := make([]int, 0, len(tierSet))
	for t := range tierSet {
		tiers = append(tiers, t)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(tiers)))
	levels := make([]string, len(tiers))
	for i, t := range tiers {
		levels[i] = TierLevel(t)
	}

	domains := make(map[string][]string, len(nodeNames))
	for _, n := range nodeNames {
		chosen := b.resolve("node", n, nodeClaims[n])
		d := make([]string, len(tiers))
		for i, t := range tiers {
			d[i] = chosen[t]
		}
		domains[n] = d
	}
	return newTree(levels, domains), b.errs
}

type hnBuilder struct {
	errs      []error
	parents   map[string]map[int][]string
	ancestors map[string]map[int]string
}

func (b *hnBuilder) errorf(format string, args ...any) {
	b.errs = append(b.errs, fmt.Errorf(format, args...))
}

// ancestorsOf returns tier -> HyperNode above the named HyperNode. Parents
// always have a greater tier than their members, so the recursion ends.
func (b *hnBuilder) ancestorsOf(name string) map[int]string {
	if a, ok := b.ancestors[name]; ok {
		return a
	}
	a := b.resolve("HyperNode", name, b.parents[name])
	b.ancestors[name] = a
	return a
}

// resolve picks, tier by tier from the narrowest, one HyperNode for a node or
// HyperNode from its direct claims plus the ancestors of the HyperNodes
// already picked at narrower tiers. The lexicographically first candidate of
// a tier wins; the others are reported.
func (b *hnBuilder) resolve(what, name string, direct map[int][]string) map[int]string {
	chosen := map[int]string{}
	cands := map[int]map[string]bool{}
	add := func(tier int, hn string) {
		if cands[tier] == nil {
			cands[tier] = map[string]bool{}
		}
		cands[tier][hn] = true
	}
	for t, hs := range direct {
		for _, h := range hs {
			add(t, h)
		}
	}
	for {
		// The narrowest tier with candidates and no pick yet; picks only
		// add candidates at wider tiers.
		tier, found := 0, false
		for t := range cands {
			if _, done := chosen[t]; !done && (!found || t < tier) {
				tier, found = t, true
			}
		}
		if !found {
			return chosen
		}
		hs := make([]string, 0, len(cands[tier]))
		for h := range cands[tier] {
			hs = append(hs, h)
		}
		sort.Strings(hs)
		chosen[tier] = hs[0]
		for _, other := range hs[1:] {
			b.errorf("HyperNode %q (tier %d): %s %q is already in tier-%d HyperNode %q; membership ignored", other, tier, what, name, tier, hs[0])
		}
		for t, a := range b.ancestorsOf(hs[0]) {
			add(t, a)
		}
	}
}

func addClaim(claims map[string]map[int][]string, child string, tier int, hn string) {
	byTier := claims[child]
	if byTier == nil {
		byTier = map[int][]string{}
		claims[child] = byTier
	}
	hs := byTier[tier]
	if len(hs) > 0 && hs[len(hs)-1] == hn {
		return // the same HyperNode selects it through several members
	}
	byTier[tier] = append(hs, hn)
}

func sortedNodes(nodes []*v1.Node) ([]string, map[string]labels.Set) {
	lbls := make(map[string]labels.Set, len(nodes))
	names := make([]string, 0, len(nodes))
	for _, n := range nodes {
		if n == nil {
			continue
		}
		if _, seen := lbls[n.Name]; seen {
			continue
		}
		lbls[n.Name] = labels.Set(n.Labels)
		names = append(names, n.Name)
	}
	sort.Strings(names)
	return names, lbls
}

// parse returns the valid HyperNodes sorted by name, recording errors.
func (b *hnBuilder) parse(objs []*unstructured.Unstructured) []hyperNode {
	count := map[string]int{}
	var sorted []*unstructured.Unstructured
	for _, o := range objs {
		if o == nil {
			continue
		}
		count[o.GetName()]++
		sorted = append(sorted, o)
	}
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].GetName() < sorted[j].GetName() })
	var out []hyperNode
	for i, o := range sorted {
		name := o.GetName()
		if c := count[name]; c > 1 {
			if i == 0 || sorted[i-1].GetName() != name {
				b.errorf("HyperNode %q: given %d times; ignored", name, c)
			}
			continue
		}
		if k := o.GetKind(); k != "" && k != HyperNodeKind {
			b.errorf("HyperNode %q: kind is %q, not %s; ignored", name, k, HyperNodeKind)
			continue
		}
		tier, err := parseTier(o)
		if err != nil {
			b.errorf("HyperNode %q: %v; ignored", name, err)
			continue
		}
		h := hyperNode{name: name, tier: tier, labels: labels.Set(o.GetLabels())}
		raw, found, err := unstructured.NestedFieldNoCopy(o.Object, "spec", "members")
		if err != nil {
			b.errorf("HyperNode %q: spec.members: %v", name, err)
		}
		if found && raw != nil {
			list, ok := raw.([]interface{})
			if !ok {
				b.errorf("HyperNode %q: spec.members is a %T, not a list", name, raw)
			}
			for mi, rm := range list {
				m, err := parseMember(rm)
				if err != nil {
					b.errorf("HyperNode %q: spec.members[%d]: %v; ignored", name, mi, err)
					continue
				}
				h.members = append(h.members, m)
			}
		}
		out = append(out, h)
	}
	return out
}

func parseTier(o *unstructured.Unstructured) (int, error) {
	raw, found, err := unstructured.NestedFieldNoCopy(o.Object, "spec", "tier")
	if err != nil {
		return 0, fmt.Errorf("spec.tier: %v", err)
	}
	if !found || raw == nil {
		return 0, fmt.Errorf("spec.tier is missing")
	}
	var t int64
	switch v := raw.(type) {
	case int64:
		t = v
	case int:
		t = int64(v)
	case int32:
		t = int64(v)
	case float64:
		if v != math.Trunc(v) || v < math.MinInt32 || v > math.MaxInt32 {
			return 0, fmt.Errorf("spec.tier %v is not an integer", v)
		}
		t = int64(v)
	default:
		return 0, fmt.Errorf("spec.tier %v is a %T, not an integer", raw, raw)
	}
	if t < 1 || t > math.MaxInt32 {
		return 0, fmt.Errorf("spec.tier %d is out of range (must be >= 1)", t)
	}
	return int(t), nil
}

func parseMember(raw interface{}) (member, error) {
	obj, ok := raw.(map[string]interface{})
	if !ok {
		return member{}, fmt.Errorf("is a %T, not an object", raw)
	}
	typ, found, _ := unstructured.NestedFieldNoCopy(obj, "type")
	if !found || typ == nil {
		return member{}, fmt.Errorf("has no type (want %s or %s)", MemberNode, MemberHyperNode)
	}
	ts, _ := typ.(string)
	if ts != MemberNode && ts != MemberHyperNode {
		return member{}, fmt.Errorf("unknown type %q (want %s or %s)", fmt.Sprint(typ), MemberNode, MemberHyperNode)
	}
	m := member{typ: ts}
	sel, found, err := unstructured.NestedMap(obj, "selector")
	if err != nil {
		return member{}, fmt.Errorf("selector: %v", err)
	}
	if !found {
		return member{}, fmt.Errorf("has no selector")
	}
	set := 0
	for _, k := range []string{"exactMatch", "regexMatch", "labelMatch"} {
		if v, ok := sel[k]; ok && v != nil {
			set++
		}
	}
	switch {
	case set == 0:
		return member{}, fmt.Errorf("selector sets none of exactMatch, regexMatch, labelMatch")
	case set > 1:
		return member{}, fmt.Errorf("selector sets more than one of exactMatch, regexMatch, labelMatch")
	}
	switch {
	case sel["exactMatch"] != nil:
		name, _, err := unstructured.NestedString(sel, "exactMatch", "name")
		if err != nil {
			return member{}, fmt.Errorf("exactMatch: %v", err)
		}
		if name == "" {
			return member{}, fmt.Errorf("exactMatch has no name")
		}
		m.exact = name
	case sel["regexMatch"] != nil:
		pattern, _, err := unstructured.NestedString(sel, "regexMatch", "pattern")
		if err != nil {
			return member{}, fmt.Errorf("regexMatch: %v", err)
		}
		if pattern == "" {
			return member{}, fmt.Errorf("regexMatch has no pattern")
		}
		re, err := regexp.Compile(pattern)
		if err != nil {
			return member{}, fmt.Errorf("invalid regexMatch pattern %q: %v", pattern, err)
		}
		m.re = re
	default:
		lm, ok := sel["labelMatch"].(map[string]interface{})
		if !ok {
			return member{}, fmt.Errorf("labelMatch is a %T, not an object", sel["labelMatch"])
		}
		var ls metav1.LabelSelector
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(lm, &ls); err != nil {
			return member{}, fmt.Errorf("labelMatch: %v", err)
		}
		if len(ls.MatchLabels) == 0 && len(ls.MatchExpressions) == 0 {
			// An empty label selector would select everything; refuse it
			// rather than put every node under one HyperNode.
			return member{}, fmt.Errorf("labelMatch is empty")
		}
		s, err := metav1.LabelSelectorAsSelector(&ls)
		if err != nil {
			return member{}, fmt.Errorf("invalid labelMatch: %v", err)
		}
		m.sel = s
	}
	return m, nil
}
