package integration

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/phalanx-sched/phalanx/internal/testcluster"
	"github.com/phalanx-sched/phalanx/manifests"
)

// TestScheduledEvents: with the canonical profile (scheduledEvents PerGang)
// a gang that starts gets one Scheduled event on its PodGroup and its
// members none of their own, while a pod outside gangs still gets
// kube-scheduler's; with PerMember every member gets its own too. The plain
// pod is created once the gang is bound, so its event comes after any
// member's would have been written.
func TestScheduledEvents(t *testing.T) {
	for _, tc := range []struct {
		mode       string
		memberEach bool
	}{{"PerGang", false}, {"PerMember", true}} {
		t.Run(tc.mode, func(t *testing.T) {
			c := startCluster(t, nodes("n", 2, testcluster.NodeSpec{CPU: "4", Memory: "16Gi"})...)
			config := bytes.Replace(manifests.SchedulerConfig, []byte("scheduledEvents: PerGang"), []byte("scheduledEvents: "+tc.mode), 1)
			if !bytes.Contains(config, []byte("scheduledEvents: "+tc.mode)) {
				t.Fatalf("the canonical profile does not set scheduledEvents")
			}
			if _, err := c.StartScheduler(config); err != nil {
				t.Fatalf("starting scheduler: %v", err)
			}
			ns := "events-" + map[bool]string{false: "gang", true: "member"}[tc.memberEach]
			createGang(t, c, testcluster.PodGroup(ns, "trainer", 3), gangPods(ns, "trainer", 3, testcluster.PodSpec{CPU: "1", Memory: "1Gi"}))
			waitBoundCount(t, c, ns, "trainer", 3)
			waitGroupEvent(t, c, ns, "trainer", "Scheduled", "3 of 3 members placed")
			if err := c.CreatePods(ctxFor(t), testcluster.PodSpec{Name: "plain", Namespace: ns, CPU: "1", Memory: "1Gi"}); err != nil {
				t.Fatal(err)
			}

			scheduledPods := func(ctx context.Context) (map[string]bool, error) {
				list, err := c.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
				if err != nil {
					return nil, err
				}
				got := map[string]bool{}
				for _, e := range list.Items {
					if e.Regarding.Kind == "Pod" && e.Reason == "Scheduled" {
						got[e.Regarding.Name] = true
					}
				}
				return got, nil
			}
			var got map[string]bool
			err := testcluster.Eventually(ctxFor(t), 60*time.Second, func(ctx context.Context) (bool, error) {
				var err error
				got, err = scheduledPods(ctx)
				if err != nil || !got["plain"] {
					return false, err
				}
				return !tc.memberEach || len(got) == 4, nil
			})
			if err != nil {
				t.Fatalf("pods with a Scheduled event: %v, want plain%s: %v", got, map[bool]string{false: "", true: " and every member"}[tc.memberEach], err)
			}
			if !tc.memberEach {
				for i := range 3 {
					if member := fmt.Sprintf("trainer-%d", i); got[member] {
						t.Errorf("member %s got a Scheduled event of its own with scheduledEvents PerGang", member)
					}
				}
			}
		})
	}
}
