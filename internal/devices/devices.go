// Package devices is the whole-gang planner's view of DRA devices: it
// allocates each member's ResourceClaims (and the claims behind
// DeviceClass-mapped extended resources) with upstream's structured allocator,
// in planned order, over the scheduler's allocated and in-flight devices plus
// what other gangs' plans hold; and it counts devices as queue resources.
// It reaches the scheduler only through Source.
package devices

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

// QueueResourceAnnotation on a DeviceClass names the queue resource its
// devices count as (e.g. nvidia.com/gpu), so that one quota holds whether a
// pod asks through a device plugin, a claim or an extended resource.
const QueueResourceAnnotation = "scheduling.phalanx.dev/queue-resource"

// implicitPrefix is upstream's implicit extended resource name of a class.
const implicitPrefix = "deviceclass.resource.kubernetes.io/"

// ResourceName is the queue resource a device of class counts as: the
// class's annotation, else its extendedResourceName, else upstream's implicit
// name deviceclass.resource.kubernetes.io/<class>.
func ResourceName(class *resourceapi.DeviceClass) v1.ResourceName {
	if v := class.Annotations[QueueResourceAnnotation]; v != "" {
		return v1.ResourceName(v)
	}
	if n := ptr.Deref(class.Spec.ExtendedResourceName, ""); n != "" {
		return v1.ResourceName(n)
	}
	return v1.ResourceName(implicitPrefix + class.Name)
}

// Source is the DRA state as the scheduler sees it: the scheduler adapter
// implements it over the framework's DRA manager (assume cache and in-flight
// claims), so a plan sees exactly what the DynamicResources plugin sees.
type Source interface {
	Claim(namespace, name string) (*resourceapi.ResourceClaim, error)
	Classes() structured.DeviceClassLister
	// ClassForResource is the class an extended resource maps to, or nil.
	ClassForResource(name v1.ResourceName) *resourceapi.DeviceClass
	// Slices are the ResourceSlices with device taint rules applied.
	Slices() ([]*resourceapi.ResourceSlice, error)
	// Allocated are the allocated and in-flight devices.
	Allocated() (*structured.AllocatedState, error)
}

// Ref names the gang a plan's holds belong to (gang.Ref's string form).
type Ref = string

// Devices allocates for plans and remembers what committed plans hold.
type Devices struct {
	src      Source
	writer   ClaimWriter
	features structured.Features
	celCache *cel.Cache

	mu    sync.Mutex
	holds map[Ref][]held
	// prints caches slices' fingerprints by UID.
	prints map[types.UID]sliceFingerprint
	// requests caches pods' requests (Demand copies before it maps them).
	requests resources.RequestCache
}

type sliceFingerprint struct {
	version string
	taints  int
	print   string
}

type held struct {
	dedicated []structured.DeviceID
	shared    []structured.SharedDeviceID
}

// New returns the devices view over src, allocating with the scheduler's
// allocator features.
func New(src Source, features structured.Features) *Devices {
	return &Devices{
		src: src, features: features,
		celCache: cel.NewCache(10, cel.Features{EnableConsumableCapacity: features.ConsumableCapacity}),
		holds:    map[Ref][]held{},
		prints:   map[types.UID]sliceFingerprint{},
	}
}

// podClaims resolves a pod's claims; missing names the first one that does
// not exist yet (its template not instantiated by the resourceclaim
// controller, or deleted). shareable tells which claims are not the pod's
// own: named by it, or its PodGroup's (owned by the group).
func (d *Devices) podClaims(pod *v1.Pod) (claims []*resourceapi.ResourceClaim, shareable []bool, missing string) {
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		name, _, err := resourceclaim.Name(pod, pc)
		if err != nil {
			return nil, nil, pc.Name
		}
		if name == nil {
			// Not needed (the resourceclaim controller decided so).
			continue
		}
		c, err := d.src.Claim(pod.Namespace, *name)
		if err != nil || c == nil {
			return nil, nil, *name
		}
		claims = append(claims, c)
		shareable = append(shareable, pc.ResourceClaimName != nil || !metav1.IsControlledBy(c, pod))
	}
	return claims, shareable, ""
}

