package integration

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// orderGang is one waiting gang of TestOrderAcrossQueues: 2 members of 4
// GPUs in queue, at the priority of class ("" for none).
type orderGang struct{ queue, name, class string }

func (g orderGang) create(t *testing.T, c *testcluster.Cluster) *pgv1alpha1.PodGroup {
	t.Helper()
	pg := testcluster.PodGroup("default", g.name, 2)
	pg.Labels = map[string]string{phalanxv1alpha1.QueueLabel: g.queue}
	if err := c.CreatePodGroup(ctxFor(t), pg); err != nil {
		t.Fatal(err)
	}
	got, err := c.PodGroups.SchedulingV1alpha1().PodGroups("default").Get(ctxFor(t), g.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func (g orderGang) pods() []testcluster.PodSpec {
	return gangPods("default", g.name, 2, testcluster.PodSpec{CPU: "100m", GPUs: 4, PriorityClassName: g.class,
		Labels: map[string]string{"order-step": "yes"}})
}

// waitPastSecond polls until the wall clock (the API server's: same
// machine) is in a later second than t0, so the next object created has a
// later creationTimestamp (whole seconds).
func waitPastSecond(t *testing.T, t0 time.Time) {
	t.Helper()
	err := testcluster.Eventually(ctxFor(t), 5*time.Second, func(context.Context) (bool, error) {
		return time.Now().Truncate(time.Second).After(t0.Truncate(time.Second)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// positionsOf reads the cluster positions phalanx-controller serves for the
// default namespace's gangs.
func positionsOf(ctx context.Context, c *testcluster.Cluster) (map[string]int32, error) {
	qp, err := c.Phalanx.SchedulingV1alpha1().QueuePositionses("default").Get(ctx, phalanxv1alpha1.QueuePositionsName, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	out := map[string]int32{}
	for _, g := range qp.Gangs {
		out[g.Name] = g.PositionInCluster
	}
	return out, nil
}

// TestOrderAcrossQueues: the documented order between gangs of different
// queues, one step of the rule at a time, on a real API server. Queues a-hot
// and b-cold (weight 1, under org) each have one waiting gang of 8 GPUs,
// room for one. Both wait while org is closed; phalanx-controller's served
// positions must show the winner first; then org opens and the winner binds
// while the other waits. In every step the queue first by name, a-hot, is
// the one the rule puts second, so an order that fell back to queue names
// fails each step:
//   - share: a-hot runs a gang already; its older, higher-priority gang goes
//     after b-cold's;
//   - priority: equal shares; b-cold's higher-priority gang, submitted later;
//   - submission time: equal shares and priority; b-cold's gang a second
//     older;
//   - tie-break: same share, priority and second; the gangs' names decide
//     (b-cold's "tie-a" before a-hot's "tie-z").
func TestOrderAcrossQueues(t *testing.T) {
	c := startCluster(t, testcluster.NodeSpec{Name: "n-0", CPU: "16", Memory: "64Gi", GPUs: 10})
	createQueue(t, c, queue("org", 1))
	for _, name := range []string{"a-hot", "b-cold"} {
		q := queue(name, 1)
		q.Spec.Parent = "org"
		createQueue(t, c, q)
	}
	createPriorityClass(t, c, "high", 100, false)
	startScheduler(t, c)
	if err := c.StartController(); err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)

	// step submits first, then second (a second later, or in the same
	// second), and checks that winner, one of them, goes first.
	step := func(t *testing.T, first, second orderGang, sameSecond bool, winnerName string) {
		winner, loser := first, second
		if second.name == winnerName {
			winner, loser = second, first
		}
		setQueueState(t, c, "org", phalanxv1alpha1.QueueStateClosed)
		for try := 0; ; try++ {
			a := first.create(t, c)
			if !sameSecond {
				waitPastSecond(t, a.CreationTimestamp.Time)
			}
			b := second.create(t, c)
			if !sameSecond || a.CreationTimestamp.Equal(&b.CreationTimestamp) {
				break
			}
			if try == 5 {
				t.Fatal("could not create two PodGroups within one second")
			}
			for _, name := range []string{first.name, second.name} {
				if err := c.PodGroups.SchedulingV1alpha1().PodGroups("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := c.CreatePods(ctx, append(loser.pods(), winner.pods()...)...); err != nil {
			t.Fatal(err)
		}
		waitCondition(t, c, "default", winner.name, "QueueAdmission", "org is closed")
		waitCondition(t, c, "default", loser.name, "QueueAdmission", "org is closed")
		var pos map[string]int32
		err := testcluster.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
			var err error
			pos, err = positionsOf(ctx, c)
			return err == nil && pos[winner.name] > 0 && pos[loser.name] > 0, err
		})
		if err != nil {
			t.Fatalf("positions never listed both gangs (last %v): %v", pos, err)
		}
		if pos[winner.name] > pos[loser.name] {
			t.Errorf("served positions put %s (%d) before %s (%d)", loser.name, pos[loser.name], winner.name, pos[winner.name])
		}

		setQueueState(t, c, "org", phalanxv1alpha1.QueueStateOpen)
		waitBoundCount(t, c, "default", winner.name, 2)
		assertBound(t, c, "default", loser.name, 0)

		for _, name := range []string{winner.name, loser.name} {
			if err := c.Client.CoreV1().Pods("default").DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)},
				metav1.ListOptions{LabelSelector: pgv1alpha1.PodGroupLabel + "=" + name}); err != nil {
				t.Fatal(err)
			}
			if err := c.PodGroups.SchedulingV1alpha1().PodGroups("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		waitGone(t, c, "default", append(winner.pods(), loser.pods()...))
	}

	t.Run("share", func(t *testing.T) {
		runner := orderGang{queue: "a-hot", name: "runner"}
		pg := testcluster.PodGroup("default", runner.name, 1)
		pg.Labels = map[string]string{phalanxv1alpha1.QueueLabel: runner.queue}
		createGang(t, c, pg, []testcluster.PodSpec{{Name: "runner-0", PodGroup: runner.name, CPU: "100m", GPUs: 2}})
		waitBound(t, c, "default", "runner-0")
		// a-hot's gang: older and of higher priority, yet a-hot is further
		// from its share.
		step(t, orderGang{queue: "a-hot", name: "share-hot", class: "high"}, orderGang{queue: "b-cold", name: "share-cold"}, false, "share-cold")
		if err := c.Client.CoreV1().Pods("default").Delete(ctx, "runner-0", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
		waitGone(t, c, "default", []testcluster.PodSpec{{Name: "runner-0"}})
	})
	t.Run("priority", func(t *testing.T) {
		step(t, orderGang{queue: "a-hot", name: "prio-hot"}, orderGang{queue: "b-cold", name: "prio-cold", class: "high"}, false, "prio-cold")
	})
	t.Run("submission time", func(t *testing.T) {
		step(t, orderGang{queue: "b-cold", name: "age-cold"}, orderGang{queue: "a-hot", name: "age-hot"}, false, "age-cold")
	})
	t.Run("tie-break", func(t *testing.T) {
		step(t, orderGang{queue: "a-hot", name: "tie-z"}, orderGang{queue: "b-cold", name: "tie-a"}, true, "tie-a")
	})
}
