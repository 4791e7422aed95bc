package networktopology

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/phalanx-sched/phalanx/internal/topology"
	"github.com/phalanx-sched/phalanx/plugins/internal/plugintest"
)

// TestUsageCache: the usage kept across cycles equals a fresh count after
// pods come and go, a result once returned never changes, and a changed
// node list (a node added) is counted afresh.
func TestUsageCache(t *testing.T) {
	nodes := []*v1.Node{node("a1", "ib-a", "l1"), node("a2", "ib-a", "l2"), node("b1", "ib-b", "l3"), node("b2", "ib-b", "l4")}
	tree := topology.FromLevels([]topology.Level{{Name: "ib", NodeLabel: ibLabel}, {Name: "leaf", NodeLabel: leafLabel}}, nodes)
	infos := map[string]*framework.NodeInfo{}
	var list []fwk.NodeInfo
	for _, n := range nodes {
		ni := framework.NewNodeInfo()
		ni.SetNode(n)
		infos[n.Name] = ni
		list = append(list, ni)
	}
	c := &usageCache{}
	fresh := func() map[string]float64 { return (&usageCache{}).of(tree, 0, list) }
	check := func(what string, want map[string]float64) map[string]float64 {
		t.Helper()
		got := c.of(tree, 0, list)
		if len(got) != len(want) {
			t.Fatalf("%s: usage %v, want %v", what, got, want)
		}
		for d, f := range want {
			if got[d] != f {
				t.Fatalf("%s: usage %v, want %v", what, got, want)
			}
		}
		return got
	}
	first := check("empty", map[string]float64{"ib-a": 0, "ib-b": 0})
	busy := plugintest.OnNode(plugintest.Pod("busy", "", "4", 0), "b1")
	infos["b1"].AddPod(busy)
	check("a pod of 4 of ib-b's 16 CPU", map[string]float64{"ib-a": 0, "ib-b": 0.25})
	if first["ib-b"] != 0 {
		t.Fatalf("a result changed after it was returned: %v", first)
	}
	if err := infos["b1"].RemovePod(klog.Background(), busy); err != nil {
		t.Fatal(err)
	}
	infos["a2"].AddPod(plugintest.OnNode(plugintest.Pod("other", "", "8", 0), "a2"))
	check("the pod gone, another on a2", fresh())
	extra := framework.NewNodeInfo()
	extra.SetNode(node("b3", "ib-b", "l4"))
	list = append(list, extra)
	tree = topology.FromLevels([]topology.Level{{Name: "ib", NodeLabel: ibLabel}, {Name: "leaf", NodeLabel: leafLabel}}, append(nodes, extra.Node()))
	check("a node added", fresh())
}

// BenchmarkUsage: a pod outside gangs on 10,000 nodes (20 IB clusters),
// one node changed since the last cycle (the pod assumed before), against
// counting every node afresh, as PreScore did for each pod.
func BenchmarkUsage(b *testing.B) {
	var nodes []*v1.Node
	var list []fwk.NodeInfo
	for i := range 10000 {
		n := node(fmt.Sprintf("n%d", i), fmt.Sprintf("ib-%d", i/512), fmt.Sprintf("leaf-%d", i/16))
		ni := framework.NewNodeInfo()
		ni.SetNode(n)
		nodes, list = append(nodes, n), append(list, ni)
	}
	tree := topology.FromLevels([]topology.Level{{Name: "ib", NodeLabel: ibLabel}, {Name: "leaf", NodeLabel: leafLabel}}, nodes)
	pod := plugintest.Pod("p", "", "1", 0)
	b.Run("kept", func(b *testing.B) {
		c := &usageCache{}
		c.of(tree, 0, list)
		for i := 0; b.Loop(); i++ {
			list[i%len(list)].(*framework.NodeInfo).AddPod(pod)
			c.of(tree, 0, list)
		}
	})
	b.Run("afresh", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			list[i%len(list)].(*framework.NodeInfo).AddPod(pod)
			(&usageCache{}).of(tree, 0, list)
		}
	})
}
