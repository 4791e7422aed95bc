package report

import (
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/phalanx-sched/phalanx/internal/bench"
	"github.com/phalanx-sched/phalanx/internal/bench/profiles"
	"github.com/phalanx-sched/phalanx/internal/bench/scrape"
	"github.com/phalanx-sched/phalanx/internal/bench/side"
	"github.com/phalanx-sched/phalanx/internal/bench/stats"
)

// Series keys as scrape.ParseScrape writes them.
const (
	planKey    = "phalanx_gang_plan_duration_seconds{}"
	attemptKey = "scheduler_scheduling_attempt_duration_seconds{result=scheduled}"
	postKey    = "rest_client_requests_total{code=201,method=POST}"
)

func workload(t *testing.T, name string) bench.Workload {
	t.Helper()
	for _, w := range bench.Workloads(bench.DefaultSizes) {
		if w.Name == name {
			return w
		}
	}
	t.Fatalf("no %s workload", name)
	return bench.Workload{}
}

// flat is the report with its padding squeezed to single spaces.
func flat(s string) string { return strings.Join(strings.Fields(s), " ") }

func plan(ms float64) scrape.Scrape {
	return scrape.Scrape{planKey: {Sum: ms / 1000, Count: 1}}
}

// TestSubGroupReport checks the report's plan and placement goals and the
// placement lines.
func TestSubGroupReport(t *testing.T) {
	w := workload(t, "subgroups")
	whole := &bench.Placement{GangLevel: "spine", SubGroupLevel: "nvlink-clique", Gangs: 1, SubGroups: 16}
	split := &bench.Placement{GangLevel: "spine", SubGroupLevel: "nvlink-clique", Gangs: 1, SubGroups: 16, SplitGangs: 1, SplitSubGroups: 16, MaxGangDomains: 9, MaxSubGroupDomains: 16}
	r := side.Result{Workload: w, Passes: []side.Pass{
		{Scheduler: bench.Stock, Pods: 1024, Seconds: 4, Placement: split},
		{Scheduler: bench.Phalanx, Pods: 1024, Seconds: 2, Metrics: plan(30), Placement: whole},
		{Scheduler: bench.PhalanxFlat, Pods: 1024, Seconds: 2, Metrics: plan(20), Placement: whole},
	}}
	var b strings.Builder
	WriteReport(&b, []side.Result{r}, "test", 1)
	out := flat(b.String())
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
	WriteReport(&b, []side.Result{r}, "test", 1)
	if !strings.Contains(flat(b.String()), "phalanx places each whole 0/1 passes goal: every pass: NOT met") {
		t.Errorf("a split phalanx pass is not reported:\n%s", b.String())
	}
}

// TestWriteReportRatios: ratios pair passes by round; a goal whose B did
// not run says so; failed passes leave the medians and are counted.
func TestWriteReportRatios(t *testing.T) {
	r := side.Result{Workload: workload(t, "gangs"), Passes: []side.Pass{
		{Scheduler: bench.Stock, Index: 0, Pods: 6400, Seconds: 4, CPUSeconds: 6.4, PeakRSS: 100 << 20},
		{Scheduler: bench.Phalanx, Index: 0, Pods: 6400, Seconds: 2, CPUSeconds: 3.2, PeakRSS: 105 << 20},
		{Scheduler: bench.Stock, Index: 1, Pods: 6400, Seconds: 4, CPUSeconds: 6.4, PeakRSS: 100 << 20},
		{Scheduler: bench.Phalanx, Index: 1, Pods: 6400, Seconds: 1, CPUSeconds: 3.2, PeakRSS: 115 << 20},
		{Scheduler: bench.Phalanx, Index: 2, Pods: 6400, Failed: "3 of 6400 pods bound after 10m0s"},
		// The profiled pass is left out of every figure.
		{Scheduler: bench.Phalanx, Index: -1, Pods: 6400, Seconds: 100},
	}}
	var b strings.Builder
	WriteReport(&b, []side.Result{r}, "a machine", 2)
	out := flat(b.String())
	for _, want := range []string{
		"Machine: a machine. Medians of 2 timed passes",
		// 6400 pods in 2 s and in 1 s; the failed pass is 1 of 3.
		"gangs phalanx 4800 (3200–6400)",
		"1/3",
		"gangs: phalanx / stock (same pods as plain pods) 3.00 (2.00–4.00) goal ≥ 1.50: met",
		"same, by scheduler CPU per pod (stock/phalanx) 2.00",
		"peak RSS, gangs: phalanx / stock 1.10 (1.05–1.15) goal ≤ 1.20: met",
		"n/a (raw-bind not run on gangs)",
		"n/a (upstream-gang not run on gangs)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "topology") {
		t.Errorf("goals of a workload not run are printed:\n%s", out)
	}
}

