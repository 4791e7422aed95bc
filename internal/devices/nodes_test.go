package devices

import (
	"context"
	"reflect"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

// TestNodeSlices: a node's total is its allocatable plus its slices'
// devices, each slice counted once; a slice that changes replaces its own
// count, one that goes (or moves) leaves its node, one local to no node
// counts nowhere.
func TestNodeSlices(t *testing.T) {
	ctx := context.Background()
	d := New(newFake([]*resourceapi.DeviceClass{class(map[string]string{QueueResourceAnnotation: "nvidia.com/gpu"}, "")}, nil), features)
	s := NewNodeSlices(d)
	alloc := resources.List{"cpu": 64000}
	total := func(node string) int64 { return s.Total(node, alloc)["nvidia.com/gpu"] }

	a1, a2 := slice("a", 8, nil), slice("a", 4, nil)
	a2.Name = "a-second"
	if got := s.Set(ctx, a1); !reflect.DeepEqual(got, []string{"a"}) {
		t.Fatalf("Set = %v, want [a]", got)
	}
	s.Set(ctx, a2)
	if got := total("a"); got != 12 {
		t.Fatalf("total(a) = %d, want 12 (two slices)", got)
	}
	if got := s.Total("a", alloc)["cpu"]; got != 64000 || alloc["nvidia.com/gpu"] != 0 {
		t.Fatalf("Total keeps allocatable and leaves it alone: cpu %d, allocatable %v", got, alloc)
	}
	s.Set(ctx, slice("a", 2, nil)) // a1 republished with 2 devices
	if got := total("a"); got != 6 {
		t.Fatalf("total(a) = %d after a slice shrank, want 6", got)
	}
	moved := a2.DeepCopy()
	moved.Spec.NodeName = ptr.To("b")
	if got := s.Set(ctx, moved); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("Set of a moved slice = %v, want [a b]", got)
	}
	if total("a") != 2 || total("b") != 4 {
		t.Fatalf("after the move: a %d, b %d; want 2, 4", total("a"), total("b"))
	}
	shared := slice("shared", 16, nil)
	shared.Spec.NodeName, shared.Spec.AllNodes = nil, ptr.To(true)
	if got := s.Set(ctx, shared); len(got) != 0 {
		t.Fatalf("Set of a slice of all nodes = %v, want none", got)
	}
	if got := s.Delete(moved); got != "b" || total("b") != 0 {
		t.Fatalf("Delete = %q, total(b) %d; want b, 0", got, total("b"))
	}
	if got := s.Delete(shared); got != "" {
		t.Fatalf("Delete of a slice that counted nowhere = %q, want \"\"", got)
	}
}
