// Package numa models the NUMA zones of a node, as published in a
// NodeResourceTopology (topology.node.k8s.io/v1alpha2) object, and predicts
// whether the kubelet's Topology Manager will admit a pod on that node.
//
// It is pure logic, no scheduler framework; the caller passes the per-zone
// usage it has assumed but the NRT object does not show yet ("charged") to
// Fit, Copies and Score. Live (live.go) is the process's view that keeps
// those charges and the parsed objects an informer hands it.
//
// The model follows the kubelet:
//   - Only the single-numa-node and restricted policies reject pods; none and
//     best-effort always admit.
//   - Aligned resources (see AlignedRequests): exclusive CPUs (Guaranteed pod,
//     integral CPU request), memory and hugepages (Guaranteed pod) and devices
//     (extended resources, any QoS).
//   - Container scope places each container on its own; pod scope places the
//     pod's aligned requests as one.
//   - Among the zones that fit, the kubelet takes the narrowest NUMA mask and,
//     among equally narrow masks, the lowest-numbered one. Fit predicts that
//     choice by default (ZoneChoice KubeletOrder), so that the caller's
//     per-zone accounting matches what the kubelet will report later.
package numa

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/apis/topology/v1alpha2"
	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Policy is a kubelet Topology Manager policy.
type Policy string

// Topology Manager policies, spelled as in the kubelet configuration.
const (
	None           Policy = "none"
	BestEffort     Policy = "best-effort"
	Restricted     Policy = "restricted"
	SingleNUMANode Policy = "single-numa-node"
)

// Rejects reports whether the kubelet may reject a pod under this policy.
func (p Policy) Rejects() bool { return p == Restricted || p == SingleNUMANode }

// Scope is a kubelet Topology Manager scope.
type Scope string

// Topology Manager scopes, spelled as in the kubelet configuration.
const (
	Container Scope = "container"
	Pod       Scope = "pod"
)

// ZoneChoice says which zone Fit predicts when several fit.
type ZoneChoice string

const (
	// KubeletOrder (the default) predicts the kubelet's own choice: the
	// narrowest set of zones that fits, then the lowest-numbered one.
	KubeletOrder ZoneChoice = ""
	// BestFit takes the fullest zone (set of zones) that still fits, which
	// keeps big zones free. The kubelet does not choose this way, so per-zone
	// accounting built on it can drift from the node until the NRT object is
	// refreshed; use it only where the node's choice does not matter.
	BestFit ZoneChoice = "BestFit"
)

// Names of the NRT attributes (NFD topology-updater) carrying the kubelet
// configuration.
const (
	AttributePolicy = "topologyManagerPolicy"
	AttributeScope  = "topologyManagerScope"
)

// ZoneTypeNode is the NRT zone type of a NUMA node.
const ZoneTypeNode = "Node"

// Zone is one NUMA node. Amounts are in resources.List units (CPU in
// millicores, memory and hugepages in bytes, devices in units).
type Zone struct {
	Name        string
	Allocatable resources.List
	Available   resources.List
}

// Node is the NUMA view of one node.
type Node struct {
	Name   string
	Policy Policy
	Scope  Scope
	// Zones in NUMA-id order: the number at the end of the name ("node-2"),
	// then the name ("node-2" < "node-10"); for up to ten zones this is
	// plain name order. FromNRT sorts them; methods do not rely on it.
	Zones []Zone
	// Choice selects the predicted zone when several fit (default KubeletOrder).
	Choice ZoneChoice
}

// FromNRT parses an NRT object. The topologyManagerPolicy/Scope attributes
// win over the deprecated TopologyPolicies field; without either the policy
// is None and the scope Container (the kubelet defaults). Only zones of type
// "Node" are kept. Unknown policy or scope values, unnamed or duplicate zones,
// duplicate or negative resources are errors. A negative Available amount is
// read as zero.
func FromNRT(nrt *v1alpha2.NodeResourceTopology) (*Node, error) {
	if nrt == nil {
		return nil, fmt.Errorf("nil NodeResourceTopology")
	}
	n := &Node{Name: nrt.Name}
	policy, scope, err := legacyPolicy(nrt.TopologyPolicies)
	if err != nil {
		return nil, fmt.Errorf("NodeResourceTopology %q: %w", nrt.Name, err)
	}
	seenAttr := map[string]bool{}
	for _, a := range nrt.Attributes {
		switch a.Name {
		case AttributePolicy, AttributeScope:
		default:
			continue
		}
		if seenAttr[a.Name] {
			return nil, fmt.Errorf("NodeResourceTopology %q: attribute %s given twice", nrt.Name, a.Name)
		}
		seenAttr[a.Name] = true
		if a.Name == AttributePolicy {
			if policy, err = ParsePolicy(a.Value); err != nil {
				return nil, fmt.Errorf("NodeResourceTopology %q: attribute %s: %w", nrt.Name, a.Name, err)
			}
		} else {
			if scope, err = ParseScope(a.Value); err != nil {
				return nil, fmt.Errorf("NodeResourceTopology %q: attribute %s: %w", nrt.Name, a.Name, err)
			}
		}
	}
	if policy == "" {
		policy = None
	}
	if scope == "" {
		scope = Container
	}
	n.Policy, n.Scope = policy, scope

	seenZone := map[string]bool{}
	for _, z := range nrt.Zones {
		if !strings.EqualFold(z.Type, ZoneTypeNode) {
			continue
		}
		if z.Name == "" {
			return nil, fmt.Errorf("NodeResourceTopology %q: zone of type %s without a name", nrt.Name, z.Type)
		}
		if seenZone[z.Name] {
			return nil, fmt.Errorf("NodeResourceTopology %q: zone %q given twice", nrt.Name, z.Name)
		}
		seenZone[z.Name] = true
		zone := Zone{Name: z.Name, Allocatable: resources.List{}, Available: resources.List{}}
		for _, r := range z.Resources {
			name := v1.ResourceName(r.Name)
			if name == "" {
				return nil, fmt.Errorf("NodeResourceTopology %q: zone %q: resource without a name", nrt.Name, z.Name)
			}
			if _, dup := zone.Allocatable[name]; dup {
				return nil, fmt.Errorf("NodeResourceTopology %q: zone %q: resource %s given twice", nrt.Name, z.Name, name)
			}
			alloc, avail := amount(name, r.Allocatable.MilliValue(), r.Allocatable.Value()), amount(name, r.Available.MilliValue(), r.Available.Value())
			if alloc < 0 {
				return nil, fmt.Errorf("NodeResourceTopology %q: zone %q: negative allocatable %s", nrt.Name, z.Name, name)
			}
			if avail < 0 {
				avail = 0
			}
			zone.Allocatable[name] = alloc
			zone.Available[name] = avail
		}
		n.Zones = append(n.Zones, zone)
	}
	sort.SliceStable(n.Zones, func(i, j int) bool { return zoneLess(n.Zones[i].Name, n.Zones[j].Name) })
	return n, nil
}

