package devices

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

// fakeSource is the DRA state of a test.
type fakeSource struct {
	claims    map[string]*resourceapi.ResourceClaim
	classes   []*resourceapi.DeviceClass
	slices    []*resourceapi.ResourceSlice
	allocated sets.Set[structured.DeviceID]
}

func (f *fakeSource) Claim(ns, name string) (*resourceapi.ResourceClaim, error) {
	if c, ok := f.claims[ns+"/"+name]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("claim %s/%s not found", ns, name)
}
func (f *fakeSource) Classes() structured.DeviceClassLister { return classLister(f.classes) }
func (f *fakeSource) ClassForResource(name v1.ResourceName) *resourceapi.DeviceClass {
	for _, c := range f.classes {
		if ptr.Deref(c.Spec.ExtendedResourceName, "") == string(name) {
			return c
		}
	}
	return nil
}
func (f *fakeSource) Slices() ([]*resourceapi.ResourceSlice, error) { return f.slices, nil }
func (f *fakeSource) Allocated() (*structured.AllocatedState, error) {
	return &structured.AllocatedState{AllocatedDevices: f.allocated.Clone(), AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity: structured.NewConsumedCapacityCollection()}, nil
}

type classLister []*resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) { return l, nil }
func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	for _, c := range l {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, fmt.Errorf("class %s not found", name)
}

const driver = "gpu.example.com"