// extendedClaim is the claim behind the pod's DRA-backed extended resources
// on node: those the node's allocatable lacks and a DeviceClass maps.
func (d *Devices) extendedClaim(pod *v1.Pod, node *v1.Node) *resourceapi.ResourceClaim {
	reqs := resources.PodRequests(pod)
	names := make([]string, 0, len(reqs))
	for name := range reqs {
		names = append(names, string(name))
	}
	sort.Strings(names)
	var requests []resourceapi.DeviceRequest
	for _, n := range names {
		name := v1.ResourceName(n)
		if !isExtended(name) || reqs[name] <= 0 {
			continue
		}
		if node != nil {
			if _, onNode := node.Status.Allocatable[name]; onNode {
				continue
			}
		}
		class := d.src.ClassForResource(name)
		if class == nil {
			continue
		}
		requests = append(requests, resourceapi.DeviceRequest{
			Name: fmt.Sprintf("extended-%d", len(requests)),
			Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: class.Name, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: reqs[name],
			},
		})
	}
	if len(requests) == 0 {
		return nil
	}
	c := &resourceapi.ResourceClaim{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: requests}}}
	c.Namespace, c.Name, c.UID = pod.Namespace, pod.Name+"-extended-resources", types.UID("extended-"+string(pod.UID))
	return c
}

func isExtended(name v1.ResourceName) bool {
	n := string(name)
	return strings.Contains(n, "/") && !strings.HasPrefix(n, v1.ResourceDefaultNamespacePrefix) &&
		!strings.HasPrefix(n, v1.ResourceHugePagesPrefix)
}

// Asks reports whether the pod asks for devices the planner must allocate:
// claims, or extended resources a DeviceClass maps.
func (d *Devices) Asks(pod *v1.Pod) bool {
	if len(pod.Spec.ResourceClaims) > 0 {
		return true
	}
	return d.extendedClaim(pod, nil) != nil
}

// Demand is what the pod asks for in queue resources: its containers'
// requests, plus each claim's devices counted under its class's
// ResourceName; DeviceClass-mapped extended resources are renamed to the
// class's ResourceName. A claim shared by several pods counts for each.
// The list may be shared (RequestCache): callers must not change it.
func (d *Devices) Demand(pod *v1.Pod) resources.List {
	requests := d.requests.Of(pod)
	out := requests
	// Copied on the first change only: most pods need none.
	copied := false
	change := func() {
		if !copied {
			out, copied = requests.Clone(), true
		}
	}
	var renames map[v1.ResourceName]v1.ResourceName
	for name := range requests {
		if !isExtended(name) {
			continue
		}
		if class := d.src.ClassForResource(name); class != nil {
			if rn := ResourceName(class); rn != name {
				if renames == nil {
					renames = map[v1.ResourceName]v1.ResourceName{}
				}
				renames[name] = rn
			}
		}
	}
	if renames != nil {
		// Built fresh, not renamed in place: in place, renaming b away
		// could drop an amount an a→b rename had moved in, depending on
		// map order.
		out, copied = make(resources.List, len(requests)), true
		for name, v := range requests {
			if rn, ok := renames[name]; ok {
				name = rn
			}
			out[name] += v
		}
	}
	if len(pod.Spec.ResourceClaims) == 0 {
		return out
	}
	change()
	claims, _, _ := d.podClaims(pod)
	for _, c := range claims {
		for _, r := range c.Spec.Devices.Requests {
			class, count := requestCount(r)
			if class == "" {
				continue
			}
			name := v1.ResourceName(implicitPrefix + class)
			if dc, err := d.src.Classes().Get(class); err == nil && dc != nil {
				name = ResourceName(dc)
			}
			out[name] += count
		}
	}
	return out
}