func amount(name v1.ResourceName, milli, value int64) int64 {
	if name == v1.ResourceCPU {
		return milli
	}
	return value
}

// ParsePolicy reads a kubelet policy name ("single-numa-node"); case, dashes
// and underscores are ignored, so "SingleNUMANode" is accepted too.
func ParsePolicy(s string) (Policy, error) {
	switch normalize(s) {
	case "none":
		return None, nil
	case "besteffort":
		return BestEffort, nil
	case "restricted":
		return Restricted, nil
	case "singlenumanode":
		return SingleNUMANode, nil
	}
	return "", fmt.Errorf("unknown topology manager policy %q", s)
}

// ParseScope reads a kubelet scope name ("container" or "pod").
func ParseScope(s string) (Scope, error) {
	switch normalize(s) {
	case "container":
		return Container, nil
	case "pod":
		return Pod, nil
	}
	return "", fmt.Errorf("unknown topology manager scope %q", s)
}

// separators are dropped from names before they are compared; a Replacer
// is safe for concurrent use and costly to build, so it is built once.
var separators = strings.NewReplacer("-", "", "_", "")

func normalize(s string) string {
	return separators.Replace(strings.ToLower(strings.TrimSpace(s)))
}

// legacyPolicy reads the deprecated TopologyPolicies list. Every entry must be
// known and they must agree. The scope is "" when the entry does not say
// (e.g. "Restricted", "BestEffort", "None").
func legacyPolicy(values []string) (Policy, Scope, error) {
	var policy Policy
	var scope Scope
	for _, v := range values {
		known, ok := legacyPolicies[v1alpha2.TopologyManagerPolicy(v)]
		if !ok {
			return "", "", fmt.Errorf("unknown topology policy %q", v)
		}
		p, s := known.policy, known.scope
		if policy != "" && policy != p {
			return "", "", fmt.Errorf("conflicting topology policies %q", values)
		}
		if scope != "" && s != "" && scope != s {
			return "", "", fmt.Errorf("conflicting topology policies %q", values)
		}
		policy = p
		if s != "" {
			scope = s
		}
	}
	return policy, scope, nil
}

// legacyPolicies maps each deprecated TopologyPolicies value to its policy
// and scope ("" when the value does not say).
var legacyPolicies = map[v1alpha2.TopologyManagerPolicy]struct {
	policy Policy
	scope  Scope
}{
	v1alpha2.SingleNUMANodeContainerLevel: {SingleNUMANode, Container},
	v1alpha2.SingleNUMANodePodLevel:       {SingleNUMANode, Pod},
	v1alpha2.Restricted:                   {Restricted, ""},
	v1alpha2.RestrictedContainerLevel:     {Restricted, Container},
	v1alpha2.RestrictedPodLevel:           {Restricted, Pod},
	v1alpha2.BestEffort:                   {BestEffort, ""},
	v1alpha2.BestEffortContainerLevel:     {BestEffort, Container},
	v1alpha2.BestEffortPodLevel:           {BestEffort, Pod},
	v1alpha2.None:                         {None, ""},
}

// zoneLess orders zone names by NUMA id: the trailing number, then the name.
// Names without a trailing number come after those with one.
func zoneLess(a, b string) bool {
	ia, oka := numaID(a)
	ib, okb := numaID(b)
	if oka != okb {
		return oka
	}
	if oka && ia != ib {
		return ia < ib
	}
	return a < b
}

func numaID(name string) (int, bool) {
	i := len(name)
	for i > 0 && unicode.IsDigit(rune(name[i-1])) {
		i--
	}
	if i == len(name) {
		return 0, false
	}
	id, err := strconv.Atoi(name[i:])
	if err != nil {
		return 0, false
	}
	return id, true
}
