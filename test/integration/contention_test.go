package integration

import (
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// TestGangContention: 8 gangs × 4 pods × 1 GPU compete for 16 GPUs, created
// in a random order; a gang that starts is deleted (it "finished") to free
// room. Every gang must eventually run, none may ever stay partially bound,
// and nothing may deadlock. Repeated over seeds (PHALANX_CONTENTION_SEEDS).
func TestGangContention(t *testing.T) {
	seeds := 10
	if s, err := strconv.Atoi(os.Getenv("PHALANX_CONTENTION_SEEDS")); err == nil && s > 0 {
		seeds = s
	}
	c := startCluster(t, nodes("gpu", 4, testcluster.NodeSpec{CPU: "32", Memory: "128Gi", GPUs: 4, NRTPolicy: "none"})...)
	startScheduler(t, c)
	for seed := int64(1); seed <= int64(seeds); seed++ {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			runContention(t, c, seed)
		})
	}
}

func runContention(t *testing.T, c *testcluster.Cluster, seed int64) {
	const gangs, size = 8, 4
	ctx := ctxFor(t)
	rng := rand.New(rand.NewSource(seed))
	ns := fmt.Sprintf("contention-%d", seed)
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Every object of every gang, in a random order: pods may come before
	// their PodGroup, and gangs interleave.
	type item struct {
		gang, member int // member -1: the PodGroup
	}
	var items []item
	for g := 0; g < gangs; g++ {
		items = append(items, item{g, -1})
		for m := 0; m < size; m++ {
			items = append(items, item{g, m})
		}
	}
	rng.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
	for _, it := range items {
		name := fmt.Sprintf("g%d", it.gang)
		if it.member < 0 {
			pg := testcluster.PodGroup(ns, name, size)
			pg.Spec.ScheduleTimeoutSeconds = ptr.To[int32](30)
			if err := c.CreatePodGroup(ctx, pg); err != nil {
				t.Fatal(err)
			}
		} else if err := c.CreatePods(ctx, testcluster.PodSpec{
			Name: fmt.Sprintf("%s-%d", name, it.member), Namespace: ns, PodGroup: name, CPU: "1", GPUs: 1,
		}); err != nil {
			t.Fatal(err)
		}
		if rng.Intn(3) == 0 {
			time.Sleep(time.Duration(rng.Intn(30)) * time.Millisecond) // jitter the arrival order, not an assertion
		}
	}

	finished := map[string]bool{}
	partialSince := map[string]time.Time{}
	deadline := time.Now().Add(3 * time.Minute)
	for len(finished) < gangs {
		if time.Now().After(deadline) {
			t.Errorf("seed %d: only %d of %d gangs ran before the deadline: deadlock or starvation", seed, len(finished), gangs)
			for g := 0; g < gangs; g++ {
				if cond, err := scheduledCondition(ctx, c, ns, fmt.Sprintf("g%d", g)); err == nil && cond != nil {
					t.Logf("g%d: %s: %s", g, cond.Reason, cond.Message)
				}
			}
			dumpPods(t, c, ns)
			t.FailNow()
		}
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		bound := map[string]int{}
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound[p.Labels[pgv1alpha1.PodGroupLabel]]++
			}
		}
		for g := 0; g < gangs; g++ {
			name := fmt.Sprintf("g%d", g)
			if finished[name] {
				continue
			}
			switch n := bound[name]; {
			case n == size:
				// The gang runs; it "finishes" and frees its GPUs.
				finished[name] = true
				delete(partialSince, name)
				if err := c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)},
					metav1.ListOptions{LabelSelector: pgv1alpha1.PodGroupLabel + "=" + name}); err != nil {
					t.Fatal(err)
				}
			case n > 0:
				// The binds of one Permit land one by one; a gang may look
				// partial for an instant, never for long.
				if since, ok := partialSince[name]; !ok {
					partialSince[name] = time.Now()
				} else if time.Since(since) > 10*time.Second {
					t.Fatalf("seed %d: gang %s stayed partially bound (%d of %d) for %v", seed, name, n, size, time.Since(since))
				}
			default:
				delete(partialSince, name)
			}
		}
		if err := ctx.Err(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}
}
