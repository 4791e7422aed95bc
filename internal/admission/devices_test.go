package admission

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

const gpu = v1.ResourceName("example.com/gpu")

// TestClaimMade: a claim made from a template for a pod charges the pod
// again with the devices it now asks for; a claim of another owner, or of
// an earlier pod of the same name, charges nothing.
func TestClaimMade(t *testing.T) {
	claim := func(kind, name string, uid types.UID) *resourceapi.ResourceClaim {
		return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c",
			OwnerReferences: []metav1.OwnerReference{{Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}}}
	}
	for _, tc := range []struct {
		name    string
		obj     any
		wantGPU int64
	}{
		{"owned by the pod", claim("Pod", "p", "ns-p"), 2},
		{"owned by an earlier pod of the name", claim("Pod", "p", "old-uid"), 0},
		{"owned by another kind", claim("ReplicaSet", "p", "ns-p"), 0},
		{"owned by a pod not in the lister", claim("Pod", "q", "ns-q"), 0},
		{"not a claim", &v1.Pod{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{})
			p := pod("ns", "p", 1000, 0, inQueue("a"))
			f.addPod(p)
			f.extra[p.UID] = resources.List{gpu: 2}
			f.q.ClaimMade(tc.obj)
			s := f.q.Snapshot()
			if got := s.Pending["a"][gpu]; got != tc.wantGPU || cpu(s.Pending, "a") != 1000 {
				t.Fatalf("pending %v, want %d gpus beside the cpu", s.Pending["a"], tc.wantGPU)
			}
		})
	}
}

// TestRecount: a class change charges again the pods that ask for devices,
// only those; without a device view the slices count nothing.
func TestRecount(t *testing.T) {
	f := newFixture(t, Options{})
	f.addNode("n1", 8000)
	asking, plain := pod("ns", "asking", 1000, 0, inQueue("a")), pod("ns", "plain", 1000, 0, inQueue("b"))
	f.addPod(asking)
	f.addPod(plain)
	f.extra[asking.UID] = resources.List{gpu: 4}
	f.extra[plain.UID] = resources.List{gpu: 1} // changed too, but asks for no device
	sl := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: resourceapi.ResourceSliceSpec{NodeName: ptr.To("n1")}}
	f.q.Recount(context.Background(), []*resourceapi.ResourceSlice{sl}, func(p *v1.Pod) bool { return p.UID == asking.UID })
	s := f.q.Snapshot()
	if s.Pending["a"][gpu] != 4 || s.Pending["b"][gpu] != 0 {
		t.Fatalf("pending %v: want a's 4 gpus charged and b's left", s.Pending)
	}
	if s.Total[gpu] != 0 || s.Total[v1.ResourceCPU] != 8000 {
		t.Fatalf("total %v, want n1's allocatable alone", s.Total)
	}
}

// TestSliceHandlerWithoutDevices: without a device view (Ports.Slices nil)
// slice events leave the total alone.
func TestSliceHandlerWithoutDevices(t *testing.T) {
	f := newFixture(t, Options{})
	f.addNode("n1", 8000)
	before := f.q.Snapshot().Version
	sl := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: resourceapi.ResourceSliceSpec{NodeName: ptr.To("n1")}}
	h := f.q.SliceHandler(context.Background())
	h.AddFunc(sl)
	h.UpdateFunc(sl, sl)
	h.DeleteFunc(cache.DeletedFinalStateUnknown{Key: "s", Obj: sl})
	if s := f.q.Snapshot(); s.Version != before || s.Total[v1.ResourceCPU] != 8000 {
		t.Fatalf("slice events changed the accounting: version %d→%d, total %v", before, s.Version, s.Total)
	}
}
