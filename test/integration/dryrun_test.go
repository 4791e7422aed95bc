package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/phalanx-sched/phalanx/internal/gang"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
	"github.com/phalanx-sched/phalanx/plugins/coscheduling"
	"github.com/phalanx-sched/phalanx/plugins/probe"
)

// TestDryRunMatchesBinds: the gang manager's dry run, asked of the running
// scheduler (its own manager, its profile's Filter plugins, the cluster as
// the API server has it), says how many whole gangs of a shape fit; exactly
// that many gangs then bind whole, and the next one binds nothing.
func TestDryRunMatchesBinds(t *testing.T) {
	// 13 GPUs on four nodes of different sizes; gangs of 3 single-GPU pods.
	c := startCluster(t,
		testcluster.NodeSpec{Name: "n0", CPU: "8", Memory: "16Gi", GPUs: 4},
		testcluster.NodeSpec{Name: "n1", CPU: "8", Memory: "16Gi", GPUs: 4},
		testcluster.NodeSpec{Name: "n2", CPU: "8", Memory: "16Gi", GPUs: 2},
		testcluster.NodeSpec{Name: "n3", CPU: "8", Memory: "16Gi", GPUs: 3})
	s := startScheduler(t, c)
	ctx := ctxFor(t)
	fw := s.Profiles["phalanx-scheduler"]
	gangs := s.Runtime.GangsIfBuilt()
	if fw == nil || gangs == nil {
		t.Fatal("the in-process scheduler has no phalanx-scheduler profile or gang manager")
	}

	member := testcluster.PodSpec{CPU: "1", GPUs: 1}
	shape := make([]*v1.Pod, 3)
	for i := range shape {
		m := member
		m.Namespace, m.Name = "default", fmt.Sprintf("probe-%d", i)
		shape[i] = m.Pod()
	}
	var answer gang.Answer
	err := testcluster.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(nodes.Items) != 4 {
			return false, err
		}
		list := make([]*v1.Node, len(nodes.Items))
		for i := range nodes.Items {
			list[i] = &nodes.Items[i]
		}
		infos, err := cache.NewSnapshot(nil, list).NodeInfos().List()
		if err != nil {
			return false, err
		}
		state := framework.NewCycleState()
		if _, st, _ := fw.RunPreFilterPlugins(ctx, state, shape[0]); !st.IsSuccess() {
			return false, fmt.Errorf("PreFilter of the probe pod: %v", st)
		}
		answer = gangs.Manager.Copies(ctx, gang.Query{Members: shape, Prober: probe.Filters(fw, coscheduling.Name, state, infos)})
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if answer.Copies != 4 {
		t.Fatalf("dry run: %d copies (%s), want 4 (13 GPUs, gangs of 3)", answer.Copies, answer.Why)
	}

	for g := 0; g <= answer.Copies; g++ {
		name := fmt.Sprintf("g%d", g)
		createGang(t, c, testcluster.PodGroup("default", name, 3), gangPods("default", name, 3, member))
	}
	err = testcluster.Eventually(ctx, 60*time.Second, func(ctx context.Context) (bool, error) {
		whole := 0
		for g := 0; g <= answer.Copies; g++ {
			n, err := boundCount(ctx, c, "default", fmt.Sprintf("g%d", g))
			if err != nil {
				return false, err
			}
			if n == 3 {
				whole++
			}
		}
		return whole == answer.Copies, nil
	})
	if err != nil {
		t.Fatalf("%d whole gangs never bound: %v", answer.Copies, err)
	}
	// The gang the dry run had no room for is refused whole.
	waitCondition(t, c, "default", fmt.Sprintf("g%d", answer.Copies), "Unschedulable")
	bound, err := c.BoundPods(ctx, "default", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(bound) != 3*answer.Copies {
		t.Fatalf("%d pods bound, want %d: the dry run's answer, whole", len(bound), 3*answer.Copies)
	}
}
