package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// APIServerFlags are the API server's flags for the workload: the upstream
// gates and the scheduling.k8s.io versions its upstream-gang objects need.
func (w Workload) APIServerFlags() []string {
	runtimeConfig := "scheduling.k8s.io/v1beta1=true"
	if w.SubGroupSize > 0 {
		// CompositePodGroups, for the upstream gang scheduler's sub-groups.
		runtimeConfig += ",scheduling.k8s.io/v1alpha3=true"
	}
	return []string{
		w.GateFlag(),
		"--runtime-config=" + runtimeConfig,
	}
}

// GateFlag is the --feature-gates flag of the API server and of the
// UpstreamGang scheduler for this workload.
func (w Workload) GateFlag() string { return "--feature-gates=" + gateList(w.upstreamGates()) }

// SetUp creates what every pass over the workload shares: the nodes, the
// NetworkTopology, the queues and the DRA devices.
func (w Workload) SetUp(ctx context.Context, c *testcluster.Cluster, progress io.Writer) error {
	fmt.Fprintf(progress, "%s: creating %d nodes\n", w.Name, w.Nodes)
	if err := Parallel(ctx, w.Nodes, func(i int) error { return c.CreateNodes(ctx, w.Node(i)) }); err != nil {
		return err
	}
	if w.Topology || w.Cliques {
		nt := NetworkTopology()
		if w.Cliques {
			nt = CliqueNetworkTopology()
		}
		if _, err := c.Phalanx.SchedulingV1alpha1().NetworkTopologies().Create(ctx, nt, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	for q := 0; q < w.Queues; q++ {
		if _, err := c.Phalanx.SchedulingV1alpha1().Queues().Create(ctx, Queue(q), metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	if w.Devices > 0 {
		// Pods' claims come from their template through
		// kube-controller-manager's resourceclaim controller, as in a
		// cluster; it also frees and deletes them when the pods go.
		if err := c.StartResourceClaimController(); err != nil {
			return err
		}
		if _, err := c.Client.ResourceV1().DeviceClasses().Create(ctx, DeviceClass(), metav1.CreateOptions{}); err != nil {
			return err
		}
		fmt.Fprintf(progress, "%s: publishing %d ResourceSlices of %d devices\n", w.Name, w.Nodes, w.Devices)
		if err := Parallel(ctx, w.Nodes, func(i int) error {
			_, err := c.Client.ResourceV1().ResourceSlices().Create(ctx, w.ResourceSlice(i), metav1.CreateOptions{})
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

func gateList(gates []string) string {
	parts := make([]string, len(gates))
	for i, g := range gates {
		parts[i] = g + "=true"
	}
	return strings.Join(parts, ",")
}

// Parallel runs f(0..n-1) on 32 workers and returns the first error.
func Parallel(ctx context.Context, n int, f func(int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}
