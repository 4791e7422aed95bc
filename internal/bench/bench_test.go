package bench

import (
	"math"
	"os"
	"strings"
	"testing"
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
