package integration

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/devices"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// TestDRAQueueStatus: phalanx-controller's Queue.status counts DRA devices
// as the scheduler does. A DeviceClass counted as nvidia.com/gpu, a node
// whose slice publishes 8 of its devices; a running gang whose claim has 2
// shows nvidia.com/gpu 2 in status.allocated, and with a pending gang
// asking for 10 more the queue deserves all 8 the slice publishes (the
// node has no nvidia.com/gpu allocatable: only the slice counts).
func TestDRAQueueStatus(t *testing.T) {
	c := startCluster(t)
	startScheduler(t, c)
	if err := c.StartController(); err != nil {
		t.Fatal(err)
	}
	const driver, ns, q = "qs.example.com", "dra-qs", "gpu-q"
	const gpu = v1.ResourceName("nvidia.com/gpu")
	draSetupClass(t, c, driver, "", map[string]string{devices.QueueResourceAnnotation: string(gpu)},
		draNode{name: "qs-0", cpu: "64", devices: 8})
	createQueue(t, c, queue(q, 1))
	createClaims(t, c, ns, []string{"small"}, claimSpec(driver, 2, ""))
	createDRAGang(t, c, ns, "small", 1, []*v1.Pod{withClaim(draPod(ns, "small", driver, 0, "1"), "small", "")}, phalanxv1alpha1.QueueLabel, q)
	waitBoundCount(t, c, ns, "small", 1)

	status := func(what string, allocated, deserved int64) {
		t.Helper()
		var last phalanxv1alpha1.QueueStatus
		err := testcluster.Eventually(ctxFor(t), 30*time.Second, func(ctx context.Context) (bool, error) {
			got, err := c.Phalanx.SchedulingV1alpha1().Queues().Get(ctx, q, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			last = got.Status
			a, d := got.Status.Allocated[gpu], got.Status.Deserved[gpu]
			return a.Value() == allocated && d.Value() == deserved, nil
		})
		if err != nil {
			t.Fatalf("%s: queue %s status allocated %v, deserved %v; want nvidia.com/gpu %d allocated, %d deserved: %v",
				what, q, last.Allocated, last.Deserved, allocated, deserved, err)
		}
	}
	status("a gang with a claim of 2 devices running", 2, 2)

	// A gang asking for 10 devices (more than the slice has) waits: its
	// demand makes the queue deserve every device the slice publishes.
	createClaims(t, c, ns, []string{"huge"}, claimSpec(driver, 10, ""))
	createDRAGang(t, c, ns, "huge", 1, []*v1.Pod{withClaim(draPod(ns, "huge", driver, 0, "1"), "huge", "")}, phalanxv1alpha1.QueueLabel, q)
	status("a gang asking for 10 more devices pending", 2, 8)
}
