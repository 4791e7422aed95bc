package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/internal/testcluster"
	"github.com/phalanx-sched/phalanx/manifests"
)

// draTemplate creates the namespace and a claim template of one device.
func draTemplate(t *testing.T, c *testcluster.Cluster, ns, driver string) {
	t.Helper()
	ctx := ctxFor(t)
	_, _ = c.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "gpu", Namespace: ns},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: claimSpec(driver, 1, "")}}
	if _, err := c.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// draGang creates a gang of size members, each with a claim from the
// namespace's template.
func draGang(t *testing.T, c *testcluster.Cluster, ns, driver, name string, size int, timeoutSeconds int32) {
	t.Helper()
	var pods []*v1.Pod
	for i := range size {
		pods = append(pods, withClaim(draPod(ns, name, driver, i, "1"), "", "gpu"))
	}
	ctx := ctxFor(t)
	pg := testcluster.PodGroup(ns, name, int32(size))
	if timeoutSeconds > 0 {
		pg.Spec.ScheduleTimeoutSeconds = ptr.To(timeoutSeconds)
	}
	if err := c.CreatePodGroup(ctx, pg); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// claimsOfLiveGangs fails the test when an allocated claim of ns is not
// reserved for a bound pod that still exists.
func claimsOfLiveGangs(t *testing.T, ctx context.Context, c *testcluster.Cluster, ns string) {
	t.Helper()
	claims, err := c.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bound := map[string]bool{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			bound[string(p.UID)] = true
		}
	}
	for _, cl := range claims.Items {
		if cl.Status.Allocation == nil {
			continue
		}
		for _, r := range cl.Status.ReservedFor {
			if !bound[string(r.UID)] {
				t.Fatalf("claim %s stays allocated for pod %s, which is not bound", cl.Name, r.Name)
			}
		}
		if len(cl.Status.ReservedFor) == 0 {
			t.Fatalf("claim %s stays allocated for no pod", cl.Name)
		}
	}
}

