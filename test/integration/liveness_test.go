package integration

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
	"github.com/phalanx-sched/phalanx/manifests"
)

// gpuNodes returns n nodes with the given GPUs and 32 CPUs, publishing no
// NodeResourceTopology: a plain GPU cluster (kubelet policy none).
func gpuNodes(prefix string, n int, gpus int64) []testcluster.NodeSpec {
	return nodes(prefix, n, testcluster.NodeSpec{CPU: "32", Memory: "256Gi", GPUs: gpus})
}

// gpuGang creates a gang of n members with one GPU (and one CPU) each.
func gpuGang(t *testing.T, c *testcluster.Cluster, name string, n int, mutate func(*pgv1alpha1.PodGroup, *testcluster.PodSpec)) {
	t.Helper()
	pg := testcluster.PodGroup("default", name, int32(n))
	spec := testcluster.PodSpec{CPU: "1", GPUs: 1}
	if mutate != nil {
		mutate(pg, &spec)
	}
	createGang(t, c, pg, gangPods("default", name, n, spec))
}

// TestGPUGangWithoutNRT (issue #14, case 1): GPU pods need no NUMA
// alignment check on nodes that publish no NodeResourceTopology — the
// kubelet's default Topology Manager policy is none — so a plain GPU gang binds
// whole with the canonical profile. A node labelled as enforcing
// single-numa-node still gets none of them, and says so once.
func TestGPUGangWithoutNRT(t *testing.T) {
	strict := testcluster.NodeSpec{Name: "strict", CPU: "32", Memory: "256Gi", GPUs: 8,
		Labels: map[string]string{phalanxv1alpha1.TopologyManagerPolicyLabel: "single-numa-node"}}
	c := startCluster(t, append(gpuNodes("gpu", 8, 8), strict)...)
	startScheduler(t, c)
	gpuGang(t, c, "train", 64, nil)
	waitBoundCount(t, c, "default", "train", 64)
	pods, err := c.BoundPods(ctxFor(t), "default", pgv1alpha1.PodGroupLabel+"=train")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Spec.NodeName == "strict" {
			t.Fatalf("member %s bound to a node that enforces alignment without publishing zones", p.Name)
		}
	}
	// The labelled node says why it takes no aligned pods — once, not once
	// per pod (64 members were filtered there).
	var notes []v1.Event
	err = testcluster.Eventually(ctxFor(t), 30*time.Second, func(ctx context.Context) (bool, error) {
		events, err := c.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=strict"})
		if err != nil {
			return false, err
		}
		notes = notes[:0]
		for _, e := range events.Items {
			if e.Reason == "NoNUMATopology" {
				notes = append(notes, e)
			}
		}
		return len(notes) > 0, nil
	})
	if err != nil {
		t.Fatalf("no NoNUMATopology event on the labelled node: %v", err)
	}
	if len(notes) != 1 || notes[0].Count > 1 || (notes[0].Series != nil && notes[0].Series.Count > 1) {
		t.Fatalf("the node said it %d times (first: %+v), want once", len(notes), notes[0])
	}
}

// pendingSmall counts the stream's pods that wait for a node.
func pendingSmall(ctx context.Context, c *testcluster.Cluster) (int, error) {
	pods, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, "small-") && p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n, nil
}