// requestCount is a request's class and device count (the first
// alternative of a prioritized list; 1 for allocation mode All, whose
// count depends on the node).
func requestCount(r resourceapi.DeviceRequest) (string, int64) {
	switch {
	case r.Exactly != nil:
		if r.Exactly.AllocationMode == resourceapi.DeviceAllocationModeAll {
			return r.Exactly.DeviceClassName, 1
		}
		return r.Exactly.DeviceClassName, max(r.Exactly.Count, 1)
	case len(r.FirstAvailable) > 0:
		s := r.FirstAvailable[0]
		if s.AllocationMode == resourceapi.DeviceAllocationModeAll {
			return s.DeviceClassName, 1
		}
		return s.DeviceClassName, max(s.Count, 1)
	}
	return "", 0
}

// ResourceNames are the queue resource names of every DeviceClass: the
// planner leaves their node arithmetic to the allocator on nodes whose
// allocatable does not publish them.
func (d *Devices) ResourceNames() sets.Set[v1.ResourceName] {
	out := sets.New[v1.ResourceName]()
	classes, err := d.src.Classes().List()
	if err != nil {
		return out
	}
	for _, c := range classes {
		out.Insert(ResourceName(c))
		if n := ptr.Deref(c.Spec.ExtendedResourceName, ""); n != "" {
			out.Insert(v1.ResourceName(n))
		}
		out.Insert(v1.ResourceName(implicitPrefix + c.Name))
	}
	return out
}

// Hold keeps the devices a committed plan allocated, so that other gangs'
// plans do not count them free before the members reserve them.
func (d *Devices) hold(ref Ref, h []held) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(h) == 0 {
		delete(d.holds, ref)
		return
	}
	d.holds[ref] = h
}

// Release drops what a gang's plan holds.
func (d *Devices) Release(ref Ref) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.holds, ref)
}

