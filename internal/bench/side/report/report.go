// Package report prints the side-by-side engine's results: the throughput
// table, the ratios of issue 13's goals, placements, where scheduler time
// goes and the profiles' top functions.
package report

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/phalanx-sched/phalanx/internal/bench"
	"github.com/phalanx-sched/phalanx/internal/bench/profiles"
	"github.com/phalanx-sched/phalanx/internal/bench/scrape"
	"github.com/phalanx-sched/phalanx/internal/bench/side"
	"github.com/phalanx-sched/phalanx/internal/bench/stats"
)

func figures(passes []side.Pass, f func(side.Pass) float64) stats.Spread {
	v := make([]float64, len(passes))
	for i, p := range passes {
		v[i] = f(p)
	}
	return stats.SpreadOf(v)
}

// ratios pairs the timed passes of a and b by index (same round, same API
// server) and summarises f(a)/f(b).
func ratios(r side.Result, a, b bench.Scheduler, f func(side.Pass) float64) stats.Spread {
	pa, pb := r.Timed(a), r.Timed(b)
	var v []float64
	for i := 0; i < len(pa) && i < len(pb); i++ {
		if d := f(pb[i]); d > 0 {
			v = append(v, f(pa[i])/d)
		}
	}
	return stats.SpreadOf(v)
}

func planMS(p side.Pass) float64 {
	h := p.Metrics.Plan()
	if h.Count == 0 {
		return math.NaN()
	}
	return h.Sum / h.Count * 1000
}

func planCount(p side.Pass) float64 { return p.Metrics.Plan().Count }

// planQuantileMS is the q-quantile of a pass's gang plan times, in ms.
func planQuantileMS(q float64) func(side.Pass) float64 {
	return func(p side.Pass) float64 { return p.Metrics.Plan().Quantile(q) * 1000 }
}

// Goal is a target of issue 13: a ratio of two schedulers on a workload.
type Goal struct {
	Workload string
	What     string
	A, B     bench.Scheduler
	// Metric is "pods/s" (A/B of throughput, goal ≥ Min), "end-to-end
	// pods/s" (the same from process start), "rss" (A/B of
	// peak RSS, goal ≤ Max), "plan" (A/B of the mean plan time, goal ≤ Max)
	// or "placement" (every timed pass of A placed every gang, and
	// sub-group, whole in one domain of its level; B unused).
	Metric   string
	Min, Max float64
}

