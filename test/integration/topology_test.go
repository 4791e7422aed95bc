package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	"sigs.k8s.io/yaml"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
	"github.com/phalanx-sched/phalanx/internal/topology"
)

const ibLabel = "network.example.com/ib-cluster"

// ibClusters returns GPU nodes (4 GPUs each) in IB clusters: name -> nodes.
func ibClusters(sizes map[string]int, tainted ...string) []testcluster.NodeSpec {
	isTainted := map[string]bool{}
	for _, t := range tainted {
		isTainted[t] = true
	}
	names := make([]string, 0, len(sizes))
	for n := range sizes {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []testcluster.NodeSpec
	for _, ib := range names {
		for i := 0; i < sizes[ib]; i++ {
			s := testcluster.NodeSpec{Name: fmt.Sprintf("%s-n%d", ib, i), CPU: "32", Memory: "128Gi", GPUs: 4,
				Labels: map[string]string{ibLabel: ib}, NRTPolicy: "none"}
			if isTainted[ib] {
				s.Taints = []v1.Taint{{Key: "maintenance", Value: "true", Effect: v1.TaintEffectNoSchedule}}
			}
			out = append(out, s)
		}
	}
	return out
}

func createIBTopology(t *testing.T, c *testcluster.Cluster) {
	t.Helper()
	nt := &phalanxv1alpha1.NetworkTopology{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: phalanxv1alpha1.NetworkTopologySpec{Levels: []phalanxv1alpha1.TopologyLevel{
			{Name: "ib-cluster", NodeLabel: ibLabel},
			{Name: "host", NodeLabel: v1.LabelHostname},
		}},
	}
	if _, err := c.Phalanx.SchedulingV1alpha1().NetworkTopologies().Create(ctxFor(t), nt, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// gangIBClusters returns the IB clusters the gang's bound members are in.
func gangIBClusters(t *testing.T, c *testcluster.Cluster, ns, group string) map[string]int {
	t.Helper()
	ctx := ctxFor(t)
	bound, err := c.BoundPods(ctx, ns, pgv1alpha1.PodGroupLabel+"="+group)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, p := range bound {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out[n.Labels[ibLabel]]++
	}
	return out
}

func topologyGang(ns, name string, members int, annotation, level string) (*pgv1alpha1.PodGroup, []testcluster.PodSpec) {
	pg := testcluster.PodGroup(ns, name, int32(members))
	pg.Annotations = map[string]string{annotation: level}
	return pg, gangPods(ns, name, members, testcluster.PodSpec{CPU: "1", GPUs: 1})
}

// TestTopologyReference: three IB clusters; the largest is tainted. A gang
// that requires one IB cluster lands whole in the tightest untainted one that
// fits, never split and never counted on the tainted capacity.
func TestTopologyReference(t *testing.T) {
	c := startCluster(t, ibClusters(map[string]int{"ib-a": 8, "ib-b": 4, "ib-c": 6}, "ib-a")...)
	createIBTopology(t, c)
	startScheduler(t, c)

	pg, pods := topologyGang("default", "train", 16, phalanxv1alpha1.TopologyRequiredAnnotation, "ib-cluster")
	createGang(t, c, pg, pods)
	waitBoundCount(t, c, "default", "train", 16)
	if got := gangIBClusters(t, c, "default", "train"); len(got) != 1 || got["ib-b"] != 16 {
		t.Fatalf("gang placed in %v, want all 16 in ib-b (the tightest untainted IB cluster that fits)", got)
	}

	// 20 more GPUs fit only in ib-c now.
	pg, pods = topologyGang("default", "second", 20, phalanxv1alpha1.TopologyRequiredAnnotation, "ib-cluster")
	createGang(t, c, pg, pods)
	waitBoundCount(t, c, "default", "second", 20)
	if got := gangIBClusters(t, c, "default", "second"); len(got) != 1 || got["ib-c"] != 20 {
		t.Fatalf("second gang placed in %v, want all 20 in ib-c", got)
	}
}

// TestTopologyRequiredTooBig: no single untainted IB cluster is large enough:
// nothing is bound and the condition names the domains tried.
func TestTopologyRequiredTooBig(t *testing.T) {
	c := startCluster(t, ibClusters(map[string]int{"ib-a": 8, "ib-b": 4, "ib-c": 6}, "ib-a")...)
	createIBTopology(t, c)
	startScheduler(t, c)
	pg, pods := topologyGang("default", "huge", 30, phalanxv1alpha1.TopologyRequiredAnnotation, "ib-cluster")
	createGang(t, c, pg, pods)
	waitCondition(t, c, "default", "huge", "Unschedulable",
		"with topology required ib-cluster", "at most 24 fit in ib-cluster ib-c",
		"ib-c (room for 24)", "ib-b (room for 16)", "ib-a (room for 0; 8 of 8 nodes fail TaintToleration)")
	assertBound(t, c, "default", "huge", 0)
}

// TestTopologyPreferredSpansFewest: a preferred gang too big for one IB
// cluster spans as few as possible, largest first.
func TestTopologyPreferredSpansFewest(t *testing.T) {
	c := startCluster(t, ibClusters(map[string]int{"ib-a": 2, "ib-b": 4, "ib-c": 6})...)
	createIBTopology(t, c)
	startScheduler(t, c)
	pg, pods := topologyGang("default", "wide", 36, phalanxv1alpha1.TopologyPreferredAnnotation, "ib-cluster")
	createGang(t, c, pg, pods)
	waitBoundCount(t, c, "default", "wide", 36)
	got := gangIBClusters(t, c, "default", "wide")
	if len(got) != 2 || got["ib-c"] != 24 || got["ib-b"] != 12 {
		t.Fatalf("gang placed in %v, want 24 in ib-c and 12 in ib-b (two domains, not three)", got)
	}
}

// TestTopologyGangsPackedIntoWholeDomains: two gangs that each fit one domain
// get one whole domain each, not interleaved across both.
func TestTopologyGangsPackedIntoWholeDomains(t *testing.T) {
	c := startCluster(t, ibClusters(map[string]int{"ib-x": 4, "ib-y": 4})...)
	createIBTopology(t, c)
	startScheduler(t, c)
	for _, name := range []string{"first", "second"} {
		pg, pods := topologyGang("default", name, 16, phalanxv1alpha1.TopologyPreferredAnnotation, "ib-cluster")
		createGang(t, c, pg, pods)
		waitBoundCount(t, c, "default", name, 16)
	}
	first, second := gangIBClusters(t, c, "default", "first"), gangIBClusters(t, c, "default", "second")
	if len(first) != 1 || len(second) != 1 {
		t.Fatalf("gangs split across domains: first %v, second %v", first, second)
	}
	for d := range first {
		if second[d] > 0 {
			t.Fatalf("both gangs in %s", d)
		}
	}
}

// TestTopologyHyperNodesMatchLabels: Volcano HyperNodes describing the same
// IB clusters give the same placements as the label levels.
func TestTopologyHyperNodesMatchLabels(t *testing.T) {
	layout := map[string]int{"ib-a": 8, "ib-b": 4, "ib-c": 6}
	place := func(useHyperNodes bool) map[string]int {
		c := startCluster(t, ibClusters(layout, "ib-a")...)
		level := "ib-cluster"
		if useHyperNodes {
			installHyperNodeCRD(t, c)
			for ib := range layout {
				hn := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
					"metadata": map[string]any{"name": ib},
					"spec": map[string]any{"tier": int64(1), "members": []any{map[string]any{
						"type":     "Node",
						"selector": map[string]any{"labelMatch": map[string]any{"matchLabels": map[string]any{ibLabel: ib}}},
					}}},
				}}
				if _, err := c.Dynamic.Resource(topology.HyperNodeGVR).Create(ctxFor(t), hn, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			level = topology.TierLevel(1)
		} else {
			createIBTopology(t, c)
		}
		s := startScheduler(t, c)
		defer func() { _ = s.Stop() }()
		pg, pods := topologyGang("default", "g", 16, phalanxv1alpha1.TopologyRequiredAnnotation, level)
		createGang(t, c, pg, pods)
		waitBoundCount(t, c, "default", "g", 16)
		return gangIBClusters(t, c, "default", "g")
	}
	labels, hyperNodes := place(false), place(true)
	if fmt.Sprint(labels) != fmt.Sprint(hyperNodes) || len(labels) != 1 {
		t.Fatalf("labels placed %v, HyperNodes placed %v; want the same single IB cluster", labels, hyperNodes)
	}
}

func installHyperNodeCRD(t *testing.T, c *testcluster.Cluster) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "hypernode-crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(raw, crd); err != nil {
		t.Fatal(err)
	}
	client, err := apiextensionsclient.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = testcluster.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		_, err := c.Client.Discovery().ServerResourcesForGroupVersion("topology.volcano.sh/v1alpha1")
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("HyperNode CRD not served: %v", err)
	}
}