// TestBigGangNotStarved (issue #14, case 2): small 4-GPU gangs that arrive
// every 100 ms (while fewer than 16 of their pods wait) and run 15 s keep
// most of 64 single-GPU nodes busy; a 56-GPU
// gang of the same queue and priority would never find 56 free GPUs by
// chance. After reservationAfterSeconds it reserves the nodes it needs,
// the small gangs only backfill around it, and it starts — while the stream
// goes on. reservationAfterSeconds is 3 here (30 in the canonical config):
// a loaded machine's stream once fell behind for the 16 s it took 56 GPUs
// to come free, and the gang started without needing its reservation; in 3 s
// at most a fifth of the 15-second pods end.
func TestBigGangNotStarved(t *testing.T) {
	c := startCluster(t, nodes("n", 64, testcluster.NodeSpec{CPU: "4", Memory: "16Gi", GPUs: 1})...)
	if err := c.StartKwok(); err != nil {
		t.Fatal(err)
	}
	config := bytes.Replace(manifests.SchedulerConfig, []byte("reservationAfterSeconds: 30"), []byte("reservationAfterSeconds: 3"), 1)
	if bytes.Equal(config, manifests.SchedulerConfig) {
		t.Fatal("the canonical config no longer sets reservationAfterSeconds: 30: shorten it another way")
	}
	if _, err := c.StartScheduler(config); err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	streamCtx, stopStream := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// 15 s runs free about 4 GPUs a second: even a loaded machine's
		// stream (and scheduler) refills them faster, so 56 never come
		// free by chance (with 5 s runs, 13 a second, they once did).
		small := testcluster.PodSpec{CPU: "1", GPUs: 1, Annotations: map[string]string{testcluster.RunForAnnotation: "15s"}}
		for i := 0; streamCtx.Err() == nil; i++ {
			// Keep a backlog of small gangs waiting, however fast the
			// machine schedules and runs them: freed GPUs are always
			// wanted, so the big gang never finds 56 free by chance.
			if waiting, err := pendingSmall(streamCtx, c); err != nil || waiting >= 16 {
				i--
				select {
				case <-streamCtx.Done():
				case <-time.After(100 * time.Millisecond):
				}
				continue
			}
			name := fmt.Sprintf("small-%d", i)
			pods := gangPods("default", name, 4, small)
			if err := c.CreatePodGroup(streamCtx, testcluster.PodGroup("default", name, 4)); err != nil {
				return
			}
			if err := c.CreatePods(streamCtx, pods...); err != nil {
				return
			}
			// Paced, but faster than the 4.3 pods/s that 64 fifteen-second
			// GPUs free up: the backlog bound above keeps it in check.
			select {
			case <-streamCtx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	defer func() { stopStream(); wg.Wait() }()

	// Once the stream keeps most GPUs busy, submit the big gang.
	err := testcluster.Eventually(ctx, 60*time.Second, func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		busy, done := 0, 0
		for _, p := range pods.Items {
			switch {
			case p.Status.Phase == v1.PodSucceeded:
				done++
			case p.Spec.NodeName != "":
				busy++
			}
		}
		return busy >= 40 && done >= 40, nil
	})
	if err != nil {
		t.Fatalf("the stream of small gangs did not get going: %v", err)
	}
	start := time.Now()
	gpuGang(t, c, "big", 56, func(_ *pgv1alpha1.PodGroup, s *testcluster.PodSpec) { s.CPU = "1" })
	defer func() {
		if t.Failed() {
			raw, err := c.PodGroups.SchedulingV1alpha1().RESTClient().Get().Namespace("default").Resource("podgroups").Name("big").DoRaw(context.Background())
			t.Logf("PodGroup big: %s (err %v)", raw, err)
			events, _ := c.Client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
			for _, e := range events.Items {
				if strings.HasPrefix(e.InvolvedObject.Name, "big") {
					t.Logf("event %s/%s %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
				}
			}
		}
	}()
	waitCondition(t, c, "default", "big", "Reserving", "reserving", "still in use")
	err = testcluster.Eventually(ctx, 120*time.Second, func(ctx context.Context) (bool, error) {
		n, err := boundCount(ctx, c, "default", "big")
		if n != 0 && n != 56 {
			t.Logf("big gang: %d of 56 bound (binding)", n)
		}
		return n == 56, err
	})
	if err != nil {
		t.Fatalf("the big gang did not start within 120s of its arrival while small gangs streamed: %v", err)
	}
	t.Logf("big gang started %v after arrival", time.Since(start).Round(time.Second))
	if streamCtx.Err() != nil {
		t.Fatal("the stream stopped before the big gang started: the test proves nothing")
	}
}

func createPriorityClass(t *testing.T, c *testcluster.Cluster, name string, value int32, never bool) {
	t.Helper()
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
	if never {
		pc.PreemptionPolicy = ptr.To(v1.PreemptNever)
	}
	if _, err := c.Client.SchedulingV1().PriorityClasses().Create(ctxFor(t), pc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// gangIntact fails unless every gang has none or all of its members bound.
func gangIntact(t *testing.T, c *testcluster.Cluster, sizes map[string]int) map[string]int {
	t.Helper()
	out := map[string]int{}
	for name, size := range sizes {
		n, err := boundCount(ctxFor(t), c, "default", name)
		if err != nil {
			t.Fatal(err)
		}
		if n != 0 && n != size {
			t.Fatalf("gang %s left with %d of %d members bound", name, n, size)
		}
		out[name] = n
	}
	return out
}

// TestGangPriorityPreemption (issue #14, case 4): a high-priority gang that
// cannot be placed preempts whole lower-priority gangs — the fewest that let
// it fit (one 4-gang rather than two 2-gangs) — and a PriorityClass with
// preemptionPolicy Never preempts nothing.
func TestGangPriorityPreemption(t *testing.T) {
	c := startCluster(t, gpuNodes("n", 2, 4)...)
	createPriorityClass(t, c, "low", 100, false)
	createPriorityClass(t, c, "high", 1000, false)
	createPriorityClass(t, c, "high-never", 1000, true)
	startScheduler(t, c)
	low := func(_ *pgv1alpha1.PodGroup, s *testcluster.PodSpec) { s.PriorityClassName = "low" }
	gpuGang(t, c, "low-2a", 2, low)
	gpuGang(t, c, "low-2b", 2, low)
	gpuGang(t, c, "low-4", 4, low)
	sizes := map[string]int{"low-2a": 2, "low-2b": 2, "low-4": 4}
	for name, n := range sizes {
		waitBoundCount(t, c, "default", name, n)
	}

	// preemptionPolicy Never: the gang waits and evicts nothing.
	gpuGang(t, c, "never", 4, func(_ *pgv1alpha1.PodGroup, s *testcluster.PodSpec) { s.PriorityClassName = "high-never" })
	waitCondition(t, c, "default", "never", "Unschedulable")
	if got := gangIntact(t, c, sizes); fmt.Sprint(got) != fmt.Sprint(sizes) {
		t.Fatalf("a preemptionPolicy Never gang evicted pods: bound %v", got)
	}
	deleteGang(t, c, "never")

	gpuGang(t, c, "high", 4, func(_ *pgv1alpha1.PodGroup, s *testcluster.PodSpec) { s.PriorityClassName = "high" })
	waitBoundCount(t, c, "default", "high", 4)
	got := gangIntact(t, c, sizes)
	if got["low-4"] != 0 || got["low-2a"] != 2 || got["low-2b"] != 2 {
		t.Fatalf("victims: bound %v, want only low-4 evicted (one victim, not two)", got)
	}
	cond := waitCondition(t, c, "default", "low-4", "Preempted", "gang default/high")
	t.Logf("victim's condition: %s", cond.Message)
}

func deleteGang(t *testing.T, c *testcluster.Cluster, name string) {
	t.Helper()
	ctx := ctxFor(t)
	if err := c.Client.CoreV1().Pods("default").DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: pgv1alpha1.PodGroupLabel + "=" + name}); err != nil {
		t.Fatal(err)
	}
	if err := c.PodGroups.SchedulingV1alpha1().PodGroups("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestGangReclaimGPU (issue #14, case 3): the cluster is short of GPUs with
// CPUs to spare, so queue-b is above its deserved share in GPUs only. Queue-a
// reclaims whole gangs of queue-b up to its deserved share: half the GPUs
// with equal weights, three quarters with weights 3:1.
func TestGangReclaimGPU(t *testing.T) {
	for _, tc := range []struct {
		name           string
		weightA        int32
		bGangs, bSize  int
		aSize          int
		wantA, wantB   int
		evictedAtLeast int
	}{
		{name: "equal weights", weightA: 1, bGangs: 2, bSize: 4, aSize: 4, wantA: 4, wantB: 4},
		{name: "weights 3:1", weightA: 3, bGangs: 4, bSize: 2, aSize: 6, wantA: 6, wantB: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startCluster(t, gpuNodes("n", 2, 4)...)
			createQueue(t, c, queue("queue-a", tc.weightA))
			createQueue(t, c, queue("queue-b", 1))
			startScheduler(t, c)
			inQueue := func(q string) func(*pgv1alpha1.PodGroup, *testcluster.PodSpec) {
				return func(pg *pgv1alpha1.PodGroup, s *testcluster.PodSpec) {
					pg.Labels = map[string]string{phalanxv1alpha1.QueueLabel: q}
					s.Labels = map[string]string{"job-queue": q}
				}
			}
			sizes := map[string]int{}
			for i := 0; i < tc.bGangs; i++ {
				name := fmt.Sprintf("b-%d", i)
				gpuGang(t, c, name, tc.bSize, inQueue("queue-b"))
				sizes[name] = tc.bSize
			}
			waitQueueCounts(t, c, map[string]int{"queue-b": tc.bGangs * tc.bSize})
			gpuGang(t, c, "a-0", tc.aSize, inQueue("queue-a"))
			// The victims have run less than minRuntimeSeconds (15 s): reclaim
			// waits for it, then takes whole gangs.
			waitQueueCountsWithin(t, c, map[string]int{"queue-a": tc.wantA, "queue-b": tc.wantB}, 90*time.Second)
			gangIntact(t, c, sizes)
			var reclaimed []string
			for name := range sizes {
				cond, err := scheduledCondition(ctxFor(t), c, "default", name)
				if err == nil && cond != nil && cond.Reason == "Reclaimed" {
					if !strings.Contains(cond.Message, "queue queue-a is below its deserved share") {
						t.Errorf("victim %s condition %q does not say who reclaimed it and why", name, cond.Message)
					}
					reclaimed = append(reclaimed, name)
				}
			}
			if len(reclaimed) == 0 {
				t.Fatal("no victim PodGroup says it was reclaimed")
			}
		})
	}
}

// waitQueueCountsWithin is waitQueueCounts with a deadline of its own.
func waitQueueCountsWithin(t *testing.T, c *testcluster.Cluster, want map[string]int, within time.Duration) {
	t.Helper()
	got := map[string]int{}
	err := testcluster.Eventually(ctxFor(t), within, func(ctx context.Context) (bool, error) {
		for q := range want {
			n, err := boundInQueue(ctx, c, q)
			if err != nil {
				return false, err
			}
			got[q] = n
		}
		return fmt.Sprint(got) == fmt.Sprint(want), nil
	})
	if err != nil {
		t.Errorf("bound per queue %v, want %v: %v", got, want, err)
		dumpPods(t, c, "default")
		t.FailNow()
	}
}

// TestBackfillOnRunTimeLimits: gang "big" (3 × 4 CPU, the whole of the
// three nodes) reserves them after 1 s: node n-0 runs a pod with a one-hour
// activeDeadlineSeconds, so the room is free within the hour at the
// latest, and big's condition says when it expects to start. A pod of the
// same priority without a limit or estimate may not take n-1 or n-2 (it is
// told the room is held); one whose own limit ends before that hour does,
// and so does one whose expected-runtime annotation does (backfill): they
// cannot delay the big gang.
func TestBackfillOnRunTimeLimits(t *testing.T) {
	c := startCluster(t, nodes("n", 3, testcluster.NodeSpec{CPU: "4", Memory: "16Gi"})...)
	config := bytes.Replace(manifests.SchedulerConfig, []byte("reservationAfterSeconds: 30"), []byte("reservationAfterSeconds: 1"), 1)
	if bytes.Equal(config, manifests.SchedulerConfig) {
		t.Fatal("the canonical config no longer sets reservationAfterSeconds: 30: shorten it another way")
	}
	if _, err := c.StartScheduler(config); err != nil {
		t.Fatal(err)
	}
	if err := c.StartController(); err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	create := func(name string, limit int64, runtime string) {
		t.Helper()
		p := testcluster.PodSpec{Name: name, CPU: "4"}.Pod()
		if limit > 0 {
			p.Spec.ActiveDeadlineSeconds = &limit
		}
		if runtime != "" {
			p.Annotations = map[string]string{phalanxv1alpha1.ExpectedRuntimeAnnotation: runtime}
		}
		if _, err := c.Client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("running", 3600, "")
	waitBound(t, c, "default", "running")
	running, err := c.Client.CoreV1().Pods("default").Get(ctx, "running", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// big's expected start is the running pod's limit from when it was
	// bound (condition times are whole seconds, as the scheduler reads them).
	var bound time.Time
	for _, cond := range running.Status.Conditions {
		if cond.Type == v1.PodScheduled {
			bound = cond.LastTransitionTime.Time
		}
	}
	createGang(t, c, testcluster.PodGroup("default", "big", 3), gangPods("default", "big", 3, testcluster.PodSpec{CPU: "4"}))
	startBy := bound.Add(time.Hour).UTC()
	waitCondition(t, c, "default", "big", "Reserving", "expected to start by "+startBy.Format(time.RFC3339))
	// The scheduler publishes it on the PodGroup; phalanx-controller puts
	// it in big's QueuePositions entry (what kubectl phalanx jobs shows).
	var got *metav1.Time
	err = testcluster.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		qp, err := c.Phalanx.SchedulingV1alpha1().QueuePositionses("default").Get(ctx, phalanxv1alpha1.QueuePositionsName, metav1.GetOptions{})
		if err != nil {
			return false, nil // not written yet
		}
		for _, g := range qp.Gangs {
			if g.Name == "big" {
				got = g.ExpectedStart
			}
		}
		return got != nil && got.Time.Equal(startBy), nil
	})
	if err != nil {
		t.Fatalf("big's QueuePositions expectedStart %v, want %v: %v", got, startBy, err)
	}

	create("unlimited", 0, "")
	err = testcluster.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		events, err := c.Client.EventsV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Regarding.Name == "unlimited" && e.Reason == "FailedScheduling" && strings.Contains(e.Note, "held for a planned or reserved gang") {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the pod without a limit was never told the room is held: %v", err)
	}
	create("short", 600, "")
	waitBound(t, c, "default", "short")
	create("estimated", 0, "20m")
	waitBound(t, c, "default", "estimated")
	if p, err := c.Client.CoreV1().Pods("default").Get(ctx, "unlimited", metav1.GetOptions{}); err != nil || p.Spec.NodeName != "" {
		t.Errorf("the pod without a limit was bound (%v) beside the backfilled ones", err)
	}
	if bound, err := c.BoundPods(ctx, "default", pgv1alpha1.PodGroupLabel+"=big"); err != nil || len(bound) != 0 {
		t.Errorf("big bound %d pods (%v)", len(bound), err)
	}
}
