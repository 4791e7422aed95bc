package globalbench

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/phalanx-sched/phalanx/internal/bench/stats"
)

const baselineName = "karmada-default"

// WriteReport prints the pass cost, the simulated runs and their ratios to
// the baseline, with the command line that produced them.
func WriteReport(out io.Writer, rep Report, machine, command string) {
	o := rep.Options
	fmt.Fprintf(out, "\nGlobal tier (Karmada): %s\n", command)
	fmt.Fprintf(out, "Machine: %s. Members are stand-ins (plain GPUs, no gRPC, no API server), %d GPUs each; teams %s with weights %s.\n",
		machine, o.GPUs, teamList(len(o.Weights)), weightList(o.Weights))
	fmt.Fprintf(out, "Figures: median (min–max) over seeds 1..%d.\n", o.Runs)
	writeCosts(out, rep)
	writeSims(out, rep)
	writeRatios(out, rep)
	fmt.Fprintf(out, "\nglobal-bench took %s.\n", rep.Wall.Round(1e6))
}

func writeCosts(out io.Writer, rep Report) {
	fmt.Fprintf(out, "\nPass wall time over a fixed world (members half full, waiting jobs of every team submitted over the last hour), repeated for %v:\n", rep.Options.CostTime)
	fmt.Fprintf(out, "%-8s %-8s %-16s %-24s %-22s %-26s %-14s %s\n", "MEMBERS", "WAITING", "DISPATCHER", "ms per pass", "passes/s", "decisions/s", "dispatched", "× baseline ms")
	for _, m := range rep.Options.Members {
		for _, n := range rep.Options.Waiting {
			base := costsOf(rep, baselineName, m, n)
			for _, name := range dispatcherNames(rep) {
				cs := costsOf(rep, name, m, n)
				ms, perS, decS, disp, ratio := make([]float64, len(cs)), make([]float64, len(cs)), make([]float64, len(cs)), make([]float64, len(cs)), make([]float64, len(cs))
				for i, c := range cs {
					ms[i] = float64(c.PerPass) / 1e6
					perS[i] = 1e3 / ms[i]
					decS[i] = perS[i] * float64(c.Verdicts)
					disp[i] = float64(c.Dispatched)
					ratio[i] = math.NaN()
					if i < len(base) {
						ratio[i] = ms[i] / (float64(base[i].PerPass) / 1e6)
					}
				}
				fmt.Fprintf(out, "%-8d %-8d %-16s %-24s %-22s %-26s %-14s %s\n", m, n, name, stats.SpreadOf(ms).Format("%.2f"),
					stats.SpreadOf(perS).Format("%.0f"), stats.SpreadOf(decS).Format("%.0f"), stats.SpreadOf(disp).Format("%.0f"), stats.SpreadOf(ratio).Format("%.1f"))
			}
		}
	}
}

