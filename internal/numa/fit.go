package numa

import (
	"fmt"
	"math"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Score strategies.
const (
	// LeastNUMANodes: 100 / number of zones the pod occupies (100 for one).
	LeastNUMANodes = "LeastNUMANodes"
	// MostAllocated: the fuller the pod's zones end up, the higher (pack).
	MostAllocated = "MostAllocated"
	// LeastAllocated: the emptier the pod's zones end up, the higher (spread).
	LeastAllocated = "LeastAllocated"
	// BalancedAllocation: the more even the use of the requested resources
	// in the pod's zones, the higher.
	BalancedAllocation = "BalancedAllocation"
)

// Strategies lists the Score strategies.
var Strategies = []string{LeastNUMANodes, MostAllocated, LeastAllocated, BalancedAllocation}

// maxEnumZones bounds the search over sets of zones for restricted requests
// that span zones. The kubelet refuses machines with more than 8 NUMA nodes
// unless told otherwise; beyond this bound a spanning request is checked
// against all zones together.
const maxEnumZones = 16

// Allocation is the predicted placement of one unit (or, for a restricted
// request spanning zones, its share in one zone).
type Allocation struct {
	Zone string
	// Request is what the unit holds in the zone once the pod runs; for a
	// Transient unit, what it uses while it runs.
	Request resources.List
	// Unit is the container name, "" for pod scope.
	Unit string
	// Transient is set for regular init containers: they release their
	// resources before the app containers start and are not charged.
	Transient bool
}

// Usage sums the lasting per-zone usage of an assignment (transient units
// left out): what the caller adds to its charged map once it assumes the pod.
func Usage(assignment []Allocation) map[string]resources.List {
	out := map[string]resources.List{}
	for _, a := range assignment {
		if a.Transient || len(a.Request) == 0 {
			continue
		}
		if out[a.Zone] == nil {
			out[a.Zone] = resources.List{}
		}
		out[a.Zone].Add(a.Request)
	}
	return out
}

// Fit predicts whether the kubelet admits the pod, given the NRT state of the
// node plus the usage `charged` (per zone name) the caller has assumed and the
// NRT object does not show yet. It returns the predicted zone of each unit
// (container scope: each container with aligned resources, in admission
// order; pod scope: the pod), or ok=false and a reason.
//
// Policies none and best-effort, and pods without aligned resources, always
// fit with no assignment. Aligned resources that no zone reports are not
// NUMA-constrained (the kubelet has no topology for them) and are left to the
// node-level resource fit.
//
// single-numa-node: every unit must fit in one zone's free amount
// (Available - charged). restricted: every unit must fit in the fewest zones
// that could ever hold it (judged on Allocatable): a unit that fits in one
// zone's Allocatable must fit in one zone's free amount, one that needs two
// zones must fit in two zones together, and so on. This is the kubelet's
// "preferred hint" rule, which restricted enforces.
//
// Units are placed one after another in admission order, each on the state
// the previous ones left; regular init containers are checked but not
// charged.
func (n *Node) Fit(pod *v1.Pod, charged map[string]resources.List) (assignment []Allocation, ok bool, reason string) {
	if !n.Policy.Rejects() {
		return nil, true, ""
	}
	p := n.newPlanner(charged)
	units := p.units(AlignedRequests(pod, n.scope()))
	if len(units) == 0 {
		return nil, true, ""
	}
	return p.place(units, n.Policy)
}

// Copies returns how many identical copies of the pod the node's zones admit
// at once, capped at max: copies are placed one after another, each on the
// state the previous ones left. A node with two zones of 4 GPUs admits two
// 4-GPU pods, no 8-GPU pod and four 2-GPU pods. Without a rejecting policy or
// without aligned resources the answer is max (node-level resources are the
// caller's business).
func (n *Node) Copies(pod *v1.Pod, charged map[string]resources.List, max int) int {
	if max <= 0 {
		return 0
	}
	if !n.Policy.Rejects() {
		return max
	}
	p := n.newPlanner(charged)
	units := p.units(AlignedRequests(pod, n.scope()))
	if len(units) == 0 {
		return max
	}
	count := 0
	for count < max {
		if _, ok, _ := p.place(units, n.Policy); !ok {
			break
		}
		count++
	}
	return count
}

// Score rates the node for the pod, 0..100, with one of the Strategies; an
// unknown strategy scores 0. A pod that does not fit, a pod without aligned
// resources and a node with policy none score 0. On a best-effort node the
// placement the kubelet prefers (as under restricted) is scored, 0 if there is
// none.
func (n *Node) Score(pod *v1.Pod, charged map[string]resources.List, strategy string) int64 {
	policy := n.Policy
	switch policy {
	case BestEffort:
		policy = Restricted
	case Restricted, SingleNUMANode:
	default:
		return 0
	}
	p := n.newPlanner(charged)
	units := p.units(AlignedRequests(pod, n.scope()))
	if len(units) == 0 {
		return 0
	}
	assignment, ok, _ := p.place(units, policy)
	if !ok {
		return 0
	}
	used := map[string]bool{}
	for _, a := range assignment {
		if !a.Transient {
			used[a.Zone] = true
		}
	}
	if len(used) == 0 {
		for _, a := range assignment {
			used[a.Zone] = true
		}
	}
	names := map[v1.ResourceName]bool{}
	for _, u := range units {
		for r := range u.Request {
			names[r] = true
		}
	}
	var fracs [][]float64 // per used zone: used fraction of each resource
	for i, z := range p.zones {
		if !used[z.Name] {
			continue
		}
		var f []float64
		for r := range names {
			alloc := z.Allocatable[r]
			if alloc <= 0 {
				continue
			}
			u := 1 - float64(p.free[i][r])/float64(alloc)
			f = append(f, math.Min(1, math.Max(0, u)))
		}
		sort.Float64s(f) // map order must not change float sums
		if len(f) > 0 {
			fracs = append(fracs, f)
		}
	}
	switch strategy {
	case LeastNUMANodes:
		return int64(100 / len(used))
	case MostAllocated:
		return percent(mean(fracs))
	case LeastAllocated:
		return percent(1 - mean(fracs))
	case BalancedAllocation:
		if len(fracs) == 0 {
			return 0
		}
		sum := 0.0
		for _, f := range fracs {
			sum += stddev(f)
		}
		return percent(1 - sum/float64(len(fracs)))
	}
	return 0
}

func (n *Node) scope() Scope {
	if n.Scope == Pod {
		return Pod
	}
	return Container
}

func mean(fracs [][]float64) float64 {
	sum, cnt := 0.0, 0
	for _, f := range fracs {
		for _, v := range f {
			sum += v
			cnt++
		}
	}
	if cnt == 0 {
		return 0
	}
	return sum / float64(cnt)
}

func stddev(f []float64) float64 {
	if len(f) < 2 {
		return 0
	}
	m := 0.0
	for _, v := range f {
		m += v
	}
	m /= float64(len(f))
	s := 0.0
	for _, v := range f {
		s += (v - m) * (v - m)
	}
	return math.Sqrt(s / float64(len(f)))
}

func percent(x float64) int64 {
	v := int64(math.Round(100 * x))
	if v < 0 {
		return 0
	}
	if v > 100 {
		return 100
	}
	return v
}

// planner holds the free amounts of the zones while units are placed.
type planner struct {
	choice   ZoneChoice
	zones    []Zone           // NUMA-id order
	free     []resources.List // Available - charged - placed so far
	known    map[v1.ResourceName]bool
	maxAlloc resources.List // largest Allocatable of each resource over zones
}

func (n *Node) newPlanner(charged map[string]resources.List) *planner {
	p := &planner{
		choice:   n.Choice,
		zones:    append([]Zone(nil), n.Zones...),
		known:    map[v1.ResourceName]bool{},
		maxAlloc: resources.List{},
	}
	sort.SliceStable(p.zones, func(i, j int) bool { return zoneLess(p.zones[i].Name, p.zones[j].Name) })
	p.free = make([]resources.List, len(p.zones))
	for i, z := range p.zones {
		f := z.Available.Clone()
		if c := charged[z.Name]; c != nil {
			f.Sub(c)
		}
		p.free[i] = f
		for r, v := range z.Allocatable {
			if v > 0 {
				p.known[r] = true
			}
			if v > p.maxAlloc[r] {
				p.maxAlloc[r] = v
			}
		}
	}
	return p
}

// units keeps the resources some zone reports and drops units left empty.
func (p *planner) units(in []Unit) []Unit {
	out := in[:0:0]
	for _, u := range in {
		u.Request = p.restrict(u.Request)
		u.Hold = p.restrict(u.Hold)
		if len(u.Request) == 0 && len(u.Hold) == 0 {
			continue
		}
		out = append(out, u)
	}
	return out
}

func (p *planner) restrict(l resources.List) resources.List {
	out := resources.List{}
	for r, v := range l {
		if v > 0 && p.known[r] {
			out[r] = v
		}
	}
	return out
}

// place places the units in order and charges what they hold. On failure the
// planner's state is left partly charged.
func (p *planner) place(units []Unit, policy Policy) ([]Allocation, bool, string) {
	var out []Allocation
	for _, u := range units {
		need := u.Request.Clone()
		maxInto(need, u.Hold) // Hold never exceeds Request for units built by AlignedRequests
		set, reason := p.choose(u, need, policy)
		if set == nil {
			return nil, false, reason
		}
		share := u.Hold
		if u.Transient() {
			share = u.Request
		}
		parts := p.split(set, share)
		for k, zi := range set {
			if len(set) > 1 && len(parts[k]) == 0 {
				continue // a spanning request that takes nothing here
			}
			out = append(out, Allocation{Zone: p.zones[zi].Name, Request: parts[k], Unit: u.Name, Transient: u.Transient()})
			if !u.Transient() {
				p.free[zi].Sub(parts[k])
			}
		}
	}
	return out, true, ""
}

// choose returns the zones (indices) that take a unit needing `need`, or nil
// and a reason.
func (p *planner) choose(u Unit, need resources.List, policy Policy) ([]int, string) {
	width := p.minWidth(need)
	if width == 0 || (policy == SingleNUMANode && width > 1) {
		what := "any NUMA zone has"
		if policy != SingleNUMANode {
			what = "all NUMA zones together have"
		}
		return nil, fmt.Sprintf("%s needs %s, more than %s allocatable (zones: %s)",
			describe(u), formatList(need), what, p.zoneList(need, func(i int) resources.List { return p.zones[i].Allocatable }))
	}
	names := sortedNames(need)
	var best []int
	bestLeft := 0.0
	p.combos(width, func(set []int) {
		sum := resources.List{}
		for _, i := range set {
			sum.Add(p.free[i])
		}
		if !sum.Fits(need) {
			return
		}
		left := 0.0
		if p.choice == BestFit {
			for _, r := range names { // fixed order: float sums must not depend on map order
				if m := p.maxAlloc[r]; m > 0 {
					left += float64(sum[r]-need[r]) / float64(m)
				}
			}
		}
		if best == nil || (p.choice == BestFit && left < bestLeft) ||
			((p.choice != BestFit || left == bestLeft) && maskLess(set, best)) {
			best, bestLeft = append([]int(nil), set...), left
		}
	})
	if best != nil {
		return best, ""
	}
	where := "no NUMA zone has"
	if width > 1 {
		where = fmt.Sprintf("no %d NUMA zones together have", width)
	}
	return nil, fmt.Sprintf("%s %s free for %s (zones: %s)", where, formatList(need), describe(u),
		p.zoneList(need, func(i int) resources.List { return p.free[i] }))
}

// minWidth is the fewest zones whose Allocatable together holds need, 0 if
// all of them cannot.
func (p *planner) minWidth(need resources.List) int {
	n := len(p.zones)
	for k := 1; k <= n; k++ {
		if n > maxEnumZones && k == 2 {
			k = n // too many sets to enumerate: all zones together
		}
		found := false
		p.combos(k, func(set []int) {
			if found {
				return
			}
			sum := resources.List{}
			for _, i := range set {
				sum.Add(p.zones[i].Allocatable)
			}
			found = sum.Fits(need)
		})
		if found {
			return k
		}
	}
	return 0
}

// combos calls fn with every k-subset of zone indices (sorted).
func (p *planner) combos(k int, fn func([]int)) {
	n := len(p.zones)
	if k <= 0 || k > n {
		return
	}
	if n > maxEnumZones && k > 1 && k != n {
		return
	}
	set := make([]int, k)
	for i := range set {
		set[i] = i
	}
	for {
		fn(set)
		i := k - 1
		for i >= 0 && set[i] == n-k+i {
			i--
		}
		if i < 0 {
			return
		}
		set[i]++
		for j := i + 1; j < k; j++ {
			set[j] = set[j-1] + 1
		}
	}
}

// maskLess orders equally wide zone sets as the kubelet orders NUMA bitmasks
// (by value): compare the highest zone first.
func maskLess(a, b []int) bool {
	for i := len(a) - 1; i >= 0; i-- {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// split shares l out over the zones of set: each resource fills the zones in
// order up to their free amount, the last zone takes the rest.
func (p *planner) split(set []int, l resources.List) []resources.List {
	parts := make([]resources.List, len(set))
	if len(set) == 1 {
		parts[0] = l.Clone()
		return parts
	}
	for k := range parts {
		parts[k] = resources.List{}
	}
	for r, v := range l {
		left := v
		for k, zi := range set {
			take := left
			if k < len(set)-1 {
				if f := p.free[zi][r]; f < take {
					take = f
				}
				if take < 0 {
					take = 0
				}
			}
			if take > 0 {
				parts[k][r] = take
				left -= take
			}
		}
	}
	return parts
}

func describe(u Unit) string {
	switch {
	case u.Name == "":
		return "the pod"
	case u.Init:
		return fmt.Sprintf("init container %q", u.Name)
	}
	return fmt.Sprintf("container %q", u.Name)
}

// zoneList renders "node-0: 2 nvidia.com/gpu, 16 cpu; node-1: …" with the
// amounts of need's resources given by amounts(zone index).
func (p *planner) zoneList(need resources.List, amounts func(int) resources.List) string {
	if len(p.zones) == 0 {
		return "none"
	}
	names := sortedNames(need)
	parts := make([]string, len(p.zones))
	for i, z := range p.zones {
		a := amounts(i)
		items := make([]string, len(names))
		for k, r := range names {
			v := a[r]
			if v < 0 {
				v = 0
			}
			items[k] = formatAmount(r, v) + " " + string(r)
		}
		parts[i] = z.Name + ": " + strings.Join(items, ", ")
	}
	return strings.Join(parts, "; ")
}

// formatList renders "4 nvidia.com/gpu and 16 cpu": devices first, then cpu,
// memory and hugepages.
func formatList(l resources.List) string {
	names := sortedNames(l)
	items := make([]string, len(names))
	for i, r := range names {
		items[i] = formatAmount(r, l[r]) + " " + string(r)
	}
	switch len(items) {
	case 0:
		return "nothing"
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

func sortedNames(l resources.List) []v1.ResourceName {
	names := make([]v1.ResourceName, 0, len(l))
	for r := range l {
		names = append(names, r)
	}
	rank := func(r v1.ResourceName) int {
		switch {
		case isDevice(r):
			return 0
		case r == v1.ResourceCPU:
			return 1
		case r == v1.ResourceMemory:
			return 2
		case isHugePages(r):
			return 3
		}
		return 4
	}
	sort.Slice(names, func(i, j int) bool {
		if ri, rj := rank(names[i]), rank(names[j]); ri != rj {
			return ri < rj
		}
		return names[i] < names[j]
	})
	return names
}

func formatAmount(r v1.ResourceName, v int64) string {
	switch {
	case r == v1.ResourceCPU:
		return resource.NewMilliQuantity(v, resource.DecimalSI).String()
	case r == v1.ResourceMemory || isHugePages(r):
		return resource.NewQuantity(v, resource.BinarySI).String()
	}
	return resource.NewQuantity(v, resource.DecimalSI).String()
}