// TestGoalNotMet: a ratio under its goal, and a missing plan p99, are NOT met.
func TestGoalNotMet(t *testing.T) {
	r := side.Result{Workload: workload(t, "scale"), Passes: []side.Pass{
		{Scheduler: bench.Stock, Pods: 100, Seconds: 1},
		{Scheduler: bench.Phalanx, Pods: 100, Seconds: 2},
	}}
	var b strings.Builder
	WriteReport(&b, []side.Result{r}, "m", 1)
	out := flat(b.String())
	for _, want := range []string{
		"scale: phalanx / stock 0.50 goal ≥ 1.00: NOT met",
		"scale: phalanx plan p99, seconds - goal ≤ 1.00: NOT met",
		"scale: phalanx places each required gang whole 0/0 passes goal: every pass: NOT met",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// TestRawBindRow: the raw-bind pass gets its own row, without scheduler
// figures.
func TestRawBindRow(t *testing.T) {
	r := side.Result{Workload: workload(t, "plain-pods"), Passes: []side.Pass{
		{Scheduler: bench.RawBind, Pods: 10000, Seconds: 5, EndToEnd: 5},
	}}
	var b strings.Builder
	WriteReport(&b, []side.Result{r}, "m", 1)
	if want := "plain-pods raw-bind 2000 2000 (16 clients binding straight through the binding subresource, no scheduler)"; !strings.Contains(flat(b.String()), want) {
		t.Errorf("report lacks %q:\n%s", want, b.String())
	}
}

func TestRatios(t *testing.T) {
	r := side.Result{Passes: []side.Pass{
		{Scheduler: bench.Phalanx, Pods: 10, Seconds: 1},
		{Scheduler: bench.Stock, Pods: 10, Seconds: 2},
		{Scheduler: bench.Phalanx, Pods: 10, Seconds: 1},
		// Unpaired: phalanx has a third pass, stock not.
		{Scheduler: bench.Phalanx, Pods: 10, Seconds: 5},
		{Scheduler: bench.Stock, Pods: 10, Seconds: 4},
	}}
	got := ratios(r, bench.Phalanx, bench.Stock, side.Pass.PodsPerS)
	if want := (stats.Spread{Median: 3, Min: 2, Max: 4}); got != want {
		t.Errorf("ratios = %+v, want %+v", got, want)
	}
	// A zero denominator is left out.
	zero := side.Result{Passes: []side.Pass{{Scheduler: bench.Phalanx, Pods: 10, Seconds: 1}, {Scheduler: bench.Stock}}}
	if got := ratios(zero, bench.Phalanx, bench.Stock, side.Pass.PodsPerS); !math.IsNaN(got.Median) {
		t.Errorf("ratio over a zero = %+v, want NaN", got)
	}
}

func TestPlanFigures(t *testing.T) {
	p := side.Pass{Metrics: scrape.Scrape{planKey: {Sum: 0.03, Count: 3, Buckets: map[float64]float64{0.01: 3, math.Inf(1): 3}}}}
	if got := planMS(p); math.Abs(got-10) > 1e-9 {
		t.Errorf("planMS = %v, want 10", got)
	}
	if got := planCount(p); got != 3 {
		t.Errorf("planCount = %v, want 3", got)
	}
	if got := planQuantileMS(0.5)(p); math.Abs(got-5) > 1e-9 {
		t.Errorf("p50 = %v ms, want 5 (half way up the 0–10 ms bucket)", got)
	}
	if got := planMS(side.Pass{}); !math.IsNaN(got) {
		t.Errorf("planMS without plans = %v, want NaN", got)
	}
}

func TestPlacementFigures(t *testing.T) {
	whole := &bench.Placement{Gangs: 2}
	split := &bench.Placement{Gangs: 2, SplitGangs: 1}
	w, checked, gangs, subs, last := placementFigures([]side.Pass{{Placement: whole}, {}, {Placement: split}})
	if w != 1 || checked != 2 || last != split {
		t.Errorf("whole %d of %d, last %v; want 1 of 2, the split one", w, checked, last)
	}
	if gangs != (stats.Spread{Median: 0.5, Min: 0, Max: 1}) {
		t.Errorf("split gangs %+v", gangs)
	}
	if subs.Median != 0 {
		t.Errorf("split sub-groups %+v, want 0", subs)
	}
	if _, checked, _, subs, last := placementFigures(nil); checked != 0 || last != nil || !math.IsNaN(subs.Median) {
		t.Errorf("no placements: %d checked, last %v, sub-groups %+v", checked, last, subs)
	}
}

// TestWriteCosts: time per pod by extension point, binding points apart,
// plugins extrapolated, and API requests per pod by method.
func TestWriteCosts(t *testing.T) {
	m := scrape.Scrape{
		"scheduler_framework_extension_point_duration_seconds{extension_point=Filter}":    {Sum: 0.2, Count: 100},
		"scheduler_framework_extension_point_duration_seconds{extension_point=PreBind}":   {Sum: 0.1, Count: 100},
		"scheduler_plugin_execution_duration_seconds{extension_point=Filter,plugin=Gang}": {Sum: 0.01, Count: 10},
		postKey: {Count: 200},
	}
	r := side.Result{Workload: workload(t, "plain-pods"), Passes: []side.Pass{
		{Scheduler: bench.Phalanx, Pods: 100, Metrics: m},
		{Scheduler: bench.Stock, Pods: 100, Metrics: scrape.Scrape{}},
	}}
	var b strings.Builder
	WriteDetails(&b, r)
	out := flat(b.String())
	for _, want := range []string{
		"Top costs, plain-pods",
		"API requests per pod, phalanx: POST 2.00",
		"API requests per pod, stock: not exported",
		// Columns: stock, then phalanx; µs per pod.
		"-- extension points of the scheduling cycle (one pod at a time) Filter - 2000.0",
		"PreBind - 1000.0",
		"Gang/Filter - 1000.0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("details lack %q:\n%s", want, out)
		}
	}
	cycle := out[strings.Index(out, "scheduling cycle"):strings.Index(out, "binding cycle")]
	if strings.Contains(cycle, "PreBind") {
		t.Errorf("PreBind listed with the scheduling cycle: %s", cycle)
	}
}

func TestTopNames(t *testing.T) {
	rows := map[bench.Scheduler]map[string]scrape.Cost{
		bench.Stock:   {"a": {Seconds: 1}, "b": {Seconds: 3}},
		bench.Phalanx: {"a": {Seconds: 8}, "c": {Seconds: 2}, "d": {Seconds: 2}},
	}
	pods := map[bench.Scheduler]float64{bench.Stock: 1, bench.Phalanx: 2}
	got := topNames(rows, []bench.Scheduler{bench.Stock, bench.Phalanx}, pods, 3)
	// Per pod: a 4 (phalanx), b 3, c and d 1 (by name).
	if want := []string{"a", "b", "c"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("topNames = %v, want %v", got, want)
	}
}

// TestWriteProfiles: the profiled pass's profiles, in MiB and seconds, with
// their paths and notes.
func TestWriteProfiles(t *testing.T) {
	fc := []profiles.FuncCost{{Func: "github.com/phalanx-sched/phalanx/internal/gang.Plan", Flat: 0.25, Cum: 0.5}}
	p := side.Pass{Scheduler: bench.Phalanx, Index: -1, Pods: 100, Seconds: 1,
		CPU:  &profiles.Top{Kind: "cpu", Total: 2e9, Unit: "nanoseconds", Flat: fc, Cum: fc, Own: fc, Path: "/p/cpu.pb.gz", Note: "1 of 5 2s windows lost"},
		Heap: &profiles.Top{Kind: "heap", Total: 3 << 20, Unit: "bytes", Flat: fc}}
	r := side.Result{Workload: workload(t, "plain-pods"), Passes: []side.Pass{p}}
	var b strings.Builder
	WriteDetails(&b, r)
	out := flat(b.String())
	for _, want := range []string{
		"Profile of CPU, plain-pods, phalanx: 2.00 s in total (profiled pass: 100 pods/s); go tool pprof /p/cpu.pb.gz; 1 of 5 2s windows lost",
		"25.0% 50.0% internal/gang.Plan",
		"phalanx functions by cum",
		"Profile of heap in use at the end, plain-pods, phalanx: 3.00 MiB in total",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("profiles lack %q:\n%s", want, out)
		}
	}
}