func writeSims(out io.Writer, rep Report) {
	o := rep.Options
	fmt.Fprintf(out, "\nSimulated runs: load %.2f of the GPUs submitted over %v (gangs of 4–32 GPUs, run times log-normal around %v), a pass every %v,\n", o.Load, o.Window, o.MedianRun, o.Tick)
	fmt.Fprintf(out, "jobs start %v after dispatch; run until every job is done. Shares: GPU-seconds while every team had a job waiting (target %s %%).\n",
		o.Delay, shareList(targets(o.Weights)))
	fmt.Fprintf(out, "%-8s %-16s %-16s %-22s %-18s %-22s %-22s %-22s %-18s %-18s %-14s %s\n", "MEMBERS", "DISPATCHER", "jobs",
		"dispatched/s of pass", "mean pass ms", "wait p50 s", "wait p99 s", "longest pass ms", "GPU util %", "util while waiting %", "shares %", "share error pp")
	for _, m := range o.Members {
		for _, name := range dispatcherNames(rep) {
			rs := simsOf(rep, name, m)
			col := func(f func(runResult) float64, verb string) string {
				v := make([]float64, len(rs))
				for i, r := range rs {
					v[i] = f(r)
				}
				return stats.SpreadOf(v).Format(verb)
			}
			fmt.Fprintf(out, "%-8d %-16s %-16s %-22s %-18s %-22s %-22s %-22s %-18s %-18s %-14s %s\n", m, name,
				col(func(r runResult) float64 { return float64(r.Jobs) }, "%.0f"),
				col(runResult.dispatchRate, "%.0f"), col(runResult.meanPassMS, "%.2f"),
				col(func(r runResult) float64 { return r.waitSeconds(0.5) }, "%.0f"),
				col(func(r runResult) float64 { return r.waitSeconds(0.99) }, "%.0f"),
				col(func(r runResult) float64 { return float64(r.LongestOne) / 1e6 }, "%.1f"),
				col(runResult.utilisation, "%.1f"), col(runResult.busyUtilisation, "%.1f"),
				shareList(medianShares(rs)), col(func(r runResult) float64 { return r.shareError(o.Weights) }, "%.1f"))
		}
	}
}

// writeRatios prints, per member count, the baseline's figure over the
// tier's, seed by seed (the same jobs), then the spread.
func writeRatios(out io.Writer, rep Report) {
	o := rep.Options
	fmt.Fprintf(out, "\nkarmada-default ÷ phalanx-global, seed by seed on the same jobs (above 1: the tier's figure is lower):\n")
	fmt.Fprintf(out, "%-8s %-22s %-22s %-22s %s\n", "MEMBERS", "share error", "wait p50", "wait p99", "util while waiting")
	for _, m := range o.Members {
		tier, base := simsOf(rep, "phalanx-global", m), simsOf(rep, baselineName, m)
		ratio := func(f func(runResult) float64) string {
			var v []float64
			for i := range min(len(tier), len(base)) {
				v = append(v, f(base[i])/f(tier[i]))
			}
			return stats.SpreadOf(v).Format("%.2f")
		}
		fmt.Fprintf(out, "%-8d %-22s %-22s %-22s %s\n", m, ratio(func(r runResult) float64 { return r.shareError(o.Weights) }),
			ratio(func(r runResult) float64 { return r.waitSeconds(0.5) }), ratio(func(r runResult) float64 { return r.waitSeconds(0.99) }),
			ratio(runResult.busyUtilisation))
	}
}

func dispatcherNames(rep Report) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range rep.Costs {
		if !seen[r.Dispatcher] {
			seen[r.Dispatcher] = true
			out = append(out, r.Dispatcher)
		}
	}
	for _, r := range rep.Sims {
		if !seen[r.Dispatcher] {
			seen[r.Dispatcher] = true
			out = append(out, r.Dispatcher)
		}
	}
	return out
}

func costsOf(rep Report, name string, members, waiting int) []costResult {
	var out []costResult
	for _, c := range rep.Costs {
		if c.Dispatcher == name && c.Members == members && c.Waiting == waiting {
			out = append(out, c)
		}
	}
	return out
}

func simsOf(rep Report, name string, members int) []runResult {
	var out []runResult
	for _, r := range rep.Sims {
		if r.Dispatcher == name && r.Members == members {
			out = append(out, r)
		}
	}
	return out
}

// medianShares is each team's median share over runs.
func medianShares(rs []runResult) []float64 {
	if len(rs) == 0 {
		return nil
	}
	out := make([]float64, len(rs[0].TeamGPUSeconds))
	for t := range out {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = r.shares()[t]
		}
		out[t] = stats.SpreadOf(v).Median
	}
	return out
}

func shareList(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%.0f", x)
	}
	return strings.Join(parts, "/")
}

func teamList(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = team(i)
	}
	return strings.Join(parts, ", ")
}

func weightList(w []int32) string {
	parts := make([]string, len(w))
	for i, x := range w {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, ":")
}
