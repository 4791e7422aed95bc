package integration

import (
	"context"
	"testing"
	"time"

	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

func TestSmokeInProcess(t *testing.T) {
	start := time.Now()
	c := startCluster(t, nodes("n", 2, testcluster.NodeSpec{CPU: "4", Memory: "8Gi"})...)
	t.Logf("cluster up in %v", time.Since(start))
	startScheduler(t, c)
	t.Logf("scheduler up in %v", time.Since(start))
	ctx := ctxFor(t)
	if err := c.CreatePods(ctx, testcluster.PodSpec{Name: "plain", CPU: "1"}); err != nil {
		t.Fatal(err)
	}
	err := testcluster.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		b, err := c.BoundPods(ctx, "default", "")
		return len(b) == 1, err
	})
	if err != nil {
		t.Fatalf("plain pod not bound: %v", err)
	}
	t.Logf("bound in %v", time.Since(start))
}
