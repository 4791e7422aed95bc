package devices

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Session is one plan's view of the devices: the scheduler's allocated and
// in-flight devices, what other gangs' plans hold, and what this plan has
// allocated so far. It is used by one goroutine.
type Session struct {
	d      *Devices
	ctx    context.Context
	state  structured.AllocatedState
	byNode map[string][]*resourceapi.ResourceSlice
	shared []*resourceapi.ResourceSlice
	node   func(string) *v1.Node
	// assigned: what Assign allocated (kept by Commit).
	assigned []held
	// sharedClaims: claims several members use (named by them, or their
	// PodGroup's), allocated once by the first member planned, with the
	// nodes the allocation is available on (nil: every node).
	sharedClaims map[string]*v1.NodeSelector
	// limits[rep][node] records Limit's answers, for Explain.
	limits map[string]map[string]int
	asks   map[string][]string
	// sharedByMembers are the claims more than one member uses.
	sharedByMembers map[string]bool
	// memo: Limit's answers by pod, cap and node signature.
	memo      map[string]int
	podShapes map[types.UID]podShape
	err       error
}

// Placement is one member on its planned node, in planned order.
type Placement struct {
	Pod  *v1.Pod
	Node string
	// Like stands in for the member's claims while they do not exist yet
	// (a member of the same shape whose claims do).
	Like *v1.Pod
}

// Session opens a plan's device view, or returns nil when no member asks
// for devices. live says which gangs' holds still count (their plans are
// live); self's own holds never count.
func (d *Devices) Session(ctx context.Context, self Ref, members []*v1.Pod, node func(string) *v1.Node, live func(Ref) bool) *Session {
	asks := false
	for _, m := range members {
		if d.Asks(m) {
			asks = true
			break
		}
	}
	if !asks {
		return nil
	}
	// The session outlives the call that opens it (a cycle's Filter opens
	// it, its PostFilter may ask again), so it keeps the context's values
	// but not its cancellation.
	s := &Session{d: d, ctx: context.WithoutCancel(ctx), node: node, sharedClaims: map[string]*v1.NodeSelector{}, limits: map[string]map[string]int{}, asks: map[string][]string{},
		sharedByMembers: SharedClaims(members), memo: map[string]int{}, podShapes: map[types.UID]podShape{}}
	state, err := d.src.Allocated()
	if err != nil || state == nil {
		s.err = fmt.Errorf("reading allocated devices: %v", err)
		state = &structured.AllocatedState{}
	}
	s.state = cloneState(state)
	slices, err := d.src.Slices()
	if err != nil {
		s.err = fmt.Errorf("reading ResourceSlices: %v", err)
	}
	s.byNode = map[string][]*resourceapi.ResourceSlice{}
	for _, sl := range slices {
		if n := ptr.Deref(sl.Spec.NodeName, ""); n != "" && len(sl.Spec.SharedCounters) == 0 {
			s.byNode[n] = append(s.byNode[n], sl)
		} else {
			s.shared = append(s.shared, sl)
		}
	}
	d.mu.Lock()
	if len(d.prints) > 2*len(slices)+64 {
		// Forget the fingerprints of deleted slices.
		d.prints = map[types.UID]sliceFingerprint{}
	}
	for ref, hs := range d.holds {
		if ref == self {
			continue
		}
		if live != nil && !live(ref) {
			delete(d.holds, ref)
			continue
		}
		for _, h := range hs {
			s.apply(h)
		}
	}
	d.mu.Unlock()
	return s
}

func cloneState(in *structured.AllocatedState) structured.AllocatedState {
	out := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for id := range in.AllocatedDevices {
		out.AllocatedDevices.Insert(id)
	}
	for id := range in.AllocatedSharedDeviceIDs {
		out.AllocatedSharedDeviceIDs.Insert(id)
	}
	for id, c := range in.AggregatedCapacity {
		out.AggregatedCapacity[id] = c
	}
	return out
}

// Err is why the session could not read the devices, if it could not.
func (s *Session) Err() error { return s.err }

