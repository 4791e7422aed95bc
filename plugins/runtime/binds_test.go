package runtime

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// TestBindSlots: no more than n binds hold a slot; a waiter gets the slot a
// holder releases; releasing a pod that holds none changes nothing; a
// waiter whose context ends gives up without a slot.
func TestBindSlots(t *testing.T) {
	b := NewBindSlots(2)
	ctx := context.Background()
	for _, uid := range []types.UID{"a", "b"} {
		if err := b.Acquire(ctx, uid); err != nil {
			t.Fatal(err)
		}
	}
	b.Release("never-held")
	if b.InFlight() != 2 {
		t.Fatalf("in flight %d after releasing a pod without a slot, want 2", b.InFlight())
	}

	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := b.Acquire(short, "late"); err == nil {
		t.Fatal("a third pod got a slot of two")
	}
	b.Release("late") // gave up: holds nothing
	if b.InFlight() != 2 {
		t.Fatalf("in flight %d, want 2", b.InFlight())
	}

	got := make(chan error, 1)
	go func() { got <- b.Acquire(ctx, "c") }()
	select {
	case err := <-got:
		t.Fatalf("c got a slot while both were held (err %v)", err)
	case <-time.After(20 * time.Millisecond):
	}
	b.Release("a")
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("c did not get the slot a released")
	}
	b.Release("a") // twice: the second is a no-op
	b.Release("b")
	b.Release("c")
	if b.InFlight() != 0 {
		t.Fatalf("in flight %d after every release, want 0", b.InFlight())
	}
}
