package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/internal/testcluster"
	"github.com/phalanx-sched/phalanx/manifests"
)

// crashGangTimeout is the gangs' scheduleTimeoutSeconds: a gang may be partly
// bound (its binds interrupted) for at most this long, plus slack for the
// sweep interval and the API server.
const (
	crashGangTimeout = 10
	crashSlack       = 15 * time.Second
)

// TestCrashRecovery (issue #14, case 5) kills the scheduler binary with
// SIGKILL at random points — while it plans, while members wait in Permit,
// in the middle of a gang's binds — and restarts it, on exactly enough
// capacity for gangs of mixed sizes. After the last restart every gang must
// be bound whole, and no gang may stay partly bound for longer than its
// timeout at any time. PHALANX_CRASH_SEEDS sets how many seeds run (make test
// runs a few; make stress runs many).
func TestCrashRecovery(t *testing.T) {
	seeds := 2
	if s := os.Getenv("PHALANX_CRASH_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("PHALANX_CRASH_SEEDS=%q: want a positive number", s)
		}
		seeds = n
	}
	first := 1
	if s := os.Getenv("PHALANX_CRASH_FIRST_SEED"); s != "" {
		first, _ = strconv.Atoi(s)
	}
	for seed := first; seed < first+seeds; seed++ {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) { crashSeed(t, uint64(seed)) })
	}
}

