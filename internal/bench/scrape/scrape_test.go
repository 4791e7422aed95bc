package scrape

import (
	"math"
	"strings"
	"testing"
)

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

// TestWithPlans: a pass's plan series are the fresh scheduler's totals,
// plans made before the first scrape included; other series stay the
// difference.
func TestWithPlans(t *testing.T) {
	before := Scrape{planMetric + "{}": {Sum: 0.05, Count: 1}, attemptMetric + "{result=scheduled}": {Sum: 1, Count: 10}}
	after := Scrape{planMetric + "{}": {Sum: 0.05, Count: 1}, attemptMetric + "{result=scheduled}": {Sum: 3, Count: 30}}
	d := after.Sub(before).WithPlans(after)
	if h := d.Plan(); h.Count != 1 || h.Sum != 0.05 {
		t.Errorf("plan = %+v, want the one plan made before the first scrape", h)
	}
	if n := d.Attempts()["scheduled"]; n != 20 {
		t.Errorf("attempts = %v, want the difference 20", n)
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
