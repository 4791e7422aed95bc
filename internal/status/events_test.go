package status

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
)

// TestEventRecorderSkipsMembersScheduled: with a skip function, a skipped
// pod's Scheduled event is left out, through the recorder the scheduler gets
// from WithLogger too; other pods' Scheduled events, other reasons of a
// skipped pod and other objects pass; SkipScheduled(nil) passes all again.
func TestEventRecorderSkipsMembersScheduled(t *testing.T) {
	fake := events.NewFakeRecorder(10)
	r := NewEventRecorder(fake)
	member := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "member", Namespace: "ns", Labels: map[string]string{"gang": "a"}}}
	plain := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "ns"}}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	drain := func() []string {
		var got []string
		for {
			select {
			case e := <-fake.Events:
				got = append(got, e)
			default:
				return got
			}
		}
	}
	emit := func(rec events.EventRecorderLogger) {
		rec.Eventf(member, nil, v1.EventTypeNormal, ScheduledReason, "Binding", "Successfully assigned %s", "member")
		rec.Eventf(plain, nil, v1.EventTypeNormal, ScheduledReason, "Binding", "Successfully assigned %s", "plain")
		rec.Eventf(member, nil, v1.EventTypeWarning, "FailedScheduling", "Scheduling", "no room")
		rec.Eventf(node, nil, v1.EventTypeNormal, ScheduledReason, "Binding", "odd but not a pod")
	}

	emit(r)
	if got := drain(); len(got) != 4 {
		t.Fatalf("before SkipScheduled, %d events passed, want all 4: %q", len(got), got)
	}
	r.SkipScheduled(func(p *v1.Pod) bool { return p.Labels["gang"] != "" })
	for _, rec := range []events.EventRecorderLogger{r, r.WithLogger(klog.Background())} {
		emit(rec)
		got := drain()
		want := []string{
			"Normal Scheduled Successfully assigned plain",
			"Warning FailedScheduling no room",
			"Normal Scheduled odd but not a pod",
		}
		if len(got) != len(want) {
			t.Fatalf("with a skip, got %q, want %q", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("event %d = %q, want %q", i, got[i], want[i])
			}
		}
	}
	r.SkipScheduled(nil)
	emit(r.WithLogger(klog.Background()))
	if got := drain(); len(got) != 4 {
		t.Fatalf("after SkipScheduled(nil), %d events passed, want all 4: %q", len(got), got)
	}
}