// Goals are the ratios issue 13 asks for, raised by issue 31 (gangs and
// topology at 1.5× stock, plain pods at par, peak RSS within 1.2× stock on
// every workload, gang members at half the raw bind rate), with DRA gangs'
// (issue 18) and sub-groups' goals.
var Goals = []Goal{
	{Workload: "gangs", What: "gangs: phalanx / stock (same pods as plain pods)", A: bench.Phalanx, B: bench.Stock, Metric: "pods/s", Min: 1.5},
	{Workload: "topology", What: "topology gang: phalanx / stock", A: bench.Phalanx, B: bench.Stock, Metric: "pods/s", Min: 1.5},
	{Workload: "plain-pods", What: "plain pods: phalanx / stock", A: bench.Phalanx, B: bench.Stock, Metric: "pods/s", Min: 1.0},
	{Workload: "gangs", What: "gangs: phalanx / raw bind", A: bench.Phalanx, B: bench.RawBind, Metric: "pods/s", Min: 0.5},
	{Workload: "gangs", What: "gangs: phalanx / raw bind, from process start", A: bench.Phalanx, B: bench.RawBind, Metric: "end-to-end pods/s", Min: 0.5},
	{Workload: "topology", What: "topology gang: phalanx / raw bind", A: bench.Phalanx, B: bench.RawBind, Metric: "pods/s", Min: 0.5},
	{Workload: "topology", What: "topology gang: phalanx / raw bind, from process start", A: bench.Phalanx, B: bench.RawBind, Metric: "end-to-end pods/s", Min: 0.5},
	{Workload: "gangs", What: "gangs: phalanx / upstream GangScheduling", A: bench.Phalanx, B: bench.UpstreamGang, Metric: "pods/s", Min: 1.5},
	{Workload: "topology", What: "topology gang: phalanx / upstream TopologyPlacement", A: bench.Phalanx, B: bench.UpstreamGang, Metric: "pods/s", Min: 1.5},
	{Workload: "dra-gangs", What: "DRA gangs: phalanx / stock", A: bench.Phalanx, B: bench.Stock, Metric: "pods/s", Min: 1.0},
	{Workload: "dra-gangs", What: "DRA gangs: phalanx / upstream GangScheduling", A: bench.Phalanx, B: bench.UpstreamGang, Metric: "pods/s", Min: 1.5},
	{Workload: "plain-pods", What: "peak RSS, plain-pods: phalanx / stock", A: bench.Phalanx, B: bench.Stock, Metric: "rss", Max: 1.2},
	{Workload: "gangs", What: "peak RSS, gangs: phalanx / stock", A: bench.Phalanx, B: bench.Stock, Metric: "rss", Max: 1.2},
	{Workload: "topology", What: "peak RSS, topology: phalanx / stock", A: bench.Phalanx, B: bench.Stock, Metric: "rss", Max: 1.2},
	{Workload: "queues", What: "peak RSS, queues: phalanx / stock", A: bench.Phalanx, B: bench.Stock, Metric: "rss", Max: 1.2},
	{Workload: "dra-gangs", What: "peak RSS, dra-gangs: phalanx / stock", A: bench.Phalanx, B: bench.Stock, Metric: "rss", Max: 1.2},
	{Workload: "subgroups", What: "peak RSS, subgroups: phalanx / stock", A: bench.Phalanx, B: bench.Stock, Metric: "rss", Max: 1.2},
	{Workload: "subgroups", What: "sub-groups: phalanx / stock", A: bench.Phalanx, B: bench.Stock, Metric: "pods/s", Min: 1.0},
	{Workload: "subgroups", What: "sub-groups: plan ms, phalanx / phalanx-flat", A: bench.Phalanx, B: bench.PhalanxFlat, Metric: "plan", Max: 2.0},
	{Workload: "subgroups", What: "sub-groups: phalanx places each whole", A: bench.Phalanx, Metric: "placement"},
	{Workload: "topology", What: "topology gang: phalanx places it whole", A: bench.Phalanx, Metric: "placement"},
	{Workload: "scale", What: "scale: phalanx / stock", A: bench.Phalanx, B: bench.Stock, Metric: "pods/s", Min: 1.0},
	{Workload: "scale", What: "peak RSS, scale: phalanx / stock", A: bench.Phalanx, B: bench.Stock, Metric: "rss", Max: 1.2},
	{Workload: "scale", What: "scale: phalanx plan p99, seconds", A: bench.Phalanx, Metric: "plan p99", Max: 1.0},
	{Workload: "scale", What: "scale: phalanx places each required gang whole", A: bench.Phalanx, Metric: "placement"},
}