// TestTopologyLaterMembersStayInDomain: members scheduled after the gang runs
// (scale-out, a replacement for a lost member) join its IB cluster, even where
// another cluster is emptier.
func TestTopologyLaterMembersStayInDomain(t *testing.T) {
	c := startCluster(t, ibClusters(map[string]int{"ib-b": 2, "ib-c": 6})...)
	createIBTopology(t, c)
	startScheduler(t, c)
	ctx := ctxFor(t)
	pg, pods := topologyGang("default", "elastic", 4, phalanxv1alpha1.TopologyRequiredAnnotation, "ib-cluster")
	createGang(t, c, pg, pods)
	waitBoundCount(t, c, "default", "elastic", 4)
	if got := gangIBClusters(t, c, "default", "elastic"); len(got) != 1 || got["ib-b"] != 4 {
		t.Fatalf("gang placed in %v, want ib-b (tightest)", got)
	}
	// Scale out by two members: ib-c is empty and would win on spreading.
	more := gangPods("default", "elastic", 6, testcluster.PodSpec{CPU: "1", GPUs: 1})[4:]
	if err := c.CreatePods(ctx, more...); err != nil {
		t.Fatal(err)
	}
	waitBoundCount(t, c, "default", "elastic", 6)
	// Replace a lost member.
	if err := c.Client.CoreV1().Pods("default").Delete(ctx, "elastic-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitBoundCount(t, c, "default", "elastic", 5)
	if err := c.CreatePods(ctx, testcluster.PodSpec{Name: "elastic-6", PodGroup: "elastic", CPU: "1", GPUs: 1}); err != nil {
		t.Fatal(err)
	}
	waitBoundCount(t, c, "default", "elastic", 6)
	if got := gangIBClusters(t, c, "default", "elastic"); len(got) != 1 || got["ib-b"] != 6 {
		t.Fatalf("members placed in %v, want all 6 in ib-b", got)
	}
}

// TestTopologyPlainPodsFillFragmentedDomains: pods outside gangs go to the
// domain that is already in use, keeping whole domains for gangs.
func TestTopologyPlainPodsFillFragmentedDomains(t *testing.T) {
	c := startCluster(t, ibClusters(map[string]int{"ib-a": 2, "ib-b": 2})...)
	createIBTopology(t, c)
	startScheduler(t, c)
	ctx := ctxFor(t)
	// Something already runs in ib-b.
	if err := c.CreatePods(ctx, testcluster.PodSpec{Name: "seed", CPU: "8", GPUs: 2,
		NodeSelector: map[string]string{v1.LabelHostname: "ib-b-n1"}}); err != nil {
		t.Fatal(err)
	}
	waitBound(t, c, "default", "seed")
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("small-%d", i)
		if err := c.CreatePods(ctx, testcluster.PodSpec{Name: name, CPU: "1", GPUs: 1}); err != nil {
			t.Fatal(err)
		}
		waitBound(t, c, "default", name)
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n, err := c.Client.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Labels[ibLabel] != "ib-b" {
			t.Fatalf("%s went to %s in %s; want the fragmented ib-b, leaving ib-a whole", name, n.Name, n.Labels[ibLabel])
		}
	}
}
