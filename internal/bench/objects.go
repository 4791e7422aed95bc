package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// A pass's objects on the API server: created before the scheduler starts,
// checked after it binds them, deleted before the next pass.

// CreateObjects creates the gang objects of s and the pods, before the
// scheduler starts, so the measurement is scheduling, not pod creation.
func CreateObjects(ctx context.Context, c *testcluster.Cluster, w Workload, s Scheduler, ns string) error {
	if w.NumGangs() > 0 {
		for g := 0; g < w.NumGangs(); g++ {
			switch s {
			case Phalanx, PhalanxFlat:
				if err := c.CreatePodGroup(ctx, w.PodGroupFor(s, ns, g)); err != nil {
					return err
				}
			case UpstreamGang:
				if _, err := c.Client.SchedulingV1beta1().Workloads(ns).Create(ctx, w.UpstreamWorkload(ns, g), metav1.CreateOptions{}); err != nil {
					return fmt.Errorf("creating upstream Workload: %w", err)
				}
				if w.SubGroupSize > 0 {
					if err := createUpstreamComposite(ctx, c, w, ns, g); err != nil {
						return err
					}
					continue
				}
				if _, err := c.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, w.UpstreamPodGroup(ns, g), metav1.CreateOptions{}); err != nil {
					return fmt.Errorf("creating upstream PodGroup: %w", err)
				}
			}
		}
	}
	if w.Devices > 0 {
		if _, err := c.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, ClaimTemplate(ns), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating the claim template: %w", err)
		}
	}
	if err := Parallel(ctx, w.Total(), func(i int) error {
		pod := w.Pod(s, ns, i)
		created, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating pod %s: %w", pod.Name, err)
		}
		if pod.Spec.SchedulingGroup != nil && created.Spec.SchedulingGroup == nil {
			return fmt.Errorf("the API server dropped spec.schedulingGroup of %s: is the GenericWorkload gate on?", pod.Name)
		}
		return nil
	}); err != nil {
		return err
	}
	if w.Devices == 0 {
		return nil
	}
	// Every pod's claim is made (and named in its status) before the
	// scheduler starts, as the pods are.
	return wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if len(p.Status.ResourceClaimStatuses) == 0 {
				return false, nil
			}
		}
		return len(pods.Items) == w.Total(), nil
	})
}

// createUpstreamComposite creates gang g of a workload with sub-groups as
// upstream's CompositePodGroup and its sub-groups' PodGroups.
func createUpstreamComposite(ctx context.Context, c *testcluster.Cluster, w Workload, ns string, g int) error {
	if _, err := c.Client.SchedulingV1alpha3().CompositePodGroups(ns).Create(ctx, w.UpstreamCompositePodGroup(ns, g), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating upstream CompositePodGroup (is scheduling.k8s.io/v1alpha3 served?): %w", err)
	}
	for _, pg := range w.UpstreamSubGroups(ns, g) {
		created, err := c.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating upstream PodGroup %s: %w", pg.Name, err)
		}
		if created.Spec.ParentCompositePodGroupName == nil {
			return fmt.Errorf("the API server dropped parentCompositePodGroupName of %s: is the %s gate on?", pg.Name, CompositeGate)
		}
	}
	return nil
}

// CheckDevices lists every claim of the cluster and fails when a device is
// allocated to two claims or, with want ≥ 0, when ns has not exactly want
// allocated claims (every bound pod's one claim).
func CheckDevices(ctx context.Context, c *testcluster.Cluster, ns string, want int) error {
	claims, err := c.Client.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	owner := map[string]string{}
	allocated := 0
	for _, cl := range claims.Items {
		if cl.Status.Allocation == nil {
			continue
		}
		if cl.Namespace == ns {
			allocated++
		}
		for _, r := range cl.Status.Allocation.Devices.Results {
			id := r.Driver + "/" + r.Pool + "/" + r.Device
			if other, dup := owner[id]; dup {
				return fmt.Errorf("DEVICE ALLOCATED TWICE: %s to claims %s and %s/%s", id, other, cl.Namespace, cl.Name)
			}
			owner[id] = cl.Namespace + "/" + cl.Name
		}
	}
	if want >= 0 && allocated != want {
		return fmt.Errorf("%d claims of %s allocated, want one per bound pod (%d)", allocated, ns, want)
	}
	return nil
}

// CleanupTimeout bounds the deletion of a pass's objects.
var CleanupTimeout = 10 * time.Minute

