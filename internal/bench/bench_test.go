package bench

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

func TestSpreadOf(t *testing.T) {
	tests := []struct {
		in   []float64
		want Spread
	}{
		{[]float64{3, 1, 2}, Spread{2, 1, 3}},
		{[]float64{4, 1, 2, 3}, Spread{2.5, 1, 4}},
		{[]float64{math.NaN(), 5}, Spread{5, 5, 5}},
	}
	for _, tc := range tests {
		if got := SpreadOf(tc.in); got != tc.want {
			t.Errorf("SpreadOf(%v) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
	if got := SpreadOf(nil).Format("%.0f"); got != "-" {
		t.Errorf("empty spread formats as %q, want -", got)
	}
	if got := (Spread{2, 1, 3}).Format("%.1f"); got != "2.0 (1.0–3.0)" {
		t.Errorf("Format = %q", got)
	}
}

const metricsText = `# TYPE scheduler_framework_extension_point_duration_seconds histogram
scheduler_framework_extension_point_duration_seconds_bucket{extension_point="PreFilter",profile="p",status="Success",le="+Inf"} 10
scheduler_framework_extension_point_duration_seconds_sum{extension_point="PreFilter",profile="p",status="Success"} 0.5
scheduler_framework_extension_point_duration_seconds_count{extension_point="PreFilter",profile="p",status="Success"} 10
# TYPE scheduler_plugin_execution_duration_seconds histogram
scheduler_plugin_execution_duration_seconds_bucket{extension_point="PreFilter",plugin="Coscheduling",status="Success",le="+Inf"} 1
scheduler_plugin_execution_duration_seconds_sum{extension_point="PreFilter",plugin="Coscheduling",status="Success"} 0.02
scheduler_plugin_execution_duration_seconds_count{extension_point="PreFilter",plugin="Coscheduling",status="Success"} 1
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="201",host="h",method="POST"} 7
# TYPE go_goroutines gauge
go_goroutines 12
`

// TestScrapeCosts checks the parsing of /metrics, the difference of two
// scrapes and the extrapolation of sampled plugin durations.
func TestScrapeCosts(t *testing.T) {
	before, err := ParseScrape(strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	after, err := ParseScrape(strings.NewReader(metricsText))
	if err != nil {
		t.Fatal(err)
	}
	d := after.Sub(before)
	points, plugins := d.Costs()
	if c := points["PreFilter"]; c.Seconds != 0.5 || c.Calls != 10 {
		t.Errorf("PreFilter = %+v, want 0.5 s over 10 calls", c)
	}
	scale := 100.0 / PluginSamplePercent
	if c := plugins["Coscheduling/PreFilter"]; math.Abs(c.Seconds-0.02*scale) > 1e-9 || c.Calls != scale {
		t.Errorf("Coscheduling/PreFilter = %+v, want the sampled figures × %v", c, scale)
	}
	if got := d.Requests()["POST"]; got != 7 {
		t.Errorf("POST requests = %v, want 7", got)
	}
	if got := after.Sub(after); len(got) != 0 {
		t.Errorf("a scrape minus itself = %v, want nothing", got)
	}
}

// TestPassFigures checks that a failed pass gives no throughput and that
// requests are unknown, not zero, when the binary exports none.
func TestPassFigures(t *testing.T) {
	p := Pass{Pods: 100, Seconds: 2, CPUSeconds: 0.5, Metrics: Scrape{}}
	if p.PodsPerS() != 50 || p.CPUPerPod() != 5 {
		t.Errorf("pods/s %v, CPU ms/pod %v; want 50 and 5", p.PodsPerS(), p.CPUPerPod())
	}
	if !math.IsNaN(p.RequestsPerPod()) {
		t.Errorf("requests per pod without the metric = %v, want NaN", p.RequestsPerPod())
	}
	p.Failed = "timed out"
	if !math.IsNaN(p.PodsPerS()) {
		t.Errorf("a failed pass has %v pods/s, want NaN", p.PodsPerS())
	}
}

// TestDRAWorkload checks the DRA workload's objects: every pod claims one
// device through the template, every node publishes its devices, and the
// scheduler_perf engine leaves the workload out.
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
	dir := t.TempDir()
	path, err := RenderPerf(dir, []Workload{w})
	if err != nil {
		t.Fatal(err)
	}
	if raw, err := os.ReadFile(path); err != nil || strings.Contains(string(raw), "dra-gangs") {
		t.Errorf("scheduler_perf config renders dra-gangs (err %v):\n%s", err, raw)
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
// phalanx-flat's, upstream's CompositePodGroup of 16 PodGroups of 64, and
// that scheduler_perf leaves the workload out.
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
	dir := t.TempDir()
	path, err := RenderPerf(dir, Workloads(DefaultSizes))
	if err != nil {
		t.Fatal(err)
	}
	if raw, err := os.ReadFile(path); err != nil || strings.Contains(string(raw), "subgroups") || !strings.Contains(string(raw), "topology_phalanx") {
		t.Errorf("scheduler_perf config (err %v) renders subgroups or lacks topology", err)
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

// TestSubGroupReport checks the report's plan and placement goals and the
// placement lines.
func TestSubGroupReport(t *testing.T) {
	w := subGroupWorkload(t, DefaultSizes)
	plan := func(ms float64) Scrape {
		return Scrape{planMetric + "{}": {Sum: ms / 1000, Count: 1}}
	}
	whole := &Placement{GangLevel: "spine", SubGroupLevel: "nvlink-clique", Gangs: 1, SubGroups: 16}
	split := &Placement{GangLevel: "spine", SubGroupLevel: "nvlink-clique", Gangs: 1, SubGroups: 16, SplitGangs: 1, SplitSubGroups: 16, MaxGangDomains: 9, MaxSubGroupDomains: 16}
	r := Result{Workload: w, Passes: []Pass{
		{Scheduler: Stock, Pods: 1024, Seconds: 4, Placement: split},
		{Scheduler: Phalanx, Pods: 1024, Seconds: 2, Metrics: plan(30), Placement: whole},
		{Scheduler: PhalanxFlat, Pods: 1024, Seconds: 2, Metrics: plan(20), Placement: whole},
	}}
	var b strings.Builder
	WriteReport(&b, []Result{r}, "test", 1)
	// Columns are padded: compare with single spaces.
	out := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{
		"sub-groups: phalanx / stock 2.00 goal ≥ 1.00: met",
		"sub-groups: plan ms, phalanx / phalanx-flat 1.50 goal ≤ 2.00: met",
		"sub-groups: phalanx places each whole 1/1 passes goal: every pass: met",
		"subgroups stock whole in 0/1 passes; split gangs 1 of 1 (level spine); split sub-groups 16 of 16 (level nvlink-clique)",
		"subgroups phalanx-flat 512",
		"30.0 (1)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	r.Passes[1].Placement = split
	b.Reset()
	WriteReport(&b, []Result{r}, "test", 1)
	if !strings.Contains(strings.Join(strings.Fields(b.String()), " "), "phalanx places each whole 0/1 passes goal: every pass: NOT met") {
		t.Errorf("a split phalanx pass is not reported:\n%s", b.String())
	}
}

// TestWithPlans: a pass's plan series are the fresh scheduler's totals,
// plans made before the first scrape included; other series stay the
// difference.
func TestWithPlans(t *testing.T) {
	before := Scrape{planMetric + "{}": {Sum: 0.05, Count: 1}, attemptMetric + "{result=scheduled}": {Sum: 1, Count: 10}}
	after := Scrape{planMetric + "{}": {Sum: 0.05, Count: 1}, attemptMetric + "{result=scheduled}": {Sum: 3, Count: 30}}
	d := after.Sub(before).withPlans(after)
	if h := d.Plan(); h.Count != 1 || h.Sum != 0.05 {
		t.Errorf("plan = %+v, want the one plan made before the first scrape", h)
	}
	if n := d.Attempts()["scheduled"]; n != 20 {
		t.Errorf("attempts = %v, want the difference 20", n)
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

// TestPlanQuantile: the plan histogram's quantiles, interpolated within a
// bucket as histogram_quantile does.
func TestPlanQuantile(t *testing.T) {
	h := Hist{Count: 100, Buckets: map[float64]float64{0.001: 50, 0.002: 90, 0.004: 100, math.Inf(1): 100}}
	for _, tc := range []struct{ q, want float64 }{{0.5, 0.001}, {0.7, 0.0015}, {0.99, 0.0038}} {
		if got := h.Quantile(tc.q); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("Quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	d := Scrape{planMetric + "{}": h}.Sub(Scrape{planMetric + "{}": {Count: 50, Buckets: map[float64]float64{0.001: 50, 0.002: 50, 0.004: 50, math.Inf(1): 50}}})
	if got := d.Plan().Quantile(0.5); math.Abs(got-0.001625) > 1e-9 {
		t.Errorf("after Sub, p50 = %v, want 0.001625 (the 50 later plans: 40 in 1–2 ms)", got)
	}
}
