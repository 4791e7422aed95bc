package scrape

import (
	"math"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
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

// TestParseScrape: only the bench's histograms and the request counter are
// kept, keyed by name and sorted labels; buckets only for plans.
func TestParseScrape(t *testing.T) {
	const text = `# TYPE phalanx_gang_plan_duration_seconds histogram
phalanx_gang_plan_duration_seconds_bucket{result="planned",le="0.001"} 2
phalanx_gang_plan_duration_seconds_bucket{result="planned",le="+Inf"} 3
phalanx_gang_plan_duration_seconds_sum{result="planned"} 0.004
phalanx_gang_plan_duration_seconds_count{result="planned"} 3
# TYPE scheduler_scheduling_attempt_duration_seconds histogram
scheduler_scheduling_attempt_duration_seconds_bucket{result="scheduled",profile="p",le="+Inf"} 5
scheduler_scheduling_attempt_duration_seconds_sum{result="scheduled",profile="p"} 0.5
scheduler_scheduling_attempt_duration_seconds_count{result="scheduled",profile="p"} 5
scheduler_scheduling_attempt_duration_seconds_bucket{result="unschedulable",profile="p",le="+Inf"} 2
scheduler_scheduling_attempt_duration_seconds_sum{result="unschedulable",profile="p"} 0.1
scheduler_scheduling_attempt_duration_seconds_count{result="unschedulable",profile="p"} 2
# TYPE apiserver_request_duration_seconds histogram
apiserver_request_duration_seconds_bucket{le="+Inf"} 1
apiserver_request_duration_seconds_sum 1
apiserver_request_duration_seconds_count 1
`
	s, err := ParseScrape(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Hist{
		planMetric + "{result=planned}":                    {Sum: 0.004, Count: 3, Buckets: map[float64]float64{0.001: 2, math.Inf(1): 3}},
		attemptMetric + "{profile=p,result=scheduled}":     {Sum: 0.5, Count: 5},
		attemptMetric + "{profile=p,result=unschedulable}": {Sum: 0.1, Count: 2},
	}
	if len(s) != len(want) {
		t.Fatalf("scrape = %v, want the keys of %v", s, want)
	}
	for k, w := range want {
		h, ok := s[k]
		if !ok || h.Sum != w.Sum || h.Count != w.Count || len(h.Buckets) != len(w.Buckets) {
			t.Errorf("%s = %+v, want %+v", k, h, w)
		}
		for b, c := range w.Buckets {
			if h.Buckets[b] != c {
				t.Errorf("%s bucket %v = %v, want %v", k, b, h.Buckets[b], c)
			}
		}
	}
	if got := s.Attempts(); got["scheduled"] != 5 || got["unschedulable"] != 2 {
		t.Errorf("attempts = %v", got)
	}
	if _, err := ParseScrape(strings.NewReader("not { metrics")); err == nil {
		t.Error("ParseScrape of garbage: no error")
	}
}

func TestAddAndPlan(t *testing.T) {
	sum := Scrape{}
	sum.Add(Scrape{planMetric + "{result=planned}": {Sum: 1, Count: 2, Buckets: map[float64]float64{1: 2}}})
	sum.Add(Scrape{planMetric + "{result=planned}": {Sum: 3, Count: 4, Buckets: map[float64]float64{1: 1, 2: 4}},
		planMetric + "{result=failed}": {Sum: 1, Count: 1, Buckets: map[float64]float64{2: 1}}})
	if h := sum[planMetric+"{result=planned}"]; h.Sum != 4 || h.Count != 6 || h.Buckets[1] != 3 || h.Buckets[2] != 4 {
		t.Errorf("sum of two = %+v", h)
	}
	// Plan adds every result together.
	if p := sum.Plan(); p.Sum != 5 || p.Count != 7 || p.Buckets[2] != 5 {
		t.Errorf("Plan = %+v", p)
	}
	if p := (Scrape{}).Plan(); p.Count != 0 || !math.IsNaN(p.Quantile(0.5)) {
		t.Errorf("Plan of nothing = %+v", p)
	}
}

func TestHistQuantileEdges(t *testing.T) {
	h := Hist{Count: 10, Buckets: map[float64]float64{0.5: 0, 1: 10, 2: 10}}
	tests := []struct{ q, want float64 }{
		{0, 0.5}, // the first bucket holds rank 0 with no samples below
		{0.5, 0.75},
		{1, 1},
	}
	for _, tc := range tests {
		if got := h.Quantile(tc.q); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("Quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	// Past the buckets (an inconsistent count): the top bound.
	if got := (Hist{Count: 20, Buckets: map[float64]float64{1: 10}}).Quantile(0.99); got != 1 {
		t.Errorf("past the buckets = %v, want 1", got)
	}
	if got := (Hist{Count: 3}).Quantile(0.5); !math.IsNaN(got) {
		t.Errorf("without buckets = %v, want NaN", got)
	}
}

func TestHistString(t *testing.T) {
	for _, tc := range []struct {
		h    Hist
		want string
	}{
		{Hist{}, "-"},
		{Hist{Sum: 0.5, Count: 4}, "125.0 ms × 4"},
	} {
		if got := tc.h.String(); got != tc.want {
			t.Errorf("%+v.String() = %q, want %q", tc.h, got, tc.want)
		}
	}
}

func TestParseKey(t *testing.T) {
	name, labels := parseKey(pluginMetric + "{extension_point=Filter,plugin=Gang}")
	if name != pluginMetric || len(labels) != 2 || labels["plugin"] != "Gang" || labels["extension_point"] != "Filter" {
		t.Errorf("parseKey = %s %v", name, labels)
	}
	if name, labels := parseKey(planMetric + "{}"); name != planMetric || len(labels) != 0 {
		t.Errorf("parseKey without labels = %s %v", name, labels)
	}
}

// TestSeriesAggregates: Costs, Attempts and Requests sum a name's series
// over the labels they do not group by (statuses, profiles, codes).
func TestSeriesAggregates(t *testing.T) {
	s := Scrape{
		extensionPointMetric + "{extension_point=Filter,status=Success}":           {Sum: 0.3, Count: 3},
		extensionPointMetric + "{extension_point=Filter,status=Unschedulable}":     {Sum: 0.1, Count: 1},
		pluginMetric + "{extension_point=Filter,plugin=Gang,status=Success}":       {Sum: 0.01, Count: 2},
		pluginMetric + "{extension_point=Filter,plugin=Gang,status=Unschedulable}": {Sum: 0.03, Count: 1},
		attemptMetric + "{profile=a,result=scheduled}":                             {Count: 4},
		attemptMetric + "{profile=b,result=scheduled}":                             {Count: 6},
		requestsMetric + "{code=201,method=POST}":                                  {Count: 5},
		requestsMetric + "{code=409,method=POST}":                                  {Count: 2},
		requestsMetric + "{code=200,method=GET}":                                   {Count: 1},
	}
	points, plugins := s.Costs()
	if c := points["Filter"]; len(points) != 1 || c.Name != "Filter" || math.Abs(c.Seconds-0.4) > 1e-9 || c.Calls != 4 {
		t.Errorf("points = %+v, want Filter 0.4 s over 4 calls", points)
	}
	scale := 100.0 / PluginSamplePercent
	if c := plugins["Gang/Filter"]; len(plugins) != 1 || math.Abs(c.Seconds-0.04*scale) > 1e-9 || c.Calls != 3*scale {
		t.Errorf("plugins = %+v, want Gang/Filter 0.04 s over 3 calls, × %v", plugins, scale)
	}
	if got := s.Attempts(); len(got) != 1 || got["scheduled"] != 10 {
		t.Errorf("attempts = %v, want scheduled 10", got)
	}
	if got := s.Requests(); len(got) != 2 || got["POST"] != 7 || got["GET"] != 1 {
		t.Errorf("requests = %v, want POST 7, GET 1", got)
	}
}

func TestSubAndWithPlansEdges(t *testing.T) {
	before := Scrape{attemptMetric + "{result=error}": {Count: 2}}
	after := Scrape{
		attemptMetric + "{result=error}":     {Count: 2},
		attemptMetric + "{result=scheduled}": {Sum: 1, Count: 3},
	}
	d := after.Sub(before)
	// Unchanged series are dropped; new ones kept whole, without buckets.
	if len(d) != 1 || d[attemptMetric+"{result=scheduled}"].Count != 3 || d[attemptMetric+"{result=scheduled}"].Buckets != nil {
		t.Errorf("Sub = %+v, want the scheduled series alone", d)
	}
	// WithPlans drops a stale plan series and leaves out empty ones.
	s := Scrape{planMetric + "{result=failed}": {Count: 1}}
	s.WithPlans(Scrape{planMetric + "{result=planned}": {Count: 0}})
	if len(s) != 0 {
		t.Errorf("WithPlans = %+v, want no plan series", s)
	}
}

func TestSeriesKeySortsLabels(t *testing.T) {
	name := func(s string) *string { return &s }
	labels := []*dto.LabelPair{{Name: name("z"), Value: name("1")}, {Name: name("a"), Value: name("2")}}
	if got, want := seriesKey("m", labels), "m{a=2,z=1}"; got != want {
		t.Errorf("seriesKey = %q, want %q", got, want)
	}
	if got, want := seriesKey("m", nil), "m{}"; got != want {
		t.Errorf("seriesKey without labels = %q, want %q", got, want)
	}
}