// WriteReport prints the throughput table and the ratios of the goals.
func WriteReport(out io.Writer, results []side.Result, machine string, runs int) {
	fmt.Fprintf(out, "\nMachine: %s. Medians of %d timed passes (min–max); every figure of a workload from one API server.\n", machine, runs)
	fmt.Fprintf(out, "pods/s counts from the scheduler's readiness (informers synced; or its first bind, if earlier) to the last bind,\n")
	fmt.Fprintf(out, "end-to-end from process start to the last bind; CPU is the scheduler process's.\n\n")
	fmt.Fprintf(out, "%-11s %-14s %-20s %-20s %-18s %-16s %-18s %-18s %-14s %-6s %s\n", "WORKLOAD", "SCHEDULER", "pods/s", "end-to-end pods/s", "CPU ms/pod", "peak RSS MiB", "attempts/pod", "API requests/pod", "start s", "failed", "plan ms (plans)")
	for _, r := range results {
		for _, s := range r.Workload.Passes() {
			all := r.Timed(s)
			if len(all) == 0 {
				continue
			}
			if s == bench.RawBind {
				fmt.Fprintf(out, "%-11s %-14s %-20s %-20s (%d clients binding straight through the binding subresource, no scheduler)\n", r.Workload.Name, s,
					figures(all, side.Pass.PodsPerS).Format("%.0f"), figures(all, side.Pass.EndToEndPodsPerS).Format("%.0f"), bench.RawBindWorkers)
				continue
			}
			var passes []side.Pass
			for _, p := range all {
				if p.Failed == "" {
					passes = append(passes, p)
				}
			}
			plan := "-"
			if sp := figures(passes, planMS); !math.IsNaN(sp.Median) {
				plan = sp.Format("%.1f") + " (" + figures(passes, planCount).Format("%.0f") + ")" +
					"; p50 " + figures(passes, planQuantileMS(0.5)).Format("%.1f") + ", p99 " + figures(passes, planQuantileMS(0.99)).Format("%.1f")
			}
			fmt.Fprintf(out, "%-11s %-14s %-20s %-20s %-18s %-16s %-18s %-18s %-14s %-6s %s\n", r.Workload.Name, s,
				figures(passes, side.Pass.PodsPerS).Format("%.0f"),
				figures(passes, side.Pass.EndToEndPodsPerS).Format("%.0f"),
				figures(passes, side.Pass.CPUPerPod).Format("%.2f"),
				figures(all, func(p side.Pass) float64 { return p.PeakRSS / (1 << 20) }).Format("%.0f"),
				figures(all, side.Pass.AttemptsPerPod).Format("%.2f"),
				figures(all, side.Pass.RequestsPerPod).Format("%.1f"),
				figures(passes, func(p side.Pass) float64 { return p.Startup }).Format("%.1f"),
				fmt.Sprintf("%d/%d", len(all)-len(passes), len(all)),
				plan)
		}
	}
	writePlacements(out, results)
	fmt.Fprintf(out, "\nRatios, pass by pass (median, min–max):\n")
	for _, g := range Goals {
		r := find(results, g.Workload)
		if r == nil {
			continue
		}
		var sp stats.Spread
		goal := ""
		switch g.Metric {
		case "placement":
			whole, checked, _, _, _ := placementFigures(r.Timed(g.A))
			met := "met"
			if checked == 0 || whole < checked {
				met = "NOT met"
			}
			fmt.Fprintf(out, "  %-58s %-20s goal: every pass: %s\n", g.What, fmt.Sprintf("%d/%d passes", whole, checked), met)
			continue
		case "plan p99":
			sp = figures(r.Timed(g.A), func(p side.Pass) float64 { return p.Metrics.Plan().Quantile(0.99) })
			met := "met"
			if math.IsNaN(sp.Median) || sp.Median > g.Max {
				met = "NOT met"
			}
			fmt.Fprintf(out, "  %-58s %-20s goal ≤ %.2f: %s\n", g.What, sp.Format("%.3f"), g.Max, met)
			continue
		case "rss":
			sp = ratios(*r, g.A, g.B, func(p side.Pass) float64 { return p.PeakRSS })
			goal = fmt.Sprintf("goal ≤ %.2f", g.Max)
		case "plan":
			sp = ratios(*r, g.A, g.B, planMS)
			goal = fmt.Sprintf("goal ≤ %.2f", g.Max)
		case "end-to-end pods/s":
			sp = ratios(*r, g.A, g.B, side.Pass.EndToEndPodsPerS)
			goal = fmt.Sprintf("goal ≥ %.2f", g.Min)
		default:
			sp = ratios(*r, g.A, g.B, side.Pass.PodsPerS)
			goal = fmt.Sprintf("goal ≥ %.2f", g.Min)
		}
		if len(r.Timed(g.B)) == 0 {
			fmt.Fprintf(out, "  %-58s n/a (%s not run on %s)\n", g.What+" ("+r.Workload.Describe()+")", g.B, g.Workload)
			continue
		}
		met := "met"
		if math.IsNaN(sp.Median) || (g.Max > 0 && sp.Median > g.Max) || (g.Max == 0 && sp.Median < g.Min) {
			met = "NOT met"
		}
		fmt.Fprintf(out, "  %-58s %-20s %s: %s\n", g.What, sp.Format("%.2f"), goal, met)
		if g.Metric == "pods/s" && g.B != bench.RawBind {
			cpu := ratios(*r, g.B, g.A, side.Pass.CPUPerPod)
			fmt.Fprintf(out, "  %-58s %s\n", "  same, by scheduler CPU per pod ("+string(g.B)+"/"+string(g.A)+")", cpu.Format("%.2f"))
		}
	}
}