func crashSeed(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	const capacity = 48
	c := startCluster(t, nodes("n", capacity, testcluster.NodeSpec{CPU: "4", Memory: "16Gi", GPUs: 1})...)
	ctx := ctxFor(t)

	// Gangs of 2 to 8 members that fill the cluster exactly.
	sizes := map[string]int{}
	var order []string
	for left, i := capacity, 0; left > 0; i++ {
		n := min(left, 2+rng.IntN(7))
		if left-n == 1 {
			n++
		}
		name := fmt.Sprintf("g-%d", i)
		sizes[name], order = n, append(order, name)
		left -= n
	}
	var logs []string
	start := func() *testcluster.Scheduler {
		s, err := c.StartSchedulerBinary(schedulerBinary, manifests.SchedulerConfig, "--v=3")
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, s.Log)
		return s
	}
	sched := start()

	// Watch every gang: none may stay partly bound past its timeout.
	var mu sync.Mutex
	var violation string
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() {
		partialSince := map[string]time.Time{}
		for watchCtx.Err() == nil {
			for name, size := range sizes {
				n, err := boundCount(watchCtx, c, "default", name)
				if err != nil {
					continue
				}
				switch {
				case n == 0 || n >= size:
					delete(partialSince, name)
				case partialSince[name].IsZero():
					partialSince[name] = time.Now()
				case time.Since(partialSince[name]) > crashGangTimeout*time.Second+crashSlack:
					mu.Lock()
					if violation == "" {
						violation = fmt.Sprintf("gang %s stayed partly bound (%d of %d) for %v", name, n, size, time.Since(partialSince[name]).Round(time.Second))
					}
					mu.Unlock()
				}
			}
			select {
			case <-watchCtx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()

	for _, name := range order {
		pg := testcluster.PodGroup("default", name, int32(sizes[name]))
		pg.Spec.ScheduleTimeoutSeconds = ptr.To[int32](crashGangTimeout)
		createGang(t, c, pg, gangPods("default", name, sizes[name], testcluster.PodSpec{CPU: "1", GPUs: 1}))
	}
	// Kill points: the moment a random number of members is bound — while
	// gangs plan, wait in Permit and bind — seen through a watch, or a
	// random moment after start (planning, before any bind).
	bound := countBinds(t, c, "default", "")
	boundNow := func() int { return int(bound.Load()) }
	kills := 1 + rng.IntN(3)
	for k := 0; k < kills && boundNow() < capacity; k++ {
		at := boundNow() + 1 + rng.IntN(capacity-boundNow())
		if rng.IntN(4) == 0 {
			time.Sleep(time.Duration(500+rng.IntN(1500)) * time.Millisecond)
		} else {
			deadline := time.Now().Add(30 * time.Second)
			for boundNow() < at && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
		}
		sched.Kill()
		t.Logf("kill %d of %d (aimed at %d bound): %d of %d members bound", k+1, kills, at, boundNow(), capacity)
		sched = start()
	}
	err := testcluster.Eventually(ctx, 150*time.Second, func(ctx context.Context) (bool, error) {
		total := 0
		for name := range sizes {
			n, err := boundCount(ctx, c, "default", name)
			if err != nil {
				return false, err
			}
			total += n
		}
		return total == capacity, nil
	})
	mu.Lock()
	defer mu.Unlock()
	if violation != "" {
		t.Error(violation)
	}
	if err != nil {
		for _, name := range order {
			n, _ := boundCount(ctx, c, "default", name)
			t.Logf("gang %s: %d of %d bound", name, n, sizes[name])
		}
		if pods, err := c.BoundPods(ctx, "default", ""); err == nil {
			perNode := map[string][]string{}
			for _, p := range pods {
				perNode[p.Spec.NodeName] = append(perNode[p.Spec.NodeName], p.Name)
			}
			for node, names := range perNode {
				if len(names) > 1 {
					t.Logf("node %s holds %v: a bind landed after the scheduler that sent it died", node, names)
				}
			}
		}
		sched.DumpAndStop()
		for i, path := range logs {
			log, rerr := os.ReadFile(path)
			if rerr != nil || len(log) == 0 {
				continue
			}
			if dir := os.Getenv("PHALANX_CRASH_LOGDIR"); dir != "" {
				name := fmt.Sprintf("%s/seed-%d-run-%d.log", dir, seed, i)
				if werr := os.WriteFile(name, log, 0o644); werr == nil {
					t.Logf("scheduler log of run %d saved to %s", i, name)
				}
			}
			if i == len(logs)-1 {
				t.Logf("last scheduler log (tail, goroutines at the end):\n%s", tail(string(log), 8000))
			}
		}
		t.Fatalf("after %d kills not every gang was bound whole: %v", kills, err)
	}
	gangIntact(t, c, sizes)
}

// TestStaleNominations (issue #14, case 5): a scheduler killed while members
// waited in Permit leaves their nominatedNodeName behind. Its successor must
// not count those nominations as taken room: here they name the only free
// nodes, where the gang's own missing members must go.
func TestStaleNominations(t *testing.T) {
	c := startCluster(t, nodes("n", 4, testcluster.NodeSpec{CPU: "4", Memory: "16Gi", GPUs: 1})...)
	ctx := ctxFor(t)
	createGang(t, c, testcluster.PodGroup("default", "a", 4), gangPods("default", "a", 4, testcluster.PodSpec{CPU: "1", GPUs: 1}))
	// What the dead scheduler left: two members bound, two nominated to the
	// nodes they were reserved on.
	for i, node := range []string{"n-0", "n-1"} {
		b := &v1.Binding{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("a-%d", i)}, Target: v1.ObjectReference{Kind: "Node", Name: node}}
		if err := c.Client.CoreV1().Pods("default").Bind(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i, node := range map[int]string{2: "n-2", 3: "n-3"} {
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, fmt.Sprintf("a-%d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Status.NominatedNodeName = node
		if _, err := c.Client.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.StartSchedulerBinary(schedulerBinary, manifests.SchedulerConfig); err != nil {
		t.Fatal(err)
	}
	// Well within the gang's timeout: nothing needs to time out first.
	err := testcluster.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		n, err := boundCount(ctx, c, "default", "a")
		return n == 4, err
	})
	if err != nil {
		t.Fatalf("the gang was not completed on the nodes its stale nominations named: %v", err)
	}
}

// countBinds counts, through a watch, the pods of selector in ns seen bound
// (each once), until the test ends.
func countBinds(t *testing.T, c *testcluster.Cluster, ns, selector string) *atomic.Int64 {
	t.Helper()
	w, err := c.Client.CoreV1().Pods(ns).Watch(ctxFor(t), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	var bound atomic.Int64
	go func() {
		seen := map[string]bool{}
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*v1.Pod); ok && p.Spec.NodeName != "" && !seen[p.Name] {
				seen[p.Name] = true
				bound.Add(1)
			}
		}
	}()
	return &bound
}
