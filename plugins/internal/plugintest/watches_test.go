package plugintest

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestWatchGate: an informer's list (from resource version "0") leaves the
// gate closed until a watch of the same resource is registered; a test's
// own list (no resource version) does not close it.
func TestWatchGate(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset()
	g := newWatchGate()
	g.install(c, nil)
	if !g.ready() {
		t.Fatal("closed before any list")
	}
	if _, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if !g.ready() {
		t.Fatal("a test's own list closed the gate")
	}
	if _, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{ResourceVersion: "0"}); err != nil {
		t.Fatal(err)
	}
	if g.ready() {
		t.Fatal("open between an informer's list and its watch")
	}
	if _, err := c.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if g.ready() {
		t.Fatal("a watch of another resource opened the gate")
	}
	w, err := c.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{ResourceVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if !g.ready() {
		t.Fatal("closed after the list's watch was registered")
	}
	// The watch is the tracker's: a pod created now reaches it.
	if _, err := c.CoreV1().Pods("default").Create(ctx, Pod("p", "", "1", 0), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ev := <-w.ResultChan(); ev.Object.(interface{ GetName() string }).GetName() != "p" {
		t.Fatalf("watch got %v, want the new pod", ev)
	}
}
