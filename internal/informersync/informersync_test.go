package informersync

import (
	"context"
	"reflect"
	"strings"
	"testing"
)

// part is a fake part: its informers "start" and its wait reports what the
// test says, recording the order of calls.
type part struct {
	name   string
	failed []string
	log    *[]string
}

func (p part) start(<-chan struct{}) { *p.log = append(*p.log, "start "+p.name) }
func (p part) wait(<-chan struct{}) []string {
	*p.log = append(*p.log, "wait "+p.name)
	return p.failed
}

// TestAtOnce: without Defer a part waits for its first list at once, its
// post-sync step runs at once, and a part that did not sync fails naming
// what did not.
func TestAtOnce(t *testing.T) {
	var log []string
	s := New(t.Context())
	a := part{name: "a", log: &log}
	if err := s.Part("A", a.start, a.wait); err != nil {
		t.Fatal(err)
	}
	s.After(func() { log = append(log, "after") })
	if want := []string{"start a", "wait a", "after"}; !reflect.DeepEqual(log, want) {
		t.Fatalf("calls %v, want %v", log, want)
	}
	bad := part{name: "b", failed: []string{"*v1.Thing"}, log: &log}
	err := s.Part("Things", bad.start, bad.wait)
	if err == nil || !strings.Contains(err.Error(), "Things") || !strings.Contains(err.Error(), "*v1.Thing") {
		t.Fatalf("unsynced part: %v, want an error naming the part and the informer", err)
	}
}

// TestDeferred: after Defer every part starts at once and Await waits for
// them all, then runs the steps in order; cycle-only parts are left to
// AwaitCycle, their channel closed once they synced; parts built after
// Await sync at once again.
func TestDeferred(t *testing.T) {
	var log []string
	s := New(t.Context())
	s.Defer()
	a, b, c := part{name: "a", log: &log}, part{name: "b", log: &log}, part{name: "c", log: &log}
	if err := s.Part("A", a.start, a.wait); err != nil {
		t.Fatal(err)
	}
	synced, err := s.CyclePart("C", c.start, c.wait)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Part("B", b.start, b.wait); err != nil {
		t.Fatal(err)
	}
	s.After(func() { log = append(log, "after 1") })
	s.After(func() { log = append(log, "after 2") })
	if want := []string{"start a", "start c", "start b"}; !reflect.DeepEqual(log, want) {
		t.Fatalf("before Await: calls %v, want only the starts %v", log, want)
	}
	if err := s.Await(t.Context()); err != nil {
		t.Fatal(err)
	}
	if want := []string{"start a", "start c", "start b", "wait a", "wait b", "after 1", "after 2"}; !reflect.DeepEqual(log, want) {
		t.Fatalf("after Await: calls %v, want %v", log, want)
	}
	select {
	case <-synced:
		t.Fatal("the cycle-only part's channel closed before AwaitCycle")
	default:
	}
	if err := s.AwaitCycle(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-synced:
	default:
		t.Fatal("the cycle-only part's channel is open after AwaitCycle")
	}
	if log[len(log)-1] != "wait c" {
		t.Fatalf("AwaitCycle did not wait for the cycle-only part: %v", log)
	}
	log = nil
	d := part{name: "d", log: &log}
	if err := s.Part("D", d.start, d.wait); err != nil {
		t.Fatal(err)
	}
	if want := []string{"start d", "wait d"}; !reflect.DeepEqual(log, want) {
		t.Fatalf("a part built after Await: calls %v, want %v", log, want)
	}
}

// TestAwaitFails: a deferred part that did not sync fails Await, naming it.
func TestAwaitFails(t *testing.T) {
	var log []string
	s := New(t.Context())
	s.Defer()
	bad := part{name: "q", failed: []string{"*v1alpha1.Queue"}, log: &log}
	if err := s.Part("Queues", bad.start, bad.wait); err != nil {
		t.Fatalf("deferred part failed before Await: %v", err)
	}
	if err := s.Await(t.Context()); err == nil || !strings.Contains(err.Error(), "Queues") {
		t.Fatalf("Await: %v, want an error naming Queues", err)
	}
}

// TestStartAndWaitStopped: a wait whose context ended reports the
// informers not synced.
func TestStartAndWaitStopped(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := StartAndWait(ctx, "the Workload API", func(<-chan struct{}) {}, func(stop <-chan struct{}) []string {
		<-stop
		return []string{"*v1beta1.PodGroup"}
	})
	if err == nil || !strings.Contains(err.Error(), "*v1beta1.PodGroup") {
		t.Fatalf("stopped wait: %v", err)
	}
}

// TestUnsynced: the informers not synced, sorted.
func TestUnsynced(t *testing.T) {
	got := Unsynced(map[string]bool{"b": false, "a": false, "c": true})
	if want := []string{"a", "b"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Unsynced %v, want %v", got, want)
	}
}

// TestCyclePartAtOnce: without Defer a cycle-only part syncs at once and its
// channel is closed on return; one that does not sync fails then.
func TestCyclePartAtOnce(t *testing.T) {
	var log []string
	s := New(t.Context())
	n := part{name: "nrt", log: &log}
	synced, err := s.CyclePart("NodeResourceTopologies", n.start, n.wait)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-synced:
	default:
		t.Fatal("a cycle-only part synced at once left its channel open")
	}
	bad := part{name: "bad", failed: []string{"*v1alpha2.NodeResourceTopology"}, log: &log}
	if _, err := s.CyclePart("NodeResourceTopologies", bad.start, bad.wait); err == nil {
		t.Fatal("a cycle-only part that did not sync gave no error")
	}
	if err := s.AwaitCycle(t.Context()); err != nil {
		t.Fatalf("nothing deferred: AwaitCycle %v", err)
	}
}