func class(annotations map[string]string, extended string) *resourceapi.DeviceClass {
	c := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: driver, Annotations: annotations},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "` + driver + `"`}}}}}
	if extended != "" {
		c.Spec.ExtendedResourceName = ptr.To(extended)
	}
	return c
}

func slice(node string, devices int, root func(int) string) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node},
		Spec: resourceapi.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(node), Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1}}}
	for i := range devices {
		d := resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i)}
		if root != nil {
			d.Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"root": {StringValue: ptr.To(root(i))}}
		}
		s.Spec.Devices = append(s.Spec.Devices, d)
	}
	return s
}

func claim(name string, count int64, match string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu",
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: driver, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}}}}}}
	if match != "" {
		c.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(driver + "/" + match))}}
	}
	return c
}

func pod(name string, claims ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("pod-" + name)},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
	for i, c := range claims {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, v1.PodResourceClaim{Name: fmt.Sprintf("c%d", i), ResourceClaimName: ptr.To(c)})
	}
	return p
}

func node(name string) *v1.Node { return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }

func newFake(classes []*resourceapi.DeviceClass, slices []*resourceapi.ResourceSlice, claims ...*resourceapi.ResourceClaim) *fakeSource {
	f := &fakeSource{claims: map[string]*resourceapi.ResourceClaim{}, classes: classes, slices: slices, allocated: sets.New[structured.DeviceID]()}
	for _, c := range claims {
		f.claims[c.Namespace+"/"+c.Name] = c
	}
	return f
}

var features = structured.Features{PrioritizedList: true, DeviceTaints: true, PartitionableDevices: true}

func TestResourceName(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    *resourceapi.DeviceClass
		want v1.ResourceName
	}{
		{"annotation wins", class(map[string]string{QueueResourceAnnotation: "nvidia.com/gpu"}, "example.com/gpu"), "nvidia.com/gpu"},
		{"extended resource name", class(nil, "example.com/gpu"), "example.com/gpu"},
		{"implicit name", class(nil, ""), "deviceclass.resource.kubernetes.io/" + driver},
	} {
		if got := ResourceName(tc.c); got != tc.want {
			t.Errorf("%s: ResourceName = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestDemand(t *testing.T) {
	mapped := class(map[string]string{QueueResourceAnnotation: "nvidia.com/gpu"}, "example.com/gpu")
	src := newFake([]*resourceapi.DeviceClass{mapped}, nil, claim("two", 2, ""))
	d := New(src, features)
	p := pod("p", "two")
	p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), "example.com/gpu": resource.MustParse("1")}
	got := d.Demand(p)
	want := resources.List{v1.ResourceCPU: 1000, "nvidia.com/gpu": 3}
	if got.String() != want.String() {
		t.Fatalf("Demand = %s, want %s (claim devices and the mapped extended resource count as the class's queue resource)", got, want)
	}
}

// Renames are one step each and do not depend on map order: a→b and b→c
// (chained) with d→c (colliding) give b from a, and c from b and d.
func TestDemandRenamesOrderIndependent(t *testing.T) {
	rename := func(from, to string) *resourceapi.DeviceClass {
		return class(map[string]string{QueueResourceAnnotation: to}, from)
	}
	src := newFake([]*resourceapi.DeviceClass{
		rename("a.example.com/dev", "b.example.com/dev"),
		rename("b.example.com/dev", "c.example.com/dev"),
		rename("d.example.com/dev", "c.example.com/dev"),
	}, nil)
	d := New(src, features)
	p := pod("p")
	p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"),
		"a.example.com/dev": resource.MustParse("1"), "b.example.com/dev": resource.MustParse("2"), "d.example.com/dev": resource.MustParse("4")}
	want := resources.List{v1.ResourceCPU: 1000, "b.example.com/dev": 1, "c.example.com/dev": 6}
	for i := 0; i < 100; i++ {
		if got := d.Demand(p); got.String() != want.String() {
			t.Fatalf("call %d: Demand = %s, want %s", i, got, want)
		}
	}
}

// Limit runs the allocator member after member: a node of 4 devices takes
// 4 one-device members, 2 two-device members that must share a root, and
// none when its roots hold one device each.
func TestLimit(t *testing.T) {
	perRoot := func(n int) func(int) string { return func(i int) string { return fmt.Sprint(i / n) } }
	for _, tc := range []struct {
		name  string
		slice *resourceapi.ResourceSlice
		claim *resourceapi.ResourceClaim
		max   int
		want  int
	}{
		{"one device each", slice("n", 4, nil), claim("c", 1, ""), 16, 4},
		{"capped by max", slice("n", 4, nil), claim("c", 1, ""), 3, 3},
		{"matchAttribute, roots of 2", slice("n", 4, perRoot(2)), claim("c", 2, "root"), 16, 2},
		{"matchAttribute, roots of 1", slice("n", 4, perRoot(1)), claim("c", 2, "root"), 16, 0},
		{"roots of 3 and 1", slice("n", 4, perRoot(3)), claim("c", 2, "root"), 16, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := newFake([]*resourceapi.DeviceClass{class(nil, "")}, []*resourceapi.ResourceSlice{tc.slice}, tc.claim)
			s := New(src, features).Session(context.Background(), "ns/g", []*v1.Pod{pod("m0", "c")}, func(string) *v1.Node { return node("n") }, nil)
			if got := s.Limit(pod("m0", "c"), "n", tc.max); got != tc.want {
				t.Fatalf("Limit = %d, want %d (err %v)", got, tc.want, s.Err())
			}
			// Limit forgets what it tried.
			if got := s.Limit(pod("m0", "c"), "n", tc.max); got != tc.want {
				t.Fatalf("second Limit = %d, want %d", got, tc.want)
			}
		})
	}
}

// Assign allocates in planned order; no device twice; a shared claim once;
// other plans' holds and the scheduler's allocated devices are taken.
func TestAssign(t *testing.T) {
	claims := []*resourceapi.ResourceClaim{claim("c0", 1, ""), claim("c1", 1, ""), claim("c2", 1, ""), claim("shared", 1, "")}
	src := newFake([]*resourceapi.DeviceClass{class(nil, "")}, []*resourceapi.ResourceSlice{slice("a", 2, nil), slice("b", 2, nil)}, claims...)
	d := New(src, features)
	nodes := func(n string) *v1.Node { return node(n) }
	members := []*v1.Pod{pod("m0", "c0"), pod("m1", "c1"), pod("m2", "c2")}

	s := d.Session(context.Background(), "ns/g1", members, nodes, func(string) bool { return true })
	if failed, ok := s.Assign([]Placement{{Pod: members[0], Node: "a"}, {Pod: members[1], Node: "a"}, {Pod: members[2], Node: "a"}}); ok || failed != 2 {
		t.Fatalf("3 members on a node of 2 devices: Assign = (%d, %v), want the third to fail", failed, ok)
	}
	if _, ok := s.Assign([]Placement{{Pod: members[0], Node: "a"}, {Pod: members[1], Node: "a"}, {Pod: members[2], Node: "b"}}); !ok {
		t.Fatalf("2 on a and 1 on b: Assign failed: %v", s.Err())
	}
	s.Commit("ns/g1")

	// Another gang sees g1's holds: b has one device left.
	other := []*v1.Pod{pod("o0", "shared"), pod("o1", "shared")}
	s2 := d.Session(context.Background(), "ns/g2", other, nodes, func(string) bool { return true })
	if got := s2.Limit(other[0], "a", 4); got != 0 {
		t.Fatalf("node a, held whole by g1: Limit = %d, want 0", got)
	}
	if got := s2.Limit(other[0], "b", 4); got != 4 {
		t.Fatalf("node b, a claim shared by both members: Limit = %d, want 4 (allocated once)", got)
	}
	if _, ok := s2.Assign([]Placement{{Pod: other[0], Node: "b"}, {Pod: other[1], Node: "b"}}); !ok {
		t.Fatalf("two members sharing a claim on b: Assign failed: %v", s2.Err())
	}
	if failed, ok := s2.Assign([]Placement{{Pod: other[0], Node: "b"}, {Pod: other[1], Node: "a"}}); ok || failed != 1 {
		t.Fatalf("members sharing a claim on two nodes: Assign = (%d, %v), want the second to fail", failed, ok)
	}

	// Once g1's plan is gone, its holds no longer count.
	s3 := d.Session(context.Background(), "ns/g2", other, nodes, func(string) bool { return false })
	if got := s3.Limit(other[0], "a", 4); got != 4 {
		t.Fatalf("after g1's plan ended: Limit on a = %d, want 4", got)
	}
	if len(d.Held()) != 0 {
		t.Fatalf("holds of ended plans stay: %v", d.Held())
	}
}

// Without counts the devices of leaving pods as free.
func TestWithout(t *testing.T) {
	used := claim("used", 2, "")
	used.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: driver, Pool: "a", Device: "gpu-0"}, {Request: "gpu", Driver: driver, Pool: "a", Device: "gpu-1"}}}}
	victim := pod("victim", "used")
	used.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "victim", UID: victim.UID}}
	src := newFake([]*resourceapi.DeviceClass{class(nil, "")}, []*resourceapi.ResourceSlice{slice("a", 2, nil)}, used, claim("c", 1, ""))
	src.allocated.Insert(structured.MakeDeviceID(driver, "a", "gpu-0"), structured.MakeDeviceID(driver, "a", "gpu-1"))
	s := New(src, features).Session(context.Background(), "ns/g", []*v1.Pod{pod("m", "c")}, func(string) *v1.Node { return node("a") }, nil)
	if got := s.Limit(pod("m", "c"), "a", 4); got != 0 {
		t.Fatalf("full node: Limit = %d, want 0", got)
	}
	restore := s.Without([]*v1.Pod{victim})
	if got := s.Limit(pod("m", "c"), "a", 4); got != 2 {
		t.Fatalf("victim leaving: Limit = %d, want 2", got)
	}
	restore()
	if got := s.Limit(pod("m", "c"), "a", 4); got != 0 {
		t.Fatalf("after restore: Limit = %d, want 0", got)
	}
}

func TestCapacity(t *testing.T) {
	other := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "nic"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "nic.example.com"`}}}}}
	d := New(newFake([]*resourceapi.DeviceClass{class(map[string]string{QueueResourceAnnotation: "nvidia.com/gpu"}, ""), other}, nil), features)
	got := d.SliceCapacity(context.Background(), slice("a", 8, nil))
	if got.String() != (resources.List{"nvidia.com/gpu": 8}).String() {
		t.Fatalf("SliceCapacity = %s, want nvidia.com/gpu=8 (the nic class matches none)", got)
	}
}

