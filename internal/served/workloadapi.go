package served

import (
	"context"
	"sync"
	"time"

	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// Func reports whether the API server serves a resource (Resource, or a
// fake in tests).
type Func func(groupVersion, resource string) (bool, error)

// WorkloadAPI is what the API server serves of the Workload API
// (scheduling.k8s.io/v1beta1 PodGroups and Workloads, v1alpha3
// CompositePodGroups). Workloads and Composites are only looked for when
// PodGroups are served.
type WorkloadAPI struct {
	PodGroups, Workloads, Composites bool
}

// LookWorkloadAPI asks what of the Workload API is served; the error is the
// PodGroups' discovery failure (the others' count as not served).
func LookWorkloadAPI(served Func) (WorkloadAPI, error) {
	beta := schedulingv1beta1.SchemeGroupVersion.String()
	var w WorkloadAPI
	var err error
	if w.PodGroups, err = served(beta, "podgroups"); err != nil || !w.PodGroups {
		return WorkloadAPI{}, err
	}
	w.Workloads, _ = served(beta, "workloads")
	w.Composites, _ = served(schedulingv1alpha3.SchemeGroupVersion.String(), "compositepodgroups")
	return w, nil
}

// Follower follows what of the Workload API is served while the process
// runs (an operator may turn it on or off): each Check that finds something
// other than what was last applied calls Apply, the scheduler's and the
// controller's alike.
type Follower struct {
	Served Func
	// Apply moves from what was applied (prev; nothing at first) to want,
	// and reports whether it did; if not, the next Check tries again.
	Apply func(ctx context.Context, prev, want WorkloadAPI) bool

	mu      sync.Mutex
	current WorkloadAPI
}

// Check looks once and applies a change. A discovery error changes nothing.
func (f *Follower) Check(ctx context.Context) {
	want, err := LookWorkloadAPI(f.Served)
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Could not tell whether the Workload API is served; keeping what was found before", "err", err)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if want == f.current {
		return
	}
	if f.Apply(ctx, f.current, want) {
		f.current = want
	}
}

// Run checks every interval until ctx ends.
func (f *Follower) Run(ctx context.Context, every time.Duration) {
	wait.UntilWithContext(ctx, f.Check, every)
}

// Current is what was last applied.
func (f *Follower) Current() WorkloadAPI {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.current
}
