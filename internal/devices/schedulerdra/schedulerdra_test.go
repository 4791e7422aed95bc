package schedulerdra

import (
	"context"
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"
)

// tracker is a ResourceClaimTracker whose GatherAllocatedState fails a
// number of times first, as the real one does when a read races a change.
type tracker struct {
	fwk.ResourceClaimTracker
	failures, calls int
	assumed         []*resourceapi.ResourceClaim
}

func (t *tracker) GatherAllocatedState() (*structured.AllocatedState, error) {
	t.calls++
	if t.calls <= t.failures {
		return nil, errors.New("state changed while gathering")
	}
	return &structured.AllocatedState{}, nil
}

func (t *tracker) AssumeClaimAfterAPICall(c *resourceapi.ResourceClaim) error {
	t.assumed = append(t.assumed, c)
	return nil
}

type manager struct {
	fwk.SharedDRAManager
	claims *tracker
}

func (m manager) ResourceClaims() fwk.ResourceClaimTracker     { return m.claims }
func (m manager) DeviceClassResolver() fwk.DeviceClassResolver { return nil }

func TestNewWithoutDRAManager(t *testing.T) {
	if d := New(nil, fake.NewClientset()); d != nil {
		t.Fatalf("New without a DRA manager = %v, want nil: the scheduler runs without DRA", d)
	}
	if d := New(manager{claims: &tracker{}}, nil); d == nil {
		t.Fatal("New with a DRA manager = nil, want a device view")
	}
}

func TestAllocatedRetriesRacingReads(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failures int
		wantErr  bool
	}{
		{"first read", 0, false},
		{"after races", 5, false},
		{"never", 1000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &tracker{failures: tc.failures}
			st, err := source{manager{claims: tr}}.Allocated()
			if (err != nil) != tc.wantErr {
				t.Fatalf("Allocated: %v, want error %v", err, tc.wantErr)
			}
			if !tc.wantErr && st == nil {
				t.Fatal("Allocated returned no state and no error")
			}
			if want := min(tc.failures+1, 100); tr.calls != want {
				t.Fatalf("gathered %d times, want %d (bounded retries)", tr.calls, want)
			}
		})
	}
}

func TestClassForResourceWithoutResolver(t *testing.T) {
	if c := (source{manager{claims: &tracker{}}}).ClassForResource("example.com/gpu"); c != nil {
		t.Fatalf("ClassForResource without a resolver = %v, want nil", c)
	}
}

func pod(name string, uid types.UID, node, group string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: uid}, Spec: v1.PodSpec{NodeName: node}}
	if group != "" {
		p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
	}
	return p
}

func TestClaimWriterUnbound(t *testing.T) {
	client := fake.NewClientset(pod("a", "uid-a", "", ""), pod("b", "uid-b", "n1", ""))
	w := claimWriter{c: client, dra: manager{claims: &tracker{}}}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		uid  types.UID
		want bool
	}{
		{"a", "uid-a", true},      // pending, same pod
		{"a", "uid-other", false}, // a pod of the same name made anew
		{"b", "uid-b", false},     // bound
	} {
		got, err := w.Unbound(ctx, "ns", tc.name, tc.uid)
		if err != nil || got != tc.want {
			t.Errorf("Unbound(%s, %s) = %v, %v; want %v", tc.name, tc.uid, got, err, tc.want)
		}
	}
	if _, err := w.Unbound(ctx, "ns", "gone", "uid"); err == nil {
		t.Error("Unbound of a missing pod: no error, want NotFound")
	}
}

func TestClaimWriterGroupUnbound(t *testing.T) {
	objs := []runtime.Object{pod("a-0", "1", "", "a"), pod("a-1", "2", "", "a"), pod("b-0", "3", "n1", "b"), pod("c-0", "4", "n1", "")}
	w := claimWriter{c: fake.NewClientset(objs...), dra: manager{claims: &tracker{}}}
	for group, want := range map[string]bool{"a": true, "b": false, "none": true} {
		got, err := w.GroupUnbound(context.Background(), "ns", group)
		if err != nil || got != want {
			t.Errorf("GroupUnbound(%s) = %v, %v; want %v", group, got, err, want)
		}
	}
}

func TestClaimWriterTellsTheAssumeCache(t *testing.T) {
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
	tr := &tracker{}
	w := claimWriter{c: fake.NewClientset(claim), dra: manager{claims: tr}}
	update := claim.DeepCopy()
	update.Status.Allocation = &resourceapi.AllocationResult{}
	if err := w.UpdateClaimStatus(context.Background(), update); err != nil {
		t.Fatal(err)
	}
	if len(tr.assumed) != 1 || tr.assumed[0].Status.Allocation == nil {
		t.Fatalf("assume cache told %v, want the written claim once", tr.assumed)
	}
	missing := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "gone", Namespace: "ns"}}
	if err := w.UpdateClaimStatus(context.Background(), missing); err == nil || len(tr.assumed) != 1 {
		t.Fatalf("a failed write: err %v, assumed %d; want an error and nothing assumed", err, len(tr.assumed))
	}
}