// Alike nodes share Limit's answer; a node with a device taken does not.
func TestLimitAlikeNodes(t *testing.T) {
	slices := []*resourceapi.ResourceSlice{slice("a", 4, nil), slice("b", 4, nil), slice("c", 4, nil)}
	for i, sl := range slices {
		sl.UID, sl.ResourceVersion = types.UID(fmt.Sprint("slice-", i)), "1"
	}
	src := newFake([]*resourceapi.DeviceClass{class(nil, "")}, slices, claim("c", 1, ""))
	src.allocated.Insert(structured.MakeDeviceID(driver, "b", "gpu-2"))
	s := New(src, features).Session(context.Background(), "ns/g", []*v1.Pod{pod("m0", "c")}, node, nil)
	for _, tc := range []struct {
		node string
		want int
	}{{"a", 4}, {"b", 3}, {"c", 4}, {"b", 3}} {
		if got := s.Limit(pod("m0", "c"), tc.node, 16); got != tc.want {
			t.Fatalf("Limit on %s = %d, want %d", tc.node, got, tc.want)
		}
	}
}

// TestGroupClaim: a PodGroup's claim, made from a template and named in
// each member's status, is allocated once for the gang. From a slice for
// all nodes, members on different nodes share the one allocation; from a
// node's slice, they must be on that node.
func TestGroupClaim(t *testing.T) {
	group := claim("job-fabric", 1, "")
	group.OwnerReferences = []metav1.OwnerReference{{Kind: "PodGroup", Name: "job", Controller: ptr.To(true), UID: "pg"}}
	fabric := slice("fabric", 1, nil)
	fabric.Spec.NodeName, fabric.Spec.AllNodes = nil, ptr.To(true)
	member := func(name string) *v1.Pod {
		p := pod(name)
		p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "fabric", ResourceClaimTemplateName: ptr.To("fabric")}}
		p.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "fabric", ResourceClaimName: ptr.To(group.Name)}}
		return p
	}
	members := []*v1.Pod{member("m0"), member("m1")}
	if got := SharedClaims(members); !got["ns/job-fabric"] {
		t.Fatalf("SharedClaims = %v, want the PodGroup's claim", got)
	}
	nodes := func(n string) *v1.Node { return node(n) }
	for _, tc := range []struct {
		name    string
		slices  []*resourceapi.ResourceSlice
		nodes   []string
		wantOK  bool
		wantBad int
	}{
		{"for all nodes, two nodes", []*resourceapi.ResourceSlice{fabric}, []string{"a", "b"}, true, -1},
		{"node-local, two nodes", []*resourceapi.ResourceSlice{slice("a", 1, nil)}, []string{"a", "b"}, false, 1},
		{"node-local, one node", []*resourceapi.ResourceSlice{slice("a", 1, nil)}, []string{"a", "a"}, true, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := New(newFake([]*resourceapi.DeviceClass{class(nil, "")}, tc.slices, group), features)
			s := d.Session(context.Background(), "ns/job", members, nodes, func(string) bool { return true })
			failed, ok := s.Assign([]Placement{{Pod: members[0], Node: tc.nodes[0]}, {Pod: members[1], Node: tc.nodes[1]}})
			if ok != tc.wantOK || failed != tc.wantBad {
				t.Fatalf("Assign = (%d, %v), want (%d, %v): %v", failed, ok, tc.wantBad, tc.wantOK, s.Err())
			}
		})
	}
}