// claimsOn is what the member must allocate on node: ok is false when it
// cannot go there (a claim allocated for other nodes, or in use). shared is
// parallel to toAllocate: the key of a claim other members use too, else "".
func (s *Session) claimsOn(pod, like *v1.Pod, node *v1.Node, onlyPerMember bool) (toAllocate []*resourceapi.ResourceClaim, shared []string, ok bool) {
	claims, shareable, missing := s.d.podClaims(pod)
	if missing != "" && like != nil {
		claims, shareable, missing = s.d.podClaims(like)
	}
	if missing != "" {
		return nil, nil, false
	}
	for i, c := range claims {
		key := c.Namespace + "/" + c.Name
		if c.Status.Allocation != nil {
			if !availableOn(c.Status.Allocation.NodeSelector, node) {
				return nil, nil, false
			}
			continue
		}
		sharedKey := ""
		if shareable[i] && s.sharedByMembers[key] {
			if onlyPerMember {
				continue
			}
			if sel, done := s.sharedClaims[key]; done {
				if !availableOn(sel, node) {
					return nil, nil, false
				}
				continue
			}
			sharedKey = key
		}
		toAllocate = append(toAllocate, c)
		shared = append(shared, sharedKey)
	}
	if ext := s.d.extendedClaim(pod, node); ext != nil {
		toAllocate = append(toAllocate, ext)
		shared = append(shared, "")
	}
	return toAllocate, shared, true
}

// availableOn tells whether an allocation with node selector sel may be
// used on node (nil: on every node), as the DynamicResources plugin reads it.
func availableOn(sel *v1.NodeSelector, node *v1.Node) bool {
	if sel == nil {
		return true
	}
	ns, err := nodeaffinity.NewNodeSelector(sel)
	return err == nil && ns.Match(node)
}

// allocate runs the structured allocator for claims on node over the
// session's state; nil when they do not fit.
func (s *Session) allocate(node *v1.Node, claims []*resourceapi.ResourceClaim) []resourceapi.AllocationResult {
	slices := append(append([]*resourceapi.ResourceSlice(nil), s.byNode[node.Name]...), s.shared...)
	// A fresh allocator per call: it caches counters of partitionable
	// devices, which this session's own allocations change.
	a, err := structured.NewAllocator(s.ctx, s.d.features, s.state, s.d.src.Classes(), slices, s.d.celCache)
	if err != nil {
		s.err = err
		return nil
	}
	res, err := a.Allocate(klog.NewContext(s.ctx, klog.FromContext(s.ctx).WithValues("node", node.Name)), node, claims)
	if err != nil {
		if s.err == nil {
			s.err = err
		}
		return nil
	}
	return res
}

// heldOf turns allocation results into what they hold.
func (s *Session) heldOf(results []resourceapi.AllocationResult) held {
	var h held
	for _, r := range results {
		for _, dr := range r.Devices.Results {
			if ptr.Deref(dr.AdminAccess, false) {
				continue
			}
			id := structured.MakeDeviceID(dr.Driver, dr.Pool, dr.Device)
			if dr.ShareID != nil && s.d.features.ConsumableCapacity {
				h.shared = append(h.shared, structured.MakeSharedDeviceID(id, dr.ShareID))
				continue
			}
			h.dedicated = append(h.dedicated, id)
		}
	}
	return h
}

func (s *Session) apply(h held) {
	for _, id := range h.dedicated {
		s.state.AllocatedDevices.Insert(id)
	}
	for _, id := range h.shared {
		s.state.AllocatedSharedDeviceIDs.Insert(id)
	}
}

func (s *Session) undo(h held) {
	for _, id := range h.dedicated {
		s.state.AllocatedDevices.Delete(id)
	}
	for _, id := range h.shared {
		s.state.AllocatedSharedDeviceIDs.Delete(id)
	}
}