// draChurn (a subtest of TestDRAGangs): 32 random DRA gangs of 1 to 6
// members arrive on 4 nodes × 8 devices while running gangs finish and
// leave. Checked throughout: no device is ever allocated to two claims;
// at the end every gang ran whole and no claim stays allocated.
func draChurn(t *testing.T, c *testcluster.Cluster) {
	const driver, ns, gangs = "i.example.com", "dra-i", 32
	draSetup(t, c, driver, "",
		draNode{name: "i-0", cpu: "64", devices: 8}, draNode{name: "i-1", cpu: "32", devices: 8},
		draNode{name: "i-2", cpu: "16", devices: 8}, draNode{name: "i-3", cpu: "64", devices: 8})
	draTemplate(t, c, ns, driver)
	rng := rand.New(rand.NewPCG(18, 32))
	ctx := ctxFor(t)
	sizes := map[string]int{}
	created, finished := 0, map[string]bool{}
	nextArrival := time.Now()
	deadline := time.Now().Add(4 * time.Minute)
	for len(finished) < gangs {
		if time.Now().After(deadline) {
			for name, size := range sizes {
				n, _ := boundCount(ctx, c, ns, name)
				t.Logf("gang %s: %d of %d bound, finished %v", name, n, size, finished[name])
			}
			t.Fatalf("only %d of %d gangs ran", len(finished), gangs)
		}
		if created < gangs && time.Now().After(nextArrival) {
			name := fmt.Sprintf("g-%d", created)
			sizes[name] = 1 + rng.IntN(6)
			draGang(t, c, ns, driver, name, sizes[name], 0)
			created++
			nextArrival = time.Now().Add(time.Duration(rng.IntN(400)) * time.Millisecond)
		}
		allocatedDevices(t, ctx, c)
		// Whole gangs run a little, then finish and leave.
		for name, size := range sizes {
			if finished[name] {
				continue
			}
			n, err := boundCount(ctx, c, ns, name)
			if err != nil {
				t.Fatal(err)
			}
			if n < size || rng.IntN(3) != 0 {
				continue
			}
			if err := c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)},
				metav1.ListOptions{LabelSelector: "scheduling.x-k8s.io/pod-group=" + name}); err != nil {
				t.Fatal(err)
			}
			finished[name] = true
		}
		time.Sleep(100 * time.Millisecond) // pacing of arrivals, not an assertion
	}
	// Every claim is freed once its pods are gone (the resourceclaim
	// controller deletes claims made from templates).
	err := testcluster.Eventually(ctx, 60*time.Second, func(ctx context.Context) (bool, error) {
		claims, err := c.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, cl := range claims.Items {
			if cl.Status.Allocation != nil {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("claims stay allocated after their gangs left: %v", err)
	}
}

// TestDRACrashRecovery kills the scheduler binary (kill -9) while DRA gangs
// bind — some claims allocated in PreBind, some pods bound — and restarts
// it: every gang binds whole, no device is allocated twice, and every
// allocated claim belongs to a bound pod.
func TestDRACrashRecovery(t *testing.T) {
	const driver, ns = "k.example.com", "dra-k"
	c := startCluster(t)
	if err := c.StartResourceClaimController(); err != nil {
		t.Fatal(err)
	}
	var nodesWanted []draNode
	for i := range 12 {
		nodesWanted = append(nodesWanted, draNode{name: fmt.Sprintf("k-%d", i), cpu: "16", devices: 2})
	}
	draSetup(t, c, driver, "", nodesWanted...)
	draTemplate(t, c, ns, driver)
	start := func() *testcluster.Scheduler {
		s, err := c.StartSchedulerBinary(schedulerBinary, manifests.SchedulerConfig, "--v=3")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ctx := ctxFor(t)
	// 24 devices, gangs of 8, 6, 6 and 4, created before the scheduler
	// starts; it is killed as soon as the first claim is allocated (the
	// DynamicResources plugin's PreBind): members are mid-bind.
	sizes := map[string]int{"g-0": 8, "g-1": 6, "g-2": 6, "g-3": 4}
	for _, name := range []string{"g-0", "g-1", "g-2", "g-3"} {
		draGang(t, c, ns, driver, name, sizes[name], crashGangTimeout)
	}
	var allocated atomic.Int64
	w, err := c.Client.ResourceV1().ResourceClaims(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	go func() {
		for ev := range w.ResultChan() {
			if cl, ok := ev.Object.(*resourceapi.ResourceClaim); ok && cl.Status.Allocation != nil {
				allocated.Add(1)
			}
		}
	}()
	sched := start()
	if err := testcluster.Eventually(ctx, 60*time.Second, func(context.Context) (bool, error) { return allocated.Load() > 0, nil }); err != nil {
		t.Fatal("no claim was ever allocated")
	}
	sched.Kill()
	bound, err := c.BoundPods(ctx, ns, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killed after the first claim allocation: %d of 24 members bound", len(bound))
	sched = start()
	defer sched.DumpAndStop()
	err = testcluster.Eventually(ctx, 150*time.Second, func(ctx context.Context) (bool, error) {
		total := 0
		for name := range sizes {
			n, err := boundCount(ctx, c, ns, name)
			if err != nil {
				return false, err
			}
			total += n
		}
		return total == 24, nil
	})
	if err != nil {
		for name, size := range sizes {
			n, _ := boundCount(ctx, c, ns, name)
			cond, _ := scheduledCondition(ctx, c, ns, name)
			t.Logf("gang %s: %d of %d bound; condition %+v", name, n, size, cond)
		}
		dumpPods(t, c, ns)
		if claims, err := c.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{}); err == nil {
			for _, cl := range claims.Items {
				t.Logf("claim %s allocated=%v reservedFor=%v", cl.Name, cl.Status.Allocation != nil, cl.Status.ReservedFor)
			}
		}
		t.Fatalf("after kill -9 not every DRA gang was bound whole: %v", err)
	}
	allocatedDevices(t, ctx, c)
	waitClaimsAllocated(t, c, ns, 24)
	claimsOfLiveGangs(t, ctx, c, ns)
}
