// Package expected says when work is expected to end: from a pod's
// activeDeadlineSeconds (a hard limit: the kubelet stops the pod then),
// else the expected-runtime annotation on the pod or its group object (a
// soft estimate the user gives), else not at all. Reservations are placed
// by these ends, and work that ends before a reservation's expected start
// may backfill its room.
package expected

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// Source says where a run time comes from.
type Source int

const (
	// Unknown: no limit and no estimate.
	Unknown Source = iota
	// Soft: the expected-runtime annotation; the work may run longer.
	Soft
	// Hard: activeDeadlineSeconds; the work is stopped by then.
	Hard
)

// Runtime is how long work runs once started.
type Runtime struct {
	Duration time.Duration
	Source   Source
}

// Known reports whether the run time is a limit or an estimate.
func (r Runtime) Known() bool { return r.Source != Unknown && r.Duration > 0 }

// Of is the pod's run time: its activeDeadlineSeconds, else the annotation
// on the pod (pod templates propagate it through every operator), else on
// its group object (group may be nil). An annotation that does not parse
// counts as none (Parse says why; the gang's condition names it).
func Of(pod *v1.Pod, group map[string]string) Runtime {
	if d := pod.Spec.ActiveDeadlineSeconds; d != nil && *d > 0 {
		return Runtime{Duration: time.Duration(*d) * time.Second, Source: Hard}
	}
	for _, a := range []map[string]string{pod.Annotations, group} {
		if raw, ok := a[phalanxv1alpha1.ExpectedRuntimeAnnotation]; ok {
			if d, err := Parse(raw); err == nil {
				return Runtime{Duration: d, Source: Soft}
			}
		}
	}
	return Runtime{}
}

// Parse reads an expected-runtime value: a positive Go duration ("4h",
// "90m", "3600s").
func Parse(raw string) (time.Duration, error) {
	d, err := time.ParseDuration(raw)
	switch {
	case err != nil:
		return 0, fmt.Errorf("annotation %s=%q is not a duration such as 4h or 90m", phalanxv1alpha1.ExpectedRuntimeAnnotation, raw)
	case d <= 0:
		return 0, fmt.Errorf("annotation %s=%q is not positive", phalanxv1alpha1.ExpectedRuntimeAnnotation, raw)
	}
	return d, nil
}

// Invalid is why a pod's or group's annotation does not parse ("" when it
// parses or is absent).
func Invalid(annotations map[string]string) string {
	raw, ok := annotations[phalanxv1alpha1.ExpectedRuntimeAnnotation]
	if !ok {
		return ""
	}
	if _, err := Parse(raw); err != nil {
		return err.Error()
	}
	return ""
}

// End is when work of run time r that started at start is expected to
// end, as seen at now; zero when unknown. A soft estimate already passed
// is expected to end now: the work overran it, and whatever waits for its
// room slips with it (nothing is evicted for it).
func (r Runtime) End(start, now time.Time) time.Time {
	if !r.Known() {
		return time.Time{}
	}
	end := start.Add(r.Duration)
	if r.Source == Soft && end.Before(now) {
		return now
	}
	return end
}

// EndsBy is when a pod is expected to be gone if it starts now: its limit
// or estimate (group: its group object's annotations, may be nil) from
// now; zero when it has neither.
func EndsBy(pod *v1.Pod, group map[string]string, now time.Time) time.Time {
	return Of(pod, group).End(now, now)
}

// Overran reports whether soft-estimated work that started at start runs
// past its estimate at now.
func (r Runtime) Overran(start, now time.Time) bool {
	return r.Source == Soft && r.Known() && start.Add(r.Duration).Before(now)
}