// Limit caps how many members like pod fit nodeName's devices, on top of
// max: the allocator gives one member's claims after another on the node
// (a claim several members share only once), and the session forgets them
// again.
func (s *Session) Limit(pod *v1.Pod, nodeName string, maxMembers int) int {
	// Limits are asked for a new plan: the last order's allocations go.
	s.dropAssigned()
	node := s.node(nodeName)
	if node == nil || maxMembers <= 0 {
		return 0
	}
	key := string(pod.UID)
	if s.limits[key] == nil {
		s.limits[key] = map[string]int{}
		s.asks[key] = describeAsk(s.d, pod)
	}
	// Nodes alike (same devices, same ones taken) take as many members:
	// an idle cluster is asked once, not once per node.
	sig, cacheable := s.signature(pod, node)
	memo := fmt.Sprintf("%s|%d|%s", key, maxMembers, sig)
	if cacheable {
		if n, ok := s.memo[memo]; ok {
			s.limits[key][nodeName] = n
			return n
		}
	}
	n := 0
	var taken []held
	first, _, ok := s.claimsOn(pod, nil, node, false)
	var next []*resourceapi.ResourceClaim
	if ok {
		next, _, _ = s.claimsOn(pod, nil, node, true)
	}
	for ok && n < maxMembers {
		claims := first
		if n > 0 {
			claims = next
		}
		if len(claims) == 0 {
			n = maxMembers
			break
		}
		res := s.allocate(node, claims)
		if res == nil {
			break
		}
		h := s.heldOf(res)
		s.apply(h)
		taken = append(taken, h)
		n++
	}
	for i := len(taken) - 1; i >= 0; i-- {
		s.undo(taken[i])
	}
	if cacheable {
		s.memo[memo] = n
	}
	s.limits[key][nodeName] = n
	return n
}

// signature describes what decides a node's answer to Limit: its slices'
// devices (not their names of node and pool) and which of them are taken,
// and which of the pod's extended resources the node publishes. Not
// cacheable: devices shared between nodes, shared or consumed capacity, or a
// pod whose claims are allocated already (bound to a node).
func (s *Session) signature(pod *v1.Pod, node *v1.Node) (string, bool) {
	if len(s.shared) > 0 || len(s.state.AllocatedSharedDeviceIDs) > 0 || len(s.state.AggregatedCapacity) > 0 {
		return "", false
	}
	shape := s.podSignature(pod)
	if !shape.cacheable {
		return "", false
	}
	var b strings.Builder
	for _, name := range shape.extended {
		if _, published := node.Status.Allocatable[name]; published {
			b.WriteString(string(name))
			b.WriteByte(';')
		}
	}
	for _, sl := range s.byNode[node.Name] {
		b.WriteString(s.d.fingerprint(sl))
		for _, dev := range sl.Spec.Devices {
			if s.state.AllocatedDevices.Has(structured.MakeDeviceID(sl.Spec.Driver, sl.Spec.Pool.Name, dev.Name)) {
				b.WriteString("+" + dev.Name)
			}
		}
		b.WriteByte('|')
	}
	return b.String(), true
}

// podShape is the part of a node's signature that depends on the pod only,
// read once per session: whether its answer may be shared at all (no claim
// of it allocated already, none missing) and its extended resources, sorted.
type podShape struct {
	cacheable bool
	extended  []v1.ResourceName
}

func (s *Session) podSignature(pod *v1.Pod) podShape {
	if shape, ok := s.podShapes[pod.UID]; ok {
		return shape
	}
	shape := podShape{cacheable: true}
	claims, _, missing := s.d.podClaims(pod)
	if missing != "" {
		shape.cacheable = false
	}
	for _, c := range claims {
		if c.Status.Allocation != nil {
			shape.cacheable = false
		}
	}
	for name := range resources.PodRequests(pod) {
		if isExtended(name) {
			shape.extended = append(shape.extended, name)
		}
	}
	slices.Sort(shape.extended)
	s.podShapes[pod.UID] = shape
	return shape
}

// Assign allocates members' devices in planned order, keeping each result
// for the next member. It returns the index of the first member whose
// devices do not fit its node (ok false); the allocations stay until Commit
// or the session is dropped.
func (s *Session) Assign(order []Placement) (failed int, ok bool) {
	// A new order replaces the last one's allocations.
	s.dropAssigned()
	for i, p := range order {
		node := s.node(p.Node)
		if node == nil {
			return i, false
		}
		claims, shared, fits := s.claimsOn(p.Pod, p.Like, node, false)
		if !fits {
			return i, false
		}
		if len(claims) == 0 {
			continue
		}
		res := s.allocate(node, claims)
		if res == nil {
			return i, false
		}
		for j, key := range shared {
			if key != "" && j < len(res) {
				s.sharedClaims[key] = res[j].NodeSelector
			}
		}
		h := s.heldOf(res)
		s.apply(h)
		s.assigned = append(s.assigned, h)
	}
	return -1, true
}

