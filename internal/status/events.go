package status

import (
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
)

// ScheduledReason is the reason of the event kube-scheduler writes for every
// pod it binds ("Successfully assigned ns/pod to node").
const ScheduledReason = "Scheduled"

// EventRecorder is a profile's event recorder, as the framework hands it to
// the scheduler and the plugins, that may leave out the Scheduled events of
// gang members: an event write costs the API server as much as the bind, so
// a gang that binds a thousand members writes a thousand events more than it
// needs; its group object gets one (Gangs.Started). The profile's
// Coscheduling plugin decides (its scheduledEvents arg); every other event
// passes through.
type EventRecorder struct {
	events.EventRecorderLogger
	skip *atomic.Pointer[func(*v1.Pod) bool]
}

var _ events.EventRecorderLogger = &EventRecorder{}

// NewEventRecorder wraps a profile's recorder; it passes everything until
// SkipScheduled is called.
func NewEventRecorder(inner events.EventRecorderLogger) *EventRecorder {
	return &EventRecorder{EventRecorderLogger: inner, skip: &atomic.Pointer[func(*v1.Pod) bool]{}}
}

// SkipScheduled leaves out the Scheduled event of every pod for which skip
// says so; nil passes them all again.
func (r *EventRecorder) SkipScheduled(skip func(*v1.Pod) bool) {
	if skip == nil {
		r.skip.Store(nil)
		return
	}
	r.skip.Store(&skip)
}

// Eventf records the event unless it is a skipped pod's Scheduled event.
func (r *EventRecorder) Eventf(regarding, related k8sruntime.Object, eventtype, reason, action, note string, args ...any) {
	if reason == ScheduledReason {
		if pod, ok := regarding.(*v1.Pod); ok {
			if skip := r.skip.Load(); skip != nil && (*skip)(pod) {
				return
			}
		}
	}
	r.EventRecorderLogger.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

// WithLogger keeps the filter: the scheduler asks for a recorder with the
// cycle's logger for each event.
func (r *EventRecorder) WithLogger(logger klog.Logger) events.EventRecorderLogger {
	return &EventRecorder{EventRecorderLogger: r.EventRecorderLogger.WithLogger(logger), skip: r.skip}
}
