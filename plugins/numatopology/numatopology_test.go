package numatopology

import (
	"context"
	"strings"
	"testing"
	"time"

	nrtv1alpha2 "github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/apis/topology/v1alpha2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/phalanx-sched/phalanx/apis/config"
	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/plugins/internal/plugintest"
	"github.com/phalanx-sched/phalanx/plugins/runtime"
)

func numaPlugin(strict bool) plugintest.Plugin {
	mode := config.AdmitAll
	if strict {
		mode = config.RejectAlignedPods
	}
	return plugintest.Plugin{
		Name: Name, Extensions: []string{"PreFilter", "Filter", "PreScore", "Score", "Reserve"},
		New: func(ctx context.Context, h fwk.Handle, rt *runtime.Runtime) (fwk.Plugin, error) {
			return Factory(rt)(ctx, &config.NUMATopologyArgs{ScoringStrategy: config.LeastNUMANodes, NodesWithoutTopology: mode}, h)
		},
	}
}

// gpuPod needs n GPUs: a device request the kubelet aligns under a
// rejecting policy.
func gpuPod(name string, n int64) *v1.Pod { return plugintest.Pod(name, "", "1", n) }

func twoZones(node string) *nrtv1alpha2.NodeResourceTopology {
	return plugintest.NRT(node, "single-numa-node",
		plugintest.Zone{Name: "node-0", CPU: "8", GPUs: 2},
		plugintest.Zone{Name: "node-1", CPU: "8", GPUs: 2})
}

func filter(t *testing.T, e *plugintest.Env, pl *NUMATopology, pod *v1.Pod, node string) *fwk.Status {
	t.Helper()
	state := framework.NewCycleState()
	if _, st := pl.PreFilter(e.Ctx, state, pod, nil); st.IsSkip() {
		return nil
	}
	return pl.Filter(e.Ctx, state, pod, e.NodeInfo(node))
}

// TestNodesWithoutTopology: a node that publishes no NodeResourceTopology
// takes GPU pods (the kubelet's default policy none never refuses them),
// unless a label says it enforces alignment or the strict mode is on; such a
// node says so once.
func TestNodesWithoutTopology(t *testing.T) {
	labelled := plugintest.Node("labelled", "16", 4, map[string]string{phalanxv1alpha1.TopologyManagerPolicyLabel: "single-numa-node"})
	badLabel := plugintest.Node("bad-label", "16", 4, map[string]string{phalanxv1alpha1.TopologyManagerPolicyLabel: "sometimes"})
	nodes := []*v1.Node{plugintest.Node("plain", "16", 4, nil), labelled, badLabel, plugintest.Node("zoned", "16", 4, nil)}
	for _, tc := range []struct {
		name   string
		strict bool
		node   string
		pod    *v1.Pod
		want   fwk.Code
		msg    string
	}{
		{name: "plain GPU node", node: "plain", pod: gpuPod("g", 4), want: fwk.Success},
		{name: "labelled single-numa-node", node: "labelled", pod: gpuPod("g", 1), want: fwk.UnschedulableAndUnresolvable, msg: "publishes no NodeResourceTopology"},
		{name: "invalid policy label", node: "bad-label", pod: gpuPod("g", 1), want: fwk.UnschedulableAndUnresolvable, msg: `"sometimes"`},
		{name: "strict mode", strict: true, node: "plain", pod: gpuPod("g", 1), want: fwk.UnschedulableAndUnresolvable, msg: "RejectAlignedPods"},
		{name: "strict mode, pod needs no alignment", strict: true, node: "plain", pod: plugintest.Pod("cpu", "", "1", 0), want: fwk.Success},
		{name: "zones fit", node: "zoned", pod: gpuPod("g", 2), want: fwk.Success},
		{name: "no single zone holds it", node: "zoned", pod: gpuPod("g", 3), want: fwk.Unschedulable, msg: "NUMA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := plugintest.New(t, plugintest.Objects{Nodes: nodes, NRTs: []*nrtv1alpha2.NodeResourceTopology{twoZones("zoned")}}, numaPlugin(tc.strict))
			pl := e.Plugins[Name].(*NUMATopology)
			e.Eventually("zones of node zoned", func() bool { zn, _, _ := pl.zones.Zones("zoned"); return zn != nil })
			st := filter(t, e, pl, tc.pod, tc.node)
			if st.Code() != tc.want || !strings.Contains(st.Message(), tc.msg) {
				t.Fatalf("Filter = %v %q, want %v containing %q", st.Code(), st.Message(), tc.want, tc.msg)
			}
			// The planner's limit agrees with Filter.
			if limit := pl.Limit(tc.pod, tc.node, 4); (limit > 0) != (tc.want == fwk.Success) {
				t.Fatalf("Limit = %d, disagrees with Filter %v", limit, tc.want)
			}
		})
	}
}