// Held lists the gangs whose plans hold devices.
func (d *Devices) Held() []Ref {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Ref, 0, len(d.holds))
	for r := range d.holds {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// ClaimWriter writes a claim's status (the scheduler's client).
type ClaimWriter interface {
	UpdateClaimStatus(ctx context.Context, claim *resourceapi.ResourceClaim) error
	// Unbound reads a pod from the API server, not a cache: true when it
	// exists with the same UID and no node.
	Unbound(ctx context.Context, namespace, name string, uid types.UID) (bool, error)
	// GroupUnbound reads the pods of a Workload API PodGroup from the API
	// server: true when none of them is bound.
	GroupUnbound(ctx context.Context, namespace, podGroup string) (bool, error)
}

// SetWriter gives the devices view the client it frees stale claims with.
func (d *Devices) SetWriter(w ClaimWriter) { d.writer = w }

// FreeStale deallocates the claims that are allocated and reserved only
// for pending (unbound, not reserved) members of a gang, or for their
// PodGroup while none of its pods is placed (idle: none reserved or bound
// here, and the API server shows none bound): a scheduler
// allocated them in PreBind and stopped before the bind (killed, or the
// bind failed). Their gang did not start, so the devices go back, and the
// members are planned afresh. It returns the claims freed.
func (d *Devices) FreeStale(ctx context.Context, pending []*v1.Pod, idle bool) []string {
	if d.writer == nil {
		return nil
	}
	waiting := sets.New[types.UID]()
	// groups: the Workload API PodGroups of pending members; a claim
	// reserved for one (a group-level claim) is theirs too.
	groups := sets.New[string]()
	for _, p := range pending {
		if p.Spec.NodeName == "" {
			waiting.Insert(p.UID)
			if sg := p.Spec.SchedulingGroup; idle && sg != nil && sg.PodGroupName != nil {
				groups.Insert(*sg.PodGroupName)
			}
		}
	}
	isGroup := func(r resourceapi.ResourceClaimConsumerReference) bool {
		return r.APIGroup == schedulingv1beta1.GroupName && r.Resource == "podgroups"
	}
	var freed []string
	seen := sets.New[string]()
	for _, p := range pending {
		claims, _, _ := d.podClaims(p)
		for _, c := range claims {
			key := c.Namespace + "/" + c.Name
			if seen.Has(key) || c.Status.Allocation == nil || len(c.Status.ReservedFor) == 0 {
				continue
			}
			seen.Insert(key)
			stale := true
			for _, r := range c.Status.ReservedFor {
				if isGroup(r) && !groups.Has(r.Name) || !isGroup(r) && !waiting.Has(r.UID) {
					stale = false
				}
			}
			// The informer may not show a bind that just happened: ask the
			// API server before taking a claim from a pod or its group.
			for _, r := range c.Status.ReservedFor {
				if !stale {
					break
				}
				var unbound bool
				var err error
				if isGroup(r) {
					unbound, err = d.writer.GroupUnbound(ctx, c.Namespace, r.Name)
				} else {
					unbound, err = d.writer.Unbound(ctx, c.Namespace, r.Name, r.UID)
				}
				if err != nil || !unbound {
					stale = false
				}
			}
			if !stale {
				continue
			}
			c = c.DeepCopy()
			c.Status.ReservedFor = nil
			c.Status.Allocation = nil
			if err := d.writer.UpdateClaimStatus(ctx, c); err != nil {
				klog.FromContext(ctx).V(2).Info("Could not free a stale claim", "claim", key, "err", err)
				continue
			}
			freed = append(freed, key)
		}
	}
	return freed
}

// fingerprint names a slice's devices as the allocator sees them, without
// the node and pool they are on: slices of alike nodes print alike.
func (d *Devices) fingerprint(sl *resourceapi.ResourceSlice) string {
	taints := 0
	for i := range sl.Spec.Devices {
		taints += len(sl.Spec.Devices[i].Taints)
	}
	d.mu.Lock()
	f, ok := d.prints[sl.UID]
	d.mu.Unlock()
	if ok && sl.UID != "" && f.version == sl.ResourceVersion && f.taints == taints {
		return f.print
	}
	spec := sl.Spec.DeepCopy()
	spec.NodeName, spec.Pool.Name = nil, ""
	raw, _ := json.Marshal(spec)
	h := fnv.New64a()
	_, _ = h.Write(raw)
	print := fmt.Sprintf("%x", h.Sum64())
	if sl.UID != "" {
		d.mu.Lock()
		d.prints[sl.UID] = sliceFingerprint{version: sl.ResourceVersion, taints: taints, print: print}
		d.mu.Unlock()
	}
	return print
}

// ClassForResource is the class an extended resource maps to among
// classes, as upstream's extended resource cache maps it: the class whose
// spec.extendedResourceName is name (the newest when several are, the
// lower name on a tie), else the class whose implicit name
// deviceclass.resource.kubernetes.io/<class> is name; nil when none. For
// Sources that read classes from a plain lister (the controller).
func ClassForResource(classes []*resourceapi.DeviceClass, name v1.ResourceName) *resourceapi.DeviceClass {
	var explicit, implicit *resourceapi.DeviceClass
	for _, c := range classes {
		if ptr.Deref(c.Spec.ExtendedResourceName, "") == string(name) {
			if explicit == nil || newer(c, explicit) {
				explicit = c
			}
		}
		if implicitPrefix+c.Name == string(name) {
			implicit = c
		}
	}
	if explicit != nil {
		return explicit
	}
	return implicit
}

func newer(a, b *resourceapi.DeviceClass) bool {
	ta, tb := a.CreationTimestamp.UnixNano(), b.CreationTimestamp.UnixNano()
	if ta != tb {
		return ta > tb
	}
	return a.Name < b.Name
}
