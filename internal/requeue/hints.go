package requeue

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// Queueing hints: which cluster events may make a rejected member
// schedulable.

// SkipFailedGang: capacity events do not retry the members of a gang whose
// plan failed, its representative included. The runtime's own handlers of
// the same events (pods gone, nodes and devices changed, holds given up)
// void the cached failure and wake the representative, paced by what the
// failed plans cost (failedWakes); its new plan wakes the others. Retried
// by the queue on every event besides, a few dozen gangs that did not fit
// were planned again for each pod that finished, each failure with a pod
// status write in the scheduling loop, and jobs behind them that fit
// waited (docs/benchmarks.md).
// Members asleep behind their gang's lead (quorumWaiters) are skipped too:
// its plan wakes them.
func (w *Waker) SkipFailedGang(pod *v1.Pod) bool {
	ref, ok := w.Directory.RefOf(pod)
	if !ok {
		return false
	}
	// A gang paused after a timed-out plan is woken when the pause ends
	// (Resumed); moved by every pod that finishes meanwhile, each member
	// was refused again, a status write each.
	_, paused := w.Lifecycle.Paused(ref)
	return paused || w.Lifecycle.Representative(ref) != "" || w.Asleep(ref, pod.UID)
}

// CapacityHint is the queueing hint of the events that free capacity:
// members SkipFailedGang names stay where they are (a member whose gang's
// failure missed the room a pod freed or a node added is woken apart:
// retryStaleFailure). A pod event's change is the pod that left (oldObj),
// a node event's the node as it is now (newObj).
func (w *Waker) CapacityHint(_ klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	if w.SkipFailedGang(pod) {
		changed := oldObj
		if n, ok := newObj.(*v1.Node); ok {
			changed = n
		}
		w.RetryStaleFailure(pod, changed)
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}