func (s *Session) dropAssigned() {
	for _, h := range s.assigned {
		s.undo(h)
	}
	s.assigned = s.assigned[:0]
	clear(s.sharedClaims)
}

// Commit keeps what Assign allocated as held by ref's plan.
func (s *Session) Commit(ref Ref) { s.d.hold(ref, append([]held(nil), s.assigned...)) }

// Explain says, for a plan that failed, how many members the devices could
// take and where the most fit.
func (s *Session) Explain(needed int) string {
	var parts []string
	keys := make([]string, 0, len(s.limits))
	for k := range s.limits {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		total, best, bestNode := 0, -1, ""
		nodes := make([]string, 0, len(s.limits[k]))
		for n := range s.limits[k] {
			nodes = append(nodes, n)
		}
		sort.Strings(nodes)
		for _, n := range nodes {
			l := s.limits[k][n]
			total += l
			if l > best {
				best, bestNode = l, n
			}
		}
		if total >= needed {
			continue
		}
		msg := fmt.Sprintf("DRA devices (%s per member) fit %d of %d members, %d short", strings.Join(s.asks[k], ", "), total, needed, needed-total)
		if best > 0 {
			msg += fmt.Sprintf("; most on node %s (%d)", bestNode, best)
		}
		parts = append(parts, msg)
	}
	if s.err != nil {
		parts = append(parts, "device allocation failed: "+s.err.Error())
	}
	return strings.Join(parts, "; ")
}

// describeAsk lists what one member asks for: devices by class.
func describeAsk(d *Devices, pod *v1.Pod) []string {
	count := map[string]int64{}
	claims, _, _ := d.podClaims(pod)
	if ext := d.extendedClaim(pod, nil); ext != nil {
		claims = append(claims, ext)
	}
	for _, c := range claims {
		if c.Status.Allocation != nil {
			continue
		}
		for _, r := range c.Spec.Devices.Requests {
			if class, n := requestCount(r); class != "" {
				count[class] += n
			}
		}
	}
	out := make([]string, 0, len(count))
	for class, n := range count {
		out = append(out, fmt.Sprintf("%d of class %s", n, class))
	}
	sort.Strings(out)
	return out
}

// ClaimName is the name of the pod's i-th claim, "" while it does not exist
// (a template's claim the resourceclaim controller has not named yet).
func ClaimName(pod *v1.Pod, i int) string {
	name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
	if err != nil || name == nil {
		return ""
	}
	return *name
}

// SharedClaims are the claims (namespace/name) that more than one of pods
// use: named by them directly, or their PodGroup's claim, which the
// resourceclaim controller names in each member's status.
func SharedClaims(pods []*v1.Pod) map[string]bool {
	users := map[string]int{}
	for _, p := range pods {
		for i := range p.Spec.ResourceClaims {
			if name := ClaimName(p, i); name != "" {
				users[p.Namespace+"/"+name]++
			}
		}
	}
	out := map[string]bool{}
	for k, n := range users {
		if n > 1 {
			out[k] = true
		}
	}
	return out
}

// Without counts the devices of pods' allocated claims as free (victims
// that would be evicted) until the returned restore is called. Claims that
// pods outside the list also use stay allocated.
func (s *Session) Without(pods []*v1.Pod) (restore func()) {
	leaving := sets.New[string]()
	for _, p := range pods {
		leaving.Insert(string(p.UID))
	}
	var freed held
	seen := sets.New[string]()
	for _, p := range pods {
		claims, _, _ := s.d.podClaims(p)
		for _, c := range claims {
			key := c.Namespace + "/" + c.Name
			if seen.Has(key) || c.Status.Allocation == nil {
				continue
			}
			seen.Insert(key)
			kept := false
			for _, r := range c.Status.ReservedFor {
				if !leaving.Has(string(r.UID)) {
					kept = true
				}
			}
			if kept {
				continue
			}
			h := s.heldOf([]resourceapi.AllocationResult{*c.Status.Allocation})
			freed.dedicated = append(freed.dedicated, h.dedicated...)
			freed.shared = append(freed.shared, h.shared...)
		}
	}
	s.undo(freed)
	return func() { s.apply(freed) }
}
