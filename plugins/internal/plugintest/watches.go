package plugintest

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"
)

// fakeClient is what the generated fake clientsets have in common.
type fakeClient interface {
	PrependReactor(verb, resource string, reaction clienttesting.ReactionFunc)
	PrependWatchReactor(resource string, reaction clienttesting.WatchReactionFunc)
	Tracker() clienttesting.ObjectTracker
}

// watchGate tells when every informer that listed has its watch in place.
// An informer is synced once its list is stored, and its watch starts
// after: a fake tracker replays objects added or changed in that gap, but
// not objects deleted in it, so a test that deletes right after New would
// leave the deleted object in the informer for good (a flake seen on loaded
// CI machines).
type watchGate struct {
	mu sync.Mutex
	// unwatched counts, per resource, informer lists not yet followed by
	// a watch.
	unwatched map[schema.GroupVersionResource]int
}

func newWatchGate() *watchGate {
	return &watchGate{unwatched: map[schema.GroupVersionResource]int{}}
}

func (g *watchGate) add(gvr schema.GroupVersionResource, n int) {
	g.mu.Lock()
	g.unwatched[gvr] += n
	g.mu.Unlock()
}

// install counts an informer's lists (a reflector lists from resource
// version "0"; a test's own lists do not) and the watches registered with
// the client's tracker, as the generated clientsets' default watch reactor
// registers them; onList (nil: none) is called on every list.
func (g *watchGate) install(c fakeClient, onList func(resource string)) {
	c.PrependReactor("list", "*", func(a clienttesting.Action) (bool, k8sruntime.Object, error) {
		if l, ok := a.(clienttesting.ListActionImpl); ok && l.ListOptions.ResourceVersion == "0" {
			g.add(a.GetResource(), 1)
		}
		if onList != nil {
			onList(a.GetResource().Resource)
		}
		return false, nil, nil
	})
	c.PrependWatchReactor("*", func(a clienttesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if w, ok := a.(clienttesting.WatchActionImpl); ok {
			opts = w.ListOptions
		}
		w, err := c.Tracker().Watch(a.GetResource(), a.GetNamespace(), opts)
		if err != nil {
			return false, nil, err
		}
		g.add(a.GetResource(), -1)
		return true, w, nil
	})
}

// ready: every resource listed by an informer is watched as often.
func (g *watchGate) ready() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, n := range g.unwatched {
		if n > 0 {
			return false
		}
	}
	return true
}
