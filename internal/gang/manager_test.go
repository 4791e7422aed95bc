package gang

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func twoNodePlan() *Plan {
	return &Plan{Slots: map[string]map[string]int{"a": {"w": 2}, "b": {"w": 1}}}
}

func TestManagerHolds(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	m := NewManager(clock.now)
	shapes := map[string]resources.List{"w": {v1.ResourceCPU: 1000}}
	m.SetPlan("ns/g", twoNodePlan(), shapes, time.Minute)

	held, pods := m.Held("a", "")
	if held[v1.ResourceCPU] != 2000 || pods != 2 {
		t.Fatalf("held on a = %v/%d, want 2000m/2", held, pods)
	}
	if held, _ := m.Held("a", "ns/g"); held != nil {
		t.Fatalf("a gang's own holds must not block it, got %v", held)
	}
	open, live := m.OpenNodes("ns/g", "w")
	if !live || open.Len() != 2 {
		t.Fatalf("open nodes %v live %v", open, live)
	}

	// Reserving a member consumes its slot: the scheduler cache now counts it.
	m.Reserve("ns/g", "uid-1", "a", "w")
	if held, pods := m.Held("a", ""); held[v1.ResourceCPU] != 1000 || pods != 1 {
		t.Fatalf("after reserve, held on a = %v/%d", held, pods)
	}
	m.Reserve("ns/g", "uid-1", "a", "w") // idempotent
	if m.Reserved("ns/g") != 1 {
		t.Fatalf("reserved = %d", m.Reserved("ns/g"))
	}
	m.Unreserve("ns/g", "uid-1")
	if held, _ := m.Held("a", ""); held[v1.ResourceCPU] != 2000 {
		t.Fatalf("unreserve must give the slot back, held %v", held)
	}

	// Expiry frees holds without a Drop.
	clock.t = clock.t.Add(2 * time.Minute)
	if held, pods := m.Held("a", ""); held != nil || pods != 0 {
		t.Fatalf("expired plan still holds %v/%d", held, pods)
	}
	if _, live := m.OpenNodes("ns/g", "w"); live {
		t.Fatalf("expired plan still live")
	}
	if !m.Expired("ns/g") {
		t.Fatalf("Expired = false")
	}
}

func TestManagerDropAndExpireIf(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	m := NewManager(clock.now)
	shapes := map[string]resources.List{"w": {v1.ResourceCPU: 1000}}
	gen := m.SetPlan("ns/g", twoNodePlan(), shapes, time.Minute)
	if m.ExpireIf("ns/g", gen) {
		t.Fatalf("ExpireIf dropped a plan before its time")
	}
	clock.t = clock.t.Add(time.Minute)
	m.SetPlan("ns/g", twoNodePlan(), shapes, time.Minute)
	if m.ExpireIf("ns/g", gen) {
		t.Fatalf("ExpireIf dropped a newer plan")
	}
	m.Drop("ns/g")
	if held, _ := m.Held("a", ""); held != nil {
		t.Fatalf("Drop left holds: %v", held)
	}
	if m.HoldsAnywhere() {
		t.Fatalf("HoldsAnywhere after Drop")
	}
}

func TestManagerFailureCache(t *testing.T) {
	m := NewManager(nil)
	m.Fail("ns/g", "no room")
	if reason, ok := m.Failed("ns/g"); !ok || reason != "no room" {
		t.Fatalf("Failed = %q %v", reason, ok)
	}
	m.Bump() // capacity changed: replan allowed
	if _, ok := m.Failed("ns/g"); ok {
		t.Fatalf("failure survived a capacity change")
	}
	m.Fail("ns/g", "still no room")
	m.SetPlan("ns/g", &Plan{Slots: map[string]map[string]int{}}, nil, time.Minute)
	if _, ok := m.Failed("ns/g"); ok {
		t.Fatalf("failure survived a successful plan")
	}
}

func TestManagerPermittedResetByNewPlan(t *testing.T) {
	m := NewManager(nil)
	m.SetPermitted("ns/g", true)
	if !m.Permitted("ns/g") {
		t.Fatal("Permitted = false")
	}
	m.SetPlan("ns/g", twoNodePlan(), map[string]resources.List{"w": {}}, time.Minute)
	if m.Permitted("ns/g") {
		t.Fatal("a new plan means the gang is below quorum again")
	}
	m.Reserve("ns/g", "u1", "a", "w")
	m.Bound("ns/g", "u1")
	if m.IsReserved("ns/g", "u1") || m.ReservedUIDs("ns/g").Len() != 0 {
		t.Fatal("Bound must forget the reservation")
	}
	m.Forget("ns/g")
	if m.HoldsAnywhere() {
		t.Fatal("Forget left holds")
	}
}