// fakeWriter records claim status writes; bound says which PodGroups have
// a bound pod on the API server.
type fakeWriter struct {
	bound   map[string]bool
	written []string
}

func (w *fakeWriter) UpdateClaimStatus(_ context.Context, c *resourceapi.ResourceClaim) error {
	w.written = append(w.written, c.Name)
	return nil
}
func (w *fakeWriter) Unbound(context.Context, string, string, types.UID) (bool, error) {
	return true, nil
}
func (w *fakeWriter) GroupUnbound(_ context.Context, _, podGroup string) (bool, error) {
	return !w.bound[podGroup], nil
}

// TestFreeStaleGroupClaim: a PodGroup's claim allocated for a gang that
// never started (a scheduler stopped between PreBind and the binds) is
// freed when the gang plans again — but not while a member is placed here
// (the first may be mid-bind) or bound on the API server.
func TestFreeStaleGroupClaim(t *testing.T) {
	for _, tc := range []struct {
		name      string
		idle      bool
		bound     bool
		wantFreed bool
	}{
		{"idle gang", true, false, true},
		{"a member placed here", false, false, false},
		{"a member bound", true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			group := claim("job-fabric", 1, "")
			group.Status.Allocation = &resourceapi.AllocationResult{}
			group.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{APIGroup: "scheduling.k8s.io", Resource: "podgroups", Name: "job", UID: "pg"}}
			m := pod("m0")
			m.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("job")}
			m.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "fabric", ResourceClaimTemplateName: ptr.To("fabric")}}
			m.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "fabric", ResourceClaimName: ptr.To(group.Name)}}
			d := New(newFake(nil, nil, group), features)
			w := &fakeWriter{bound: map[string]bool{"job": tc.bound}}
			d.SetWriter(w)
			freed := d.FreeStale(context.Background(), []*v1.Pod{m}, tc.idle)
			if got := len(freed) == 1; got != tc.wantFreed {
				t.Fatalf("FreeStale = %v (writes %v), want freed %v", freed, w.written, tc.wantFreed)
			}
		})
	}
}
