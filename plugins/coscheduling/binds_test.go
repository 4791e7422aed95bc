package coscheduling

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

// TestWaitForBacklog: a plan waits while more members than the backlog
// wait for a slot, goes on as soon as one of them gets a slot, and never
// waits past its bound or its context.
func TestWaitForBacklog(t *testing.T) {
	b := NewBindSlots(1)
	ctx := context.Background()
	if err := b.Acquire(ctx, "holder"); err != nil {
		t.Fatal(err)
	}
	if waited := b.WaitForBacklog(ctx, 0, time.Minute); waited > time.Second {
		t.Fatalf("waited %v with nobody waiting for a slot", waited)
	}
	waiterCtx, stopWaiters := context.WithCancel(ctx)
	defer stopWaiters()
	acquired := make(chan error, 2)
	for _, uid := range []types.UID{"w1", "w2"} {
		go func() { acquired <- b.Acquire(waiterCtx, uid) }()
	}
	deadline := time.Now().Add(5 * time.Second)
	for b.Waiting() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiting for a slot, want 2", b.Waiting())
		}
		time.Sleep(time.Millisecond)
	}

	if waited := b.WaitForBacklog(ctx, 1, 30*time.Millisecond); waited < 30*time.Millisecond {
		t.Fatalf("returned after %v with 2 waiting over a backlog of 1, want the 30ms bound", waited)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if waited := b.WaitForBacklog(cancelled, 1, time.Minute); waited > time.Second {
		t.Fatalf("waited %v on an ended context", waited)
	}

	done := make(chan time.Duration, 1)
	go func() { done <- b.WaitForBacklog(ctx, 1, time.Minute) }()
	select {
	case waited := <-done:
		t.Fatalf("returned after %v while 2 still waited", waited)
	case <-time.After(20 * time.Millisecond):
	}
	b.Release("holder") // one waiter takes the slot: one left waiting
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the plan still waited after a waiter got its slot")
	}
	if err := <-acquired; err != nil {
		t.Fatal(err)
	}
	if b.Waiting() != 1 {
		t.Fatalf("%d waiting, want 1", b.Waiting())
	}
	stopWaiters()
	if err := <-acquired; err == nil {
		t.Fatal("the cancelled waiter got a slot")
	}
	if b.Waiting() != 0 {
		t.Fatalf("%d waiting after the last waiter gave up, want 0", b.Waiting())
	}
}