// writePlacements prints, for workloads with a required level, where each
// scheduler's timed passes put the gangs and sub-groups.
func writePlacements(out io.Writer, results []side.Result) {
	header := false
	for _, r := range results {
		if r.Workload.RequiredLevel == "" {
			continue
		}
		for _, s := range r.Workload.Schedulers() {
			whole, checked, gangs, subs, last := placementFigures(r.Timed(s))
			if checked == 0 {
				continue
			}
			if !header {
				fmt.Fprintf(out, "\nPlacement of the timed passes (split: spanning more than one domain of the level; median (min–max) per pass):\n")
				header = true
			}
			line := fmt.Sprintf("  %-11s %-14s whole in %d/%d passes; split gangs %s of %d (level %s)", r.Workload.Name, s, whole, checked, gangs.Format("%.0f"), last.Gangs, last.GangLevel)
			if last.SubGroups > 0 {
				line += fmt.Sprintf("; split sub-groups %s of %d (level %s)", subs.Format("%.0f"), last.SubGroups, last.SubGroupLevel)
			}
			fmt.Fprintf(out, "%s; last pass: %s\n", line, last)
		}
	}
}

// WriteDetails prints a workload's top costs and, for profiled runs, the
// profiles' top functions.
func WriteDetails(out io.Writer, r side.Result) {
	writeCosts(out, r)
	writeProfiles(out, r)
}

func find(results []side.Result, name string) *side.Result {
	for i := range results {
		if results[i].Workload.Name == name {
			return &results[i]
		}
	}
	return nil
}

// writeCosts prints, per extension point and per plugin, the scheduler time
// spent per pod, summed over the timed passes: where the time goes.
func writeCosts(out io.Writer, r side.Result) {
	scheds := r.Workload.Schedulers()
	points := map[bench.Scheduler]map[string]scrape.Cost{}
	plugins := map[bench.Scheduler]map[string]scrape.Cost{}
	pods := map[bench.Scheduler]float64{}
	for _, s := range scheds {
		sum := scrape.Scrape{}
		for _, p := range r.Timed(s) {
			sum.Add(p.Metrics)
			pods[s] += float64(p.Pods)
		}
		points[s], plugins[s] = sum.Costs()
	}
	fmt.Fprintf(out, "\nTop costs, %s (%s): scheduler time per pod, µs, all timed passes\n", r.Workload.Name, r.Workload.Describe())
	for _, s := range scheds {
		req := scrape.Scrape{}
		for _, p := range r.Timed(s) {
			req.Add(p.Metrics)
		}
		if pods[s] == 0 {
			continue
		}
		methods := req.Requests()
		var parts []string
		for _, m := range []string{"POST", "PATCH", "PUT", "GET", "DELETE"} {
			if methods[m] > 0 {
				parts = append(parts, fmt.Sprintf("%s %.2f", m, methods[m]/pods[s]))
			}
		}
		if len(parts) == 0 {
			parts = []string{"not exported (no rest_client_requests_total in its /metrics)"}
		}
		fmt.Fprintf(out, "  API requests per pod, %-13s %s\n", s+":", strings.Join(parts, ", "))
	}
	header := fmt.Sprintf("  %-44s", "extension point / plugin")
	for _, s := range scheds {
		header += fmt.Sprintf(" %14s", s)
	}
	fmt.Fprintln(out, header)
	for _, table := range []struct {
		title string
		rows  map[bench.Scheduler]map[string]scrape.Cost
		n     int
	}{{"extension points of the scheduling cycle (one pod at a time)", cyclePoints(points, true), 10},
		{"extension points of the binding cycle (goroutine per pod, in parallel: wall time, not a bound)", cyclePoints(points, false), 5},
		{"plugins (sampled cycles × 10)", plugins, 16}} {
		fmt.Fprintf(out, "  -- %s\n", table.title)
		for _, name := range topNames(table.rows, scheds, pods, table.n) {
			line := fmt.Sprintf("  %-44s", name)
			for _, s := range scheds {
				c, ok := table.rows[s][name]
				if !ok || pods[s] == 0 {
					line += fmt.Sprintf(" %14s", "-")
					continue
				}
				line += fmt.Sprintf(" %14.1f", c.Seconds/pods[s]*1e6)
			}
			fmt.Fprintln(out, line)
		}
	}
}

// bindingPoints run in the binding goroutines, per pod in parallel.
var bindingPoints = map[string]bool{"WaitOnPermit": true, "PreBindPreFlight": true, "PreBind": true, "Bind": true, "PostBind": true}

