package bench

import (
	"fmt"
	"strings"
	"testing"

	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// TestDRAWorkload checks the DRA workload's objects: every pod claims one
// device through the template and every node publishes its devices
// (perf's tests check that scheduler_perf leaves the workload out).
func TestDRAWorkload(t *testing.T) {
	var w Workload
	for _, wl := range Workloads(DefaultSizes) {
		if wl.Name == "dra-gangs" {
			w = wl
		}
	}
	if w.Devices != 8 || w.Gangs != 100 || w.GangSize != 16 || w.Nodes != 1000 {
		t.Fatalf("dra-gangs = %+v, want 100 gangs of 16 on 1000 nodes × 8 devices", w)
	}
	for _, s := range w.Schedulers() {
		pod := w.Pod(s, "ns", 17)
		if len(pod.Spec.ResourceClaims) != 1 || *pod.Spec.ResourceClaims[0].ResourceClaimTemplateName != DRATemplate ||
			len(pod.Spec.Containers[0].Resources.Claims) != 1 {
			t.Errorf("%s pod claims %+v, want one claim from template %s", s, pod.Spec.ResourceClaims, DRATemplate)
		}
	}
	slice := w.ResourceSlice(3)
	if *slice.Spec.NodeName != "node-3" || len(slice.Spec.Devices) != 8 || slice.Spec.Driver != DRADriver {
		t.Errorf("slice of node-3 = %+v", slice.Spec)
	}
}

func subGroupWorkload(t *testing.T, s Sizes) Workload {
	t.Helper()
	for _, wl := range Workloads(s) {
		if wl.Name == "subgroups" {
			return wl
		}
	}
	t.Fatal("no subgroups workload")
	return Workload{}
}

// TestSubGroupWorkload checks the sub-group workload's objects: GB200-class
// nodes in cliques of 18 under spines of 16 cliques, the rank label on every
// pod, the sub-group annotations on phalanx's PodGroup and not on
// phalanx-flat's and upstream's CompositePodGroup of 16 PodGroups of 64.
func TestSubGroupWorkload(t *testing.T) {
	w := subGroupWorkload(t, DefaultSizes)
	if w.Nodes != 4608 || w.Gangs != 1 || w.GangSize != 1024 || w.SubGroupSize != 64 || w.GPUs != 1 {
		t.Fatalf("subgroups = %+v, want one gang of 1024 1-GPU pods in sub-groups of 64 on 4608 nodes", w)
	}
	for i, want := range map[int][2]string{0: {"spine-0", "clique-0"}, 17: {"spine-0", "clique-0"}, 18: {"spine-0", "clique-1"}, 287: {"spine-0", "clique-15"}, 288: {"spine-1", "clique-16"}, 4607: {"spine-15", "clique-255"}} {
		n := w.Node(i)
		if n.GPUs != 4 || n.Labels[SpineLabel] != want[0] || n.Labels[CliqueLabel] != want[1] {
			t.Errorf("node %d: %d GPUs, labels %v; want 4 GPUs in %v", i, n.GPUs, n.Labels, want)
		}
	}
	if got := w.Schedulers(); len(got) != 4 || got[3] != PhalanxFlat {
		t.Errorf("schedulers %v, want stock, upstream-gang, phalanx, phalanx-flat", got)
	}
	for _, s := range w.Schedulers() {
		pod := w.Pod(s, "ns", 130)
		if pod.Labels[phalanxv1alpha1.RankLabel] != "130" || pod.Labels[pgv1alpha1.PodGroupLabel] != "gang-0" {
			t.Errorf("%s pod 130 labels %v, want rank 130 of gang-0", s, pod.Labels)
		}
		if s == UpstreamGang {
			if pod.Spec.SchedulingGroup == nil || *pod.Spec.SchedulingGroup.PodGroupName != "gang-0-tp-2" {
				t.Errorf("upstream pod 130 schedulingGroup %+v, want gang-0-tp-2", pod.Spec.SchedulingGroup)
			}
		} else if pod.Spec.SchedulingGroup != nil {
			t.Errorf("%s pod has a schedulingGroup", s)
		}
	}
	pg := w.PodGroupFor(Phalanx, "ns", 0)
	if pg.Spec.MinMember != 1024 || pg.Annotations[phalanxv1alpha1.TopologyRequiredAnnotation] != "spine" ||
		pg.Annotations[phalanxv1alpha1.SubGroupSizeAnnotation] != "64" || pg.Annotations[phalanxv1alpha1.SubGroupTopologyRequiredAnnotation] != "nvlink-clique" {
		t.Errorf("phalanx PodGroup %+v", pg)
	}
	flat := w.PodGroupFor(PhalanxFlat, "ns", 0)
	if flat.Annotations[phalanxv1alpha1.TopologyRequiredAnnotation] != "spine" || len(flat.Annotations) != 1 {
		t.Errorf("phalanx-flat PodGroup annotations %v, want the spine requirement alone", flat.Annotations)
	}
	if len(w.PodGroupFor(Phalanx, "ns", 0).Annotations) != 3 {
		t.Error("PodGroupFor(PhalanxFlat) changed the annotations of later PodGroups")
	}
	cpg := w.UpstreamCompositePodGroup("ns", 0)
	if cpg.Spec.SchedulingPolicy.Gang.MinGroupCount != 16 || cpg.Spec.SchedulingConstraints.Topology[0].Key != SpineLabel {
		t.Errorf("composite %+v", cpg.Spec)
	}
	subs := w.UpstreamSubGroups("ns", 0)
	if len(subs) != 16 || subs[2].Name != "gang-0-tp-2" || *subs[2].Spec.ParentCompositePodGroupName != "gang-0" ||
		subs[2].Spec.SchedulingPolicy.Gang.MinCount != 64 || subs[2].Spec.SchedulingConstraints.Topology[0].Key != CliqueLabel {
		t.Errorf("upstream sub-groups: %d, third %+v", len(subs), subs[2].Spec)
	}
	wl := w.UpstreamWorkload("ns", 0)
	if len(wl.Spec.CompositePodGroupTemplates) != 1 || len(wl.Spec.PodGroupTemplates) != 0 ||
		wl.Spec.CompositePodGroupTemplates[0].PodGroupTemplates[0].Name != subs[0].Spec.WorkloadRef.TemplateName ||
		wl.Spec.CompositePodGroupTemplates[0].Name != cpg.Spec.WorkloadRef.TemplateName {
		t.Errorf("upstream Workload %+v", wl.Spec)
	}
	if got := w.upstreamGates(); got[len(got)-1] != CompositeGate || len(UpstreamGates) != 2 {
		t.Errorf("gates %v (UpstreamGates %v)", got, UpstreamGates)
	}
	// The topology workload keeps its one upstream PodGroup and gates.
	for _, tw := range Workloads(DefaultSizes) {
		if tw.Name == "topology" {
			if k := tw.UpstreamPodGroup("ns", 0).Spec.SchedulingConstraints.Topology[0].Key; k != IBLabel {
				t.Errorf("topology upstream key %s", k)
			}
			if len(tw.upstreamGates()) != 2 {
				t.Errorf("topology gates %v", tw.upstreamGates())
			}
		}
	}
}

// TestPlacementOf checks the placement check: sub-groups whole in one
// clique, one rank in another clique, one sub-group in another spine, and
// unbound members.
func TestPlacementOf(t *testing.T) {
	w := subGroupWorkload(t, Sizes{SubGroupNodes: 2 * SpineCliques * CliqueNodes, SubGroupGang: 8, SubGroupSize: 4})
	labels := map[string]map[string]string{}
	for i := 0; i < w.Nodes; i++ {
		labels[w.Node(i).Name] = w.Node(i).Labels
	}
	place := func(nodes ...int) Placement {
		nodeOf := map[int]string{}
		for i, n := range nodes {
			if n >= 0 {
				nodeOf[i] = w.Node(n).Name
			}
		}
		return w.PlacementOf(nodeOf, func(n string) map[string]string { return labels[n] })
	}
	// Ranks 0-3 in clique 0 (nodes 0 and 1), ranks 4-7 in clique 3.
	p := place(0, 0, 1, 1, 54, 54, 55, 55)
	if !p.Whole() || p.SubGroups != 2 || p.Gangs != 1 {
		t.Errorf("whole placement: %+v", p)
	}
	if got := p.String(); got != "gangs in one spine 1/1, sub-groups in one nvlink-clique 2/2" {
		t.Errorf("String = %q", got)
	}
	// Rank 3 on node 18 (clique 1): its sub-group spans two cliques.
	p = place(0, 0, 1, 18, 54, 54, 55, 55)
	if p.Whole() || p.SplitSubGroups != 1 || p.SplitGangs != 0 || p.MaxSubGroupDomains != 2 {
		t.Errorf("one rank away: %+v", p)
	}
	// Ranks 4-7 in spine 1 (node 288 on): the gang spans two spines, the
	// sub-groups are whole.
	p = place(0, 0, 1, 1, 288, 288, 289, 289)
	if p.SplitGangs != 1 || p.SplitSubGroups != 0 || p.MaxGangDomains != 2 {
		t.Errorf("two spines: %+v", p)
	}
	if !strings.Contains(p.String(), "gangs in one spine 0/1 (a gang spans up to 2)") {
		t.Errorf("String = %q", p.String())
	}
	p = place(0, 0, 1, 1, 54, 54, 55, -1)
	if p.Whole() || p.Unbound != 1 {
		t.Errorf("unbound member: %+v", p)
	}
}

// TestScaleWorkload: the scale workload's gangs run from 8 to 256 members,
// most of them small; pods are laid out gang by gang, then the plain pods;
// one gang in 3 carries the required level; placement checks only those.
func TestScaleWorkload(t *testing.T) {
	var w Workload
	for _, wl := range Workloads(DefaultSizes) {
		if wl.Name == "scale" {
			w = wl
		}
	}
	if w.Mix == nil || w.Nodes != 10000 || w.NumGangs() != 2000 || w.Mix.Pods != 10000 {
		t.Fatalf("scale = %+v, want 2000 mixed gangs and 10000 plain pods on 10000 nodes", w)
	}
	counts := map[int]int{}
	for _, n := range w.Mix.Sizes {
		counts[n]++
	}
	if counts[8] != 1000 || counts[256] != 40 || len(counts) != 6 {
		t.Fatalf("gang sizes %v, want 1000 of 8 … 40 of 256", counts)
	}
	if got, want := w.Total(), w.gangPods()+10000; got != want || w.gangPods() < 50000 || w.gangPods() > 56000 {
		t.Fatalf("Total %d (gang members %d), want about 53,000 members and 10,000 plain pods", got, w.gangPods())
	}
	// The last member of gang 1 and the first of gang 2, then the first
	// plain pod.
	last1 := w.firstOf(2) - 1
	if got := w.PodName(last1); got != fmt.Sprintf("gang-1-%d", w.SizeOf(1)-1) {
		t.Errorf("pod %d = %s, want the last member of gang 1", last1, got)
	}
	if got := w.PodName(last1 + 1); got != "gang-2-0" {
		t.Errorf("pod %d = %s, want gang-2-0", last1+1, got)
	}
	plain := w.Pod(Phalanx, "ns", w.gangPods())
	if plain.Name != "pod-0" || plain.Labels["scheduling.x-k8s.io/pod-group"] != "" || plain.Spec.Containers[0].Resources.Requests.Name("nvidia.com/gpu", "0").Value() != 0 {
		t.Errorf("first plain pod = %s %v %v, want pod-0 without gang or GPU", plain.Name, plain.Labels, plain.Spec.Containers[0].Resources.Requests)
	}
	if w.RequiredOf(0) != "ib-cluster" || w.RequiredOf(1) != "" || w.RequiredOf(3) != "ib-cluster" {
		t.Errorf("required levels of gangs 0, 1, 3 = %q %q %q", w.RequiredOf(0), w.RequiredOf(1), w.RequiredOf(3))
	}
	if pg := w.PodGroup("ns", 1); pg.Spec.MinMember != int32(w.SizeOf(1)) || pg.Annotations != nil {
		t.Errorf("PodGroup of gang 1 = %+v, want minMember %d and no required level", pg, w.SizeOf(1))
	}
	// Gang 0 split over two IB clusters, gang 1 (no level) spread: one split.
	nodeOf := map[int]string{}
	for i := 0; i < w.Total(); i++ {
		nodeOf[i] = "a"
	}
	nodeOf[0], nodeOf[w.firstOf(1)] = "b", "b"
	labels := func(n string) map[string]string { return map[string]string{IBLabel: n} }
	if p := w.PlacementOf(nodeOf, labels); p.SplitGangs != 1 || p.Gangs != 667 || p.Unbound != 0 {
		t.Errorf("placement = %+v, want 1 split of the 667 required gangs", p)
	}
}