// DeleteObjects deletes a pass's pods (and its gangs' and claims' objects)
// and waits until they are gone. One DeleteCollection of tens of thousands
// of pods outlasts the API server's request timeout and stops part way, so
// it is repeated until the namespace is empty; the next pass would
// otherwise start on nodes still full of this one's pods.
func DeleteObjects(ctx context.Context, c *testcluster.Cluster, w Workload, s Scheduler, ns string, progress io.Writer) error {
	now := metav1.DeleteOptions{GracePeriodSeconds: new(int64)}
	if err := deleteUntilGone(ctx, progress, ns+"'s pods", func(ctx context.Context) error {
		return c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, now, metav1.ListOptions{})
	}, func(ctx context.Context) (int, error) {
		list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return 0, err
		}
		return len(list.Items), nil
	}); err != nil {
		return err
	}
	if w.NumGangs() > 0 {
		var errs []error
		switch s {
		case Phalanx, PhalanxFlat:
			errs = append(errs, c.PodGroups.SchedulingV1alpha1().PodGroups(ns).DeleteCollection(ctx, now, metav1.ListOptions{}))
		case UpstreamGang:
			errs = append(errs, c.Client.SchedulingV1beta1().PodGroups(ns).DeleteCollection(ctx, now, metav1.ListOptions{}))
			if w.SubGroupSize > 0 {
				errs = append(errs, c.Client.SchedulingV1alpha3().CompositePodGroups(ns).DeleteCollection(ctx, now, metav1.ListOptions{}))
			}
			errs = append(errs, c.Client.SchedulingV1beta1().Workloads(ns).DeleteCollection(ctx, now, metav1.ListOptions{}))
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	if w.Devices > 0 {
		// The resourceclaim controller deallocates the claims of the
		// deleted pods and lifts their finalizers (without a garbage
		// collector, nothing else deletes them); the next pass needs the
		// devices and no stale claims.
		return deleteUntilGone(ctx, progress, ns+"'s resource claims", func(ctx context.Context) error {
			return c.Client.ResourceV1().ResourceClaims(ns).DeleteCollection(ctx, now, metav1.ListOptions{})
		}, func(ctx context.Context) (int, error) {
			list, err := c.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{Limit: 1})
			if err != nil {
				return 0, err
			}
			return len(list.Items), nil
		})
	}
	return nil
}

// deleteUntilGone calls del until left says nothing is left, within
// CleanupTimeout; a call that fails part way (a timeout) is repeated.
func deleteUntilGone(ctx context.Context, progress io.Writer, what string, del func(context.Context) error, left func(context.Context) (int, error)) error {
	ctx, cancel := context.WithTimeout(ctx, CleanupTimeout)
	defer cancel()
	var last error
	for calls := 1; ; calls++ {
		if last = del(ctx); last != nil {
			fmt.Fprintf(progress, "deleting %s, call %d: %v; deleting again\n", what, calls, last)
		}
		// Deletion of objects with finalizers ends after the call.
		err := testcluster.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
			n, err := left(ctx)
			return n == 0, err
		})
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s still there after %v (last delete: %v)", what, CleanupTimeout, last)
		}
	}
}

// DescribeUnbound writes why a timed-out pass's pods are unbound: the
// unbound pods grouped by kind (gang member or plain), scheduling gates and
// PodScheduled condition, with how many gangs each group spans. A pass that
// times out is a bug to find, and the pods are deleted right after.
func DescribeUnbound(ctx context.Context, c *testcluster.Cluster, ns string, out io.Writer) error {
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	type group struct {
		pods  int
		gangs map[string]bool
	}
	groups := map[string]*group{}
	partial := map[string][2]int{} // gang → bound, unbound
	for i := range pods.Items {
		pod := &pods.Items[i]
		gang := pod.Labels[pgv1alpha1.PodGroupLabel]
		counts := partial[gang]
		if pod.Spec.NodeName != "" {
			counts[0]++
			partial[gang] = counts
			continue
		}
		counts[1]++
		partial[gang] = counts
		kind := "plain"
		if gang != "" {
			kind = "member"
		}
		key := fmt.Sprintf("%s gates=%d %s", kind, len(pod.Spec.SchedulingGates), podScheduled(pod))
		g := groups[key]
		if g == nil {
			g = &group{gangs: map[string]bool{}}
			groups[key] = g
		}
		g.pods++
		if gang != "" {
			g.gangs[gang] = true
		}
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if groups[keys[i]].pods != groups[keys[j]].pods {
			return groups[keys[i]].pods > groups[keys[j]].pods
		}
		return keys[i] < keys[j]
	})
	fmt.Fprintf(out, "unbound pods of %s:\n", ns)
	for _, k := range keys {
		fmt.Fprintf(out, "  %6d pods, %4d gangs: %s\n", groups[k].pods, len(groups[k].gangs), k)
	}
	split := 0
	for gang, counts := range partial {
		if gang != "" && counts[0] > 0 && counts[1] > 0 {
			split++
		}
	}
	fmt.Fprintf(out, "  gangs with members both bound and unbound: %d\n", split)
	return nil
}

// podScheduled is a pod's PodScheduled condition, its message cut short.
func podScheduled(pod *v1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type != v1.PodScheduled {
			continue
		}
		msg := c.Message
		if len(msg) > 160 {
			msg = msg[:160] + "…"
		}
		return fmt.Sprintf("PodScheduled=%s/%s %q", c.Status, c.Reason, msg)
	}
	return "no PodScheduled condition"
}