// TestRawBindGoals: phalanx against the raw bind rate, measured and from
// process start, with no CPU comparison (raw bind has no scheduler).
func TestRawBindGoals(t *testing.T) {
	r := side.Result{Workload: workload(t, "gangs"), Passes: []side.Pass{
		// Raw bind: 6400 pods in 1 s, 2 s from start; phalanx in 2 s, 4 s.
		{Scheduler: bench.RawBind, Pods: 6400, Seconds: 1, EndToEnd: 2},
		{Scheduler: bench.Phalanx, Pods: 6400, Seconds: 2, EndToEnd: 4, CPUSeconds: 1},
	}}
	var b strings.Builder
	WriteReport(&b, []side.Result{r}, "m", 1)
	out := flat(b.String())
	for _, want := range []string{
		"gangs: phalanx / raw bind 0.50 goal ≥ 0.50: met",
		"gangs: phalanx / raw bind, from process start 0.50 goal ≥ 0.50: met",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "same, by scheduler CPU per pod (raw-bind") {
		t.Errorf("a CPU ratio against raw bind is printed:\n%s", out)
	}
	// gangs asks for no level: no placement section.
	if strings.Contains(out, "Placement of the timed passes") {
		t.Errorf("placements printed for a workload without a required level:\n%s", out)
	}
}