// cyclePoints keeps the extension points of the scheduling cycle (or, with
// cycle false, of the binding cycle).
func cyclePoints(rows map[bench.Scheduler]map[string]scrape.Cost, cycle bool) map[bench.Scheduler]map[string]scrape.Cost {
	out := map[bench.Scheduler]map[string]scrape.Cost{}
	for s, m := range rows {
		out[s] = map[string]scrape.Cost{}
		for name, c := range m {
			if bindingPoints[name] != cycle {
				out[s][name] = c
			}
		}
	}
	return out
}

// topNames orders rows by their largest per-pod cost over the schedulers.
func topNames(rows map[bench.Scheduler]map[string]scrape.Cost, scheds []bench.Scheduler, pods map[bench.Scheduler]float64, n int) []string {
	best := map[string]float64{}
	for _, s := range scheds {
		for name, c := range rows[s] {
			if pods[s] > 0 {
				best[name] = math.Max(best[name], c.Seconds/pods[s])
			}
		}
	}
	names := make([]string, 0, len(best))
	for name := range best {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		if best[names[i]] != best[names[j]] {
			return best[names[i]] > best[names[j]]
		}
		return names[i] < names[j]
	})
	if len(names) > n {
		names = names[:n]
	}
	return names
}

func writeProfiles(out io.Writer, r side.Result) {
	for _, s := range r.Workload.Schedulers() {
		p := r.Profiled(s)
		if p == nil {
			continue
		}
		for _, top := range []*profiles.Top{p.StartupCPU, p.CPU, p.Block, p.Heap, p.PeakHeap} {
			if top == nil {
				continue
			}
			unit := top.Unit
			total := top.Total
			switch unit {
			case "nanoseconds":
				unit, total = "s", total/1e9
			case "bytes":
				unit, total = "MiB", total/(1<<20)
			}
			what := map[string]string{"cpu": "CPU", "lock": "lock waits (block profile, samples waiting on a mutex)", "heap": "heap in use at the end", "heap-peak": "heap in use at its peak (the largest of the heap profiles taken every 2 s)",
				"startup": "CPU from process start to readiness (its last 2 s window may reach past it)"}[top.Kind]
			fmt.Fprintf(out, "\nProfile of %s, %s, %s: %.2f %s in total (profiled pass: %.0f pods/s)", what, r.Workload.Name, s, total, unit, p.PodsPerS())
			if top.Path != "" {
				fmt.Fprintf(out, "; go tool pprof %s", top.Path)
			}
			if top.Note != "" {
				fmt.Fprintf(out, "; %s", top.Note)
			}
			fmt.Fprintln(out)
			fmt.Fprintf(out, "  %-6s %-6s %s\n", "flat%", "cum%", "top functions by flat")
			for _, f := range top.Flat {
				fmt.Fprintf(out, "  %5.1f%% %5.1f%% %s\n", f.Flat*100, f.Cum*100, profiles.ShortFunc(f.Func))
			}
			fmt.Fprintf(out, "  %-6s %-6s %s\n", "flat%", "cum%", "top functions by cum (outside runtime, sync, wait loops)")
			for _, f := range top.Cum {
				fmt.Fprintf(out, "  %5.1f%% %5.1f%% %s\n", f.Flat*100, f.Cum*100, profiles.ShortFunc(f.Func))
			}
			if len(top.Own) > 0 {
				fmt.Fprintf(out, "  %-6s %-6s %s\n", "flat%", "cum%", "phalanx functions by cum")
				for _, f := range top.Own {
					fmt.Fprintf(out, "  %5.1f%% %5.1f%% %s\n", f.Flat*100, f.Cum*100, profiles.ShortFunc(f.Func))
				}
			}
		}
	}
}

// placementFigures summarises a scheduler's placements over its passes:
// how many passes placed everything whole, and the split counts.
func placementFigures(passes []side.Pass) (whole, checked int, splitGangs, splitSubGroups stats.Spread, last *bench.Placement) {
	var gangs, subs []float64
	for _, p := range passes {
		if p.Placement == nil {
			continue
		}
		checked++
		if p.Placement.Whole() {
			whole++
		}
		gangs = append(gangs, float64(p.Placement.SplitGangs))
		subs = append(subs, float64(p.Placement.SplitSubGroups))
		last = p.Placement
	}
	splitGangs, splitSubGroups = stats.SpreadOf(gangs), stats.SpreadOf(subs)
	if len(subs) == 0 {
		splitSubGroups = stats.Spread{Median: math.NaN(), Min: math.NaN(), Max: math.NaN()}
	}
	return whole, checked, splitGangs, splitSubGroups, last
}
