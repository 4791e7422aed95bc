package integration

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/controller"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
	"github.com/phalanx-sched/phalanx/manifests"
)

// TestDecayedFairShare: queue a-hot has had the whole node for a while;
// then a-hot and b-cold, of equal weight, each submit a gang of the whole
// node at the same moment (their parent queue opens). Without decayed fair
// share (usageHalfLifeSeconds 0) their shares tie and a-hot's gang,
// submitted a second earlier, starts; with a 20 s half-life a-hot's
// recent usage puts b-cold first, and phalanx-controller shows that usage
// in a-hot's status. Either way one gang starts: two queues whose gangs
// each exceed their share do not wait on each other.
func TestDecayedFairShare(t *testing.T) {
	for _, tc := range []struct {
		name     string
		halfLife int
		winner   string
	}{
		{"off", 0, "a-hot"},
		{"half-life 20s", 20, "b-cold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startCluster(t, testcluster.NodeSpec{Name: "n-0", CPU: "2", Memory: "16Gi"})
			createQueue(t, c, queue("org", 1))
			for _, name := range []string{"a-hot", "b-cold"} {
				q := queue(name, 1)
				q.Spec.Parent = "org"
				createQueue(t, c, q)
			}
			config := bytes.Replace(manifests.SchedulerConfig, []byte("usageHalfLifeSeconds: 0"), []byte(fmt.Sprintf("usageHalfLifeSeconds: %d", tc.halfLife)), 1)
			if !bytes.Contains(config, []byte(fmt.Sprintf("usageHalfLifeSeconds: %d", tc.halfLife))) {
				t.Fatal("the canonical profile does not set usageHalfLifeSeconds")
			}
			if _, err := c.StartScheduler(config); err != nil {
				t.Fatalf("starting scheduler: %v", err)
			}
			halfLife := time.Duration(tc.halfLife) * time.Second
			if err := c.StartController(func(o *controller.Options) { o.UsageHalfLife = halfLife }); err != nil {
				t.Fatal(err)
			}
			ctx := ctxFor(t)

			// a-hot runs on the whole node (4 × 500m).
			submitJobs(t, c, "a-hot", "hot", 1, 4)
			waitQueueCounts(t, c, map[string]int{"a-hot": 4})
			start := time.Now()
			if tc.halfLife > 0 {
				// Its recent usage shows in its status as it grows: above
				// 300m after about 5 s of 2 CPUs with a 20 s half-life.
				waitRecentUsage(t, c, "a-hot", func(m int64) bool { return m >= 300 })
			}
			// The same history either way: at least 6 s on the node.
			time.Sleep(time.Until(start.Add(6 * time.Second)))

			setQueueState(t, c, "org", phalanxv1alpha1.QueueStateClosed)
			if err := c.Client.CoreV1().Pods("default").DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)},
				metav1.ListOptions{LabelSelector: pgv1alpha1.PodGroupLabel + "=hot-0"}); err != nil {
				t.Fatal(err)
			}
			waitQueueCounts(t, c, map[string]int{"a-hot": 0})
			submitJobs(t, c, "a-hot", "hot-again", 1, 4)
			hotAgain, err := c.PodGroups.SchedulingV1alpha1().PodGroups("default").Get(ctx, "hot-again-0", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			waitPastSecond(t, hotAgain.CreationTimestamp.Time)
			submitJobs(t, c, "b-cold", "cold", 1, 4)
			// Both wait for the closed parent before it opens.
			waitCondition(t, c, "default", "hot-again-0", "QueueAdmission", "org is closed")
			waitCondition(t, c, "default", "cold-0", "QueueAdmission", "org is closed")
			setQueueState(t, c, "org", phalanxv1alpha1.QueueStateOpen)

			loser := map[string]string{"a-hot": "b-cold", "b-cold": "a-hot"}[tc.winner]
			waitQueueCounts(t, c, map[string]int{tc.winner: 4, loser: 0})
			if tc.halfLife > 0 {
				// b-cold's own usage now accrues.
				waitRecentUsage(t, c, "b-cold", func(m int64) bool { return m > 0 })
			} else {
				q, err := c.Phalanx.SchedulingV1alpha1().Queues().Get(ctx, "a-hot", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if len(q.Status.RecentUsage) != 0 {
					t.Errorf("decayed fair share off, yet a-hot shows recent usage %v", q.Status.RecentUsage)
				}
			}
		})
	}
}

func setQueueState(t *testing.T, c *testcluster.Cluster, name string, state phalanxv1alpha1.QueueState) {
	t.Helper()
	ctx := ctxFor(t)
	// A patch: an update from a Get races the controller's status writes.
	patch := fmt.Sprintf(`{"spec":{"state":%q}}`, state)
	if _, err := c.Phalanx.SchedulingV1alpha1().Queues().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitRecentUsage waits until the queue's status.recentUsage CPU (in
// millicores) satisfies ok.
func waitRecentUsage(t *testing.T, c *testcluster.Cluster, name string, ok func(milli int64) bool) {
	t.Helper()
	var last string
	err := testcluster.Eventually(ctxFor(t), 60*time.Second, func(ctx context.Context) (bool, error) {
		q, err := c.Phalanx.SchedulingV1alpha1().Queues().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = fmt.Sprint(q.Status.RecentUsage)
		cpu, found := q.Status.RecentUsage["cpu"]
		return found && ok(cpu.MilliValue()), nil
	})
	if err != nil {
		t.Fatalf("queue %s: status.recentUsage %s never reached the expected CPU: %v", name, last, err)
	}
}
