package ports

import (
	"fmt"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// recorder is a part's pod handler that records what it was told.
type recorder struct {
	name string
	log  *[]string
}

func (r recorder) handler() cache.ResourceEventHandlerFuncs {
	name := func(obj any) string { return obj.(*v1.Pod).Name }
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { *r.log = append(*r.log, r.name+" add "+name(obj)) },
		UpdateFunc: func(o, n any) { *r.log = append(*r.log, fmt.Sprintf("%s update %s->%s", r.name, name(o), name(n))) },
		DeleteFunc: func(obj any) { *r.log = append(*r.log, r.name+" delete "+name(obj)) },
	}
}

func TestPodEventsReachEveryPartInOrder(t *testing.T) {
	var log []string
	var p PodEvents
	p.Add(recorder{"gangs", &log}.handler())
	p.Add(recorder{"queues", &log}.handler())
	h := p.Handler()
	a := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	b := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b"}}
	h.OnAdd(a, false)
	h.OnUpdate(a, b)
	h.OnDelete(b)
	want := []string{"gangs add a", "queues add a", "gangs update a->b", "queues update a->b", "gangs delete b", "queues delete b"}
	if !slices.Equal(log, want) {
		t.Fatalf("delivered %q, want %q", log, want)
	}
}

func TestPodEventsAddedLaterHearLaterEvents(t *testing.T) {
	var log []string
	var p PodEvents
	h := p.Handler()
	h.OnAdd(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "early"}}, false)
	p.Add(recorder{"late", &log}.handler())
	h.OnAdd(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "next"}}, false)
	if !slices.Equal(log, []string{"late add next"}) {
		t.Fatalf("delivered %q, want only the event after the part was added", log)
	}
	n := 0
	p.Each(func(cache.ResourceEventHandler) { n++ })
	if n != 1 {
		t.Fatalf("Each visited %d handlers, want 1", n)
	}
}