// TestUnalignedNodeReportedOnce: the event and the gauge say it once per
// node, however many pods are turned away.
func TestUnalignedNodeReportedOnce(t *testing.T) {
	labelled := plugintest.Node("labelled", "16", 4, map[string]string{phalanxv1alpha1.TopologyManagerPolicyLabel: "restricted"})
	e := plugintest.New(t, plugintest.Objects{Nodes: []*v1.Node{labelled}}, numaPlugin(false))
	pl := e.Plugins[Name].(*NUMATopology)
	for i := 0; i < 5; i++ {
		if st := filter(t, e, pl, gpuPod("g", 1), "labelled"); st.IsSuccess() {
			t.Fatal("a restricted node without zones admitted an aligned pod")
		}
	}
	if pl.zones.ReportUnaligned("labelled") {
		t.Fatal("the node was not recorded as reported")
	}
}

// TestZoneCharges: Reserve charges the zone the kubelet will use, so the
// next pods see it taken before the NRT object shows it; Unreserve gives it
// back; an NRT update published after the grace period replaces the charges.
func TestZoneCharges(t *testing.T) {
	e := plugintest.New(t, plugintest.Objects{
		Nodes: []*v1.Node{plugintest.Node("zoned", "16", 4, nil)},
		NRTs:  []*nrtv1alpha2.NodeResourceTopology{twoZones("zoned")},
	}, numaPlugin(false))
	pl := e.Plugins[Name].(*NUMATopology)
	e.Eventually("zones", func() bool { zn, _, _ := pl.zones.Zones("zoned"); return zn != nil })
	reserve := func(p *v1.Pod) {
		state := framework.NewCycleState()
		pl.PreFilter(e.Ctx, state, p, nil)
		if st := pl.Reserve(e.Ctx, state, p, "zoned"); !st.IsSuccess() {
			t.Fatalf("Reserve %s = %v", p.Name, st)
		}
	}
	a, b := gpuPod("a", 2), gpuPod("b", 2)
	reserve(a)
	reserve(b)
	if st := filter(t, e, pl, gpuPod("c", 1), "zoned"); st.IsSuccess() {
		t.Fatal("both zones are charged: a third GPU pod must not fit")
	}
	if got := pl.Limit(gpuPod("c", 2), "zoned", 4); got != 0 {
		t.Fatalf("Limit with both zones charged = %d, want 0", got)
	}
	pl.Unreserve(e.Ctx, nil, b, "zoned")
	if st := filter(t, e, pl, gpuPod("c", 2), "zoned"); !st.IsSuccess() {
		t.Fatalf("after Unreserve a zone is free again: %v", st)
	}
	// The agent publishes the node with pod a accounted for (zone 0 used),
	// after the grace period: the scheduler's charge is dropped, the object
	// counts instead.
	e.Clock.Step(10 * time.Second)
	updated := twoZones("zoned")
	for i := range updated.Zones[0].Resources {
		if updated.Zones[0].Resources[i].Name == string(plugintest.GPU) {
			updated.Zones[0].Resources[i].Available = resource.MustParse("0")
		}
	}
	updated.ResourceVersion = "2" // the API server bumps it; the fake tracker does not
	if _, err := e.NRT.TopologyV1alpha2().NodeResourceTopologies().Update(e.Ctx, updated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually("charge replaced by the object", func() bool {
		_, charged, _ := pl.zones.Zones("zoned")
		return len(charged) == 0
	})
	if got := pl.Limit(gpuPod("c", 2), "zoned", 4); got != 1 {
		t.Fatalf("Limit after the update = %d, want 1 (zone 1 free)", got)
	}
}

// TestZonesFollowTheInformer: the zones answer from the informer's parse of
// each object as it arrives: an update replaces them, an object that does not
// parse gives its error (naming what is wrong), a deletion leaves the node
// without zones.
func TestZonesFollowTheInformer(t *testing.T) {
	e := plugintest.New(t, plugintest.Objects{
		Nodes: []*v1.Node{plugintest.Node("zoned", "16", 4, nil)},
		NRTs:  []*nrtv1alpha2.NodeResourceTopology{twoZones("zoned")},
	}, numaPlugin(false))
	pl := e.Plugins[Name].(*NUMATopology)
	nrts := e.NRT.TopologyV1alpha2().NodeResourceTopologies()
	zoneCount := func() int {
		zn, _, err := pl.zones.Zones("zoned")
		if zn == nil || err != nil {
			return -1
		}
		return len(zn.Zones)
	}
	e.Eventually("two zones", func() bool { return zoneCount() == 2 })

	one := plugintest.NRT("zoned", "single-numa-node", plugintest.Zone{Name: "node-0", CPU: "16", GPUs: 4})
	one.ResourceVersion = "2"
	if _, err := nrts.Update(e.Ctx, one, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually("one zone after the update", func() bool { return zoneCount() == 1 })

	dup := twoZones("zoned")
	dup.Zones[1].Name = "node-0"
	dup.ResourceVersion = "3"
	if _, err := nrts.Update(e.Ctx, dup, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually("the parse error", func() bool {
		zn, _, err := pl.zones.Zones("zoned")
		return zn == nil && err != nil && strings.Contains(err.Error(), `zone "node-0" given twice`)
	})

	if err := nrts.Delete(e.Ctx, "zoned", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually("no zones after the deletion", func() bool {
		zn, _, err := pl.zones.Zones("zoned")
		return zn == nil && err == nil
	})
}