// TestPlanP99Met: the scale workload's p99 plan time, in seconds, against
// its one-second goal.
func TestPlanP99Met(t *testing.T) {
	// One plan in the 0–0.5 s bucket: p99 is 0.99 of the way up it.
	m := scrape.Scrape{planKey: {Sum: 0.3, Count: 1, Buckets: map[float64]float64{0.5: 1, math.Inf(1): 1}}}
	r := side.Result{Workload: workload(t, "scale"), Passes: []side.Pass{
		{Scheduler: bench.Phalanx, Pods: 100, Seconds: 1, Metrics: m},
	}}
	var b strings.Builder
	WriteReport(&b, []side.Result{r}, "m", 1)
	if want := "scale: phalanx plan p99, seconds 0.495 goal ≤ 1.00: met"; !strings.Contains(flat(b.String()), want) {
		t.Errorf("report lacks %q:\n%s", want, b.String())
	}
}

func TestCyclePoints(t *testing.T) {
	rows := map[bench.Scheduler]map[string]scrape.Cost{
		bench.Phalanx: {"PreFilter": {Seconds: 1}, "Filter": {Seconds: 2}, "PreBind": {Seconds: 3}, "Bind": {Seconds: 4}},
		bench.Stock:   {"WaitOnPermit": {Seconds: 5}},
	}
	for _, tc := range []struct {
		cycle bool
		want  map[bench.Scheduler]string
	}{
		{true, map[bench.Scheduler]string{bench.Phalanx: "Filter,PreFilter", bench.Stock: ""}},
		{false, map[bench.Scheduler]string{bench.Phalanx: "Bind,PreBind", bench.Stock: "WaitOnPermit"}},
	} {
		got := cyclePoints(rows, tc.cycle)
		for s, want := range tc.want {
			names := make([]string, 0, len(got[s]))
			for n := range got[s] {
				names = append(names, n)
			}
			sort.Strings(names)
			if strings.Join(names, ",") != want {
				t.Errorf("cyclePoints(cycle=%v)[%s] = %v, want %s", tc.cycle, s, names, want)
			}
		}
	}
}

func TestFind(t *testing.T) {
	results := []side.Result{{Workload: bench.Workload{Name: "a"}}, {Workload: bench.Workload{Name: "b"}}}
	if got := find(results, "b"); got != &results[1] {
		t.Errorf("find b = %v, want the second result", got)
	}
	if got := find(results, "c"); got != nil {
		t.Errorf("find c = %v, want nil", got)
	}
}
