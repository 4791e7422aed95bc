package karmada

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/phalanx-sched/phalanx/internal/estimator/estimatortest"
	"github.com/phalanx-sched/phalanx/internal/estimator/karmadapb"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// decide is how long karmada-scheduler may take to decide a binding
// (its estimator timeout is 3s; a fresh process also dials every
// estimator and syncs its informers first).
const decide = 45 * time.Second

// TestKarmadaScheduler runs Karmada's real scheduler against three member
// clusters, first with Karmada's own karmada-scheduler-estimator per
// member, then with phalanx-scheduler's estimator (see doc.go).
//
// Members (nodes of 32 CPUs and 4 GPUs, grouped in InfiniBand domains):
//
//	member-a: a1 ×2, a2 ×2, a3 ×2 nodes: 24 GPUs, at most 8 in one domain
//	member-b: b1 ×3 nodes:               12 GPUs in one domain
//	member-c: c1 ×2 nodes:                8 GPUs in one domain
//
// Jobs are PyTorchJobs (a CPU master and 4-GPU workers) whose pod
// templates require one IB domain.
func TestKarmadaScheduler(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four API servers and six binaries")
	}
	began := time.Now()
	ctx := context.Background()
	l := &logs{}
	tls, err := estimatortest.WriteTLS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := startPlane(t, l, tls)
	a := startMember(t, p, "member-a", ibNodes("a", map[string]int{"a1": 2, "a2": 2, "a3": 2}))
	b := startMember(t, p, "member-b", ibNodes("b", map[string]int{"b1": 3}))
	c := startMember(t, p, "member-c", ibNodes("c", map[string]int{"c1": 2}))
	members := []*member{a, b, c}
	t.Cleanup(func() { l.dump(t) })
	for _, m := range members {
		m.waitEstimators(t, tls)
		p.registerCluster(t, m)
	}
	t.Logf("plane, aggregated apiserver and 3 members up in %v", time.Since(began).Round(time.Millisecond))
	step := func(name string, f func(t *testing.T)) {
		if !t.Run(name, f) {
			t.FailNow() // later steps build on this one's state
		}
	}
	syncAll := func(t *testing.T) {
		t.Helper()
		for _, m := range members {
			if err := p.syncClusterStatus(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
	}

	// train: master + 3 workers × 4 GPUs in one IB domain. Only member-b
	// has a domain of 12 GPUs; member-a has twice the GPUs, in domains
	// of 8. wide: master + 4 workers × 4 GPUs in one domain: no member
	// has a domain of 16 GPUs, yet member-a has 24.
	type shape struct {
		name    string
		workers int64
		// karmadaSets: what Karmada's own estimator answers per member.
		karmadaSets map[string]int32
	}
	train := shape{"train", 3, map[string]int32{"member-a": 2, "member-b": 1, "member-c": 0}}
	wide := shape{"wide", 4, map[string]int32{"member-a": 1, "member-b": 0, "member-c": 0}}

	step("karmada-estimator", func(t *testing.T) {
		// Karmada's estimator fits pods on nodes first-fit and knows no
		// topology: member-a holds 2 trains (or 1 wide), member-b 1.
		for _, m := range members {
			if err := p.pointEstimator(ctx, m.name, m.karmadaEstPort); err != nil {
				t.Fatal(err)
			}
		}
		p.startScheduler(t)
		for _, job := range []shape{train, wide} {
			p.submit(t, pytorchJob(job.name, job.workers, 4, ibLevel), nil)
			for _, m := range members {
				if sets := askEstimator(t, m.karmadaEstPort, m.name, tls, job.name, job.workers); sets != job.karmadaSets[m.name] {
					t.Fatalf("Karmada's estimator of %s: %d sets of %s, want %d", m.name, sets, job.name, job.karmadaSets[m.name])
				}
			}
			if got := p.scheduledTo(t, job.name, decide); !slices.Equal(got, []string{"member-a"}) {
				t.Fatalf("with Karmada's estimator %s went to %v, want [member-a] (most raw GPUs)", job.name, got)
			}
			t.Logf("Karmada's estimator (sets %v): %s -> member-a, where no IB domain holds it", job.karmadaSets, job.name)
			// Deleting the binding also drops karmada-scheduler's
			// assumption of it on member-a.
			p.withdraw(t, job.name)
		}
	})

	// From here on every Service points at phalanx-scheduler's estimator.
	for _, m := range members {
		m.karmadaEstimate.stop()
		if err := p.pointEstimator(ctx, m.name, m.phalanxPort); err != nil {
			t.Fatal(err)
		}
	}
	p.startScheduler(t)

	step("topology", func(t *testing.T) {
		// Case 1: phalanx answers member-a 0 sets (no domain of 12 GPUs),
		// member-b 1: Karmada sends train to member-b, where
		// phalanx-scheduler binds the whole gang in b1.
		name, workers := train.name, train.workers
		job := pytorchJob(name, workers, 4, ibLevel)
		p.submit(t, job, nil)
		if got := p.scheduledTo(t, name, decide); !slices.Equal(got, []string{"member-b"}) {
			t.Fatalf("with phalanx's estimator %s went to %v, want [member-b]", name, got)
		}
		// What karmada-scheduler was told (asked again directly: nothing
		// is bound yet, and Karmada's assumption is not sent here).
		for _, m := range members {
			want := map[string]int32{"member-a": 0, "member-b": 1, "member-c": 0}[m.name]
			if sets := askEstimator(t, m.phalanxPort, m.name, tls, name, workers); sets != want {
				t.Fatalf("phalanx's estimator of %s: %d sets of %s, want %d", m.name, sets, name, want)
			}
		}
		n := b.run(t, job)
		domains := b.waitBound(t, name, n, 60*time.Second)
		if !maps.Equal(domains, map[string]int{"b1": n}) {
			t.Fatalf("%s bound in member-b as %v, want all %d pods in b1", name, domains, n)
		}
		syncAll(t)
		t.Logf("phalanx: %s -> member-b, %d pods bound in IB domain b1", name, n)
	})

	step("fits-nowhere", func(t *testing.T) {
		// Case 2: wide fits no member's IB domain. Karmada's general
		// estimator alone would allow member-a (24 free GPUs ≥ 16); the
		// minimum with phalanx's 0 keeps it out of every member.
		name, workers := wide.name, wide.workers
		p.submit(t, pytorchJob(name, workers, 4, ibLevel), nil)
		rb := p.decision(t, name, decide)
		cond := meta.FindStatusCondition(rb.Status.Conditions, workv1alpha2.Scheduled)
		if cond.Status != metav1.ConditionFalse || len(rb.Spec.Clusters) != 0 {
			t.Fatalf("%s: Scheduled %s (%s), clusters %v; want False and no cluster", name, cond.Status, cond.Reason, targetNames(rb))
		}
		// karmada-scheduler retries a failed binding; it stays out.
		failed := "Failed scheduling ResourceBinding(" + namespace + "/" + bindingName(name) + ")"
		err := testcluster.Eventually(ctx, decide, func(context.Context) (bool, error) {
			return len(grepLog(p.scheduler.log, failed)) >= 2, nil
		})
		if err != nil {
			t.Fatalf("karmada-scheduler did not retry %s: %v", name, err)
		}
		rb = p.decision(t, name, decide)
		if len(rb.Spec.Clusters) != 0 {
			t.Fatalf("%s dispatched to %v on a retry", name, targetNames(rb))
		}
		t.Logf("%s not dispatched: Scheduled=False %s: %s", name, cond.Reason, cond.Message)
		// Withdrawn: karmada-scheduler would keep retrying it, and the
		// retry after member-c's estimator goes down (estimator-down)
		// would send it to member-a.
		p.withdraw(t, name)
	})

	step("race", func(t *testing.T) {
		// Case 3: two jobs, each master + 2 workers × 4 GPUs, for the
		// last room of member-c (one domain of 8 GPUs), submitted back to
		// back. karmada-scheduler (gate SchedulingOvercommitProtection)
		// remembers the first placement and sends it to the estimator as
		// an assumed workload when it asks for the second.
		for _, name := range []string{"race-1", "race-2"} {
			p.submit(t, pytorchJob(name, 2, 4, ibLevel), []string{"member-c"})
		}
		var winners, losers []string
		for _, name := range []string{"race-1", "race-2"} {
			rb := p.decision(t, name, decide)
			if cond := meta.FindStatusCondition(rb.Status.Conditions, workv1alpha2.Scheduled); cond.Status == metav1.ConditionTrue {
				if !slices.Equal(targetNames(rb), []string{"member-c"}) {
					t.Fatalf("%s scheduled to %v", name, targetNames(rb))
				}
				winners = append(winners, name)
			} else {
				if len(rb.Spec.Clusters) != 0 {
					t.Fatalf("%s: Scheduled False but clusters %v", name, targetNames(rb))
				}
				losers = append(losers, name)
				t.Logf("%s refused: %s: %s", name, cond.Reason, cond.Message)
			}
		}
		if len(winners) != 1 || len(losers) != 1 {
			t.Fatalf("sent to member-c: %v, refused: %v; want exactly one of each", winners, losers)
		}
		// The refusal came from phalanx deducting the assumed workload.
		if lines := grepLog(c.phalanx.Log, `"Estimated"`, "assumed=1", "copies=0"); len(lines) == 0 {
			t.Fatalf("member-c's estimator never answered 0 with an assumed workload (see %s)", c.phalanx.Log)
		}

		// The winner runs in member-c; then its binding goes (Karmada
		// drops its assumption) and phalanx still answers 0: it counts
		// the bound pods themselves.
		winner := pytorchJob(winners[0], 2, 4, ibLevel)
		n := c.run(t, winner)
		if domains := c.waitBound(t, winners[0], n, 60*time.Second); !maps.Equal(domains, map[string]int{"c1": n}) {
			t.Fatalf("%s bound in member-c as %v", winners[0], domains)
		}
		p.withdraw(t, winners[0])
		p.submit(t, pytorchJob("race-3", 2, 4, ibLevel), []string{"member-c"})
		if sets := askEstimator(t, c.phalanxPort, c.name, tls, "race-3", 2); sets != 0 {
			t.Fatalf("member-c's estimator: %d sets of race-3 with %s's pods bound, want 0", sets, winners[0])
		}
		rb := p.decision(t, "race-3", decide)
		if cond := meta.FindStatusCondition(rb.Status.Conditions, workv1alpha2.Scheduled); cond.Status != metav1.ConditionFalse || len(rb.Spec.Clusters) != 0 {
			t.Fatalf("race-3: Scheduled %s, clusters %v; want refused", cond.Status, targetNames(rb))
		}
		p.withdraw(t, losers[0])
		p.withdraw(t, "race-3")
		syncAll(t)
	})

	step("estimator-down", func(t *testing.T) {
		// Case 4: member-c's phalanx-scheduler is gone. karmada-scheduler's
		// call to it fails fast, and Karmada v1.18.2 then drops the gRPC
		// answers of every member for the binding (karmada#6815), leaving
		// its general estimator (Cluster resource summaries) alone. A job
		// of train's shape is decided well within the deadline: member-a,
		// the most free GPUs, though member-a's phalanx estimator (up)
		// answers 0 for it (no domain of 12 GPUs) and member-b is full.
		if err := c.phalanx.Stop(); err != nil {
			t.Fatal(err)
		}
		syncAll(t)
		start := time.Now()
		p.submit(t, pytorchJob("fallback", 3, 4, ibLevel), nil)
		got := p.scheduledTo(t, "fallback", 20*time.Second)
		took := time.Since(start)
		if lines := grepLog(p.scheduler.log, "gRPC request cluster(member-c) estimator error", "training/fallback"); len(lines) == 0 {
			t.Fatalf("karmada-scheduler logged no failed call to member-c's estimator for fallback (see %s)", p.scheduler.log)
		}
		if !slices.Equal(got, []string{"member-a"}) {
			t.Fatalf("fallback went to %v, want [member-a] (general estimator: most free GPUs)", got)
		}
		if sets := askEstimator(t, a.phalanxPort, a.name, tls, "fallback", 3); sets != 0 {
			t.Fatalf("member-a's phalanx estimator: %d sets of fallback, want 0 (no IB domain of 12 GPUs)", sets)
		}
		t.Logf("member-c's estimator down: fallback decided in %v -> %v by the general estimator alone; member-a's phalanx estimator answers 0 for it",
			took.Round(time.Millisecond), got)
	})
	t.Logf("wall time: %v", time.Since(began).Round(time.Millisecond))
}

// askEstimator asks the estimator on port directly, as karmada-scheduler
// would (same components, same "object" metadata, TLS with the client
// certificate, no assumed workloads), how many sets of a job fit in
// cluster.
func askEstimator(t *testing.T, port int, cluster string, tls *estimatortest.TLS, job string, workers int64) int32 {
	t.Helper()
	client, conn, err := estimatortest.Dial(hostPort(port), tls, true)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tmpl := pytorchJob(job, workers, 4, ibLevel)
	components, _, err := interpreter.GetComponents(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	req := &karmadapb.MaxAvailableComponentSetsRequest{Cluster: cluster, Namespace: namespace}
	for _, comp := range components {
		req.Components = append(req.Components, estimatortest.Component(comp.Name, comp.Replicas, comp.ReplicaRequirements.ResourceRequest, nil))
	}
	ctx, cancel := context.WithTimeout(estimatortest.WithObject(context.Background(), "PyTorchJob", namespace, job), 10*time.Second)
	defer cancel()
	resp, err := client.MaxAvailableComponentSets(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetMaxSets()
}
