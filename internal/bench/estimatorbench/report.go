package estimatorbench

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/phalanx-sched/phalanx/internal/bench/profiles"
	"github.com/phalanx-sched/phalanx/internal/bench/stats"
)

// WriteReport prints the cases' answers and latencies, with the
// command line that produced them.
func WriteReport(out io.Writer, rep Report, machine, command string) {
	fmt.Fprintf(out, "\nKarmada estimator latency: %s\n", command)
	fmt.Fprintf(out, "Machine: %s. Member: %d nodes (32 CPU, 256Gi, 8 GPUs; %d IB clusters of %d nodes, leaves of %d; NodeResourceTopology policy none),\n",
		machine, rep.Nodes, (rep.Nodes+IBSize-1)/IBSize, IBSize, LeafSize)
	fmt.Fprintf(out, "%d pods bound taking %d of %d GPUs (%.0f%%). Set: 1 master + %d workers. %d timed calls per case after one warm-up, each under a %v timeout;\n",
		rep.FillPods, rep.UsedGPUs, rep.GPUs, 100*float64(rep.UsedGPUs)/math.Max(float64(rep.GPUs), 1), rep.GangSize-1, rep.Runs, rep.Timeout)
	fmt.Fprintf(out, "client: gRPC round trip over TLS as karmada-scheduler sees it; server: the estimator's phalanx_estimator_duration_seconds;\n")
	fmt.Fprintf(out, "CPU: the scheduler process's CPU time over the call (10 ms ticks; all goroutines: probes in parallel, GC).\n\n")
	fmt.Fprintf(out, "%-9s %-8s %-8s %-26s %-8s %-26s %-8s %-10s %-9s %s\n", "CASE", "ANSWER", "SANE", "client ms median (min–max)", "p95", "server ms median (min–max)", "p95", "CPU ms", "timeouts", "goal")
	for _, c := range rep.Cases {
		cl, sv := stats.LatencyOf(c.ClientMS), stats.LatencyOf(c.ServerMS)
		goal := "-"
		if c.Gang() {
			goal = fmt.Sprintf("p95 ≤ %.0f ms: met", GoalMS)
			if !(cl.P95 <= GoalMS) || c.Timeouts > 0 {
				goal = fmt.Sprintf("p95 ≤ %.0f ms: NOT met", GoalMS)
			}
		}
		answer := "-"
		if len(c.Answers) > 0 {
			answer = strconv.Itoa(int(c.Answer))
		}
		fmt.Fprintf(out, "%-9s %-8s %-8s %-26s %-8s %-26s %-8s %-10s %-9s %s\n", c.Name, answer, c.Want,
			msSpread(cl), msFmt(cl.P95), msSpread(sv), msFmt(sv.P95), msFmt(stats.LatencyOf(c.CPUMS).Median), fmt.Sprintf("%d/%d", c.Timeouts, rep.Runs), goal)
	}
	for _, c := range rep.Cases {
		if c.Failed != "" {
			fmt.Fprintf(out, "  %s FAILED: %s\n", c.Name, c.Failed)
		}
	}
	fmt.Fprintln(out)
	for _, c := range rep.Cases {
		fmt.Fprintf(out, "  %-9s %s\n", c.Name, c.What)
	}
	fmt.Fprintf(out, "\nSetup (cluster, nodes, pods, scheduler, first full answer) %s; whole run %s; scheduler peak RSS %.0f MiB.\n",
		rep.Setup.Round(time.Second), rep.Wall.Round(time.Second), rep.PeakRSS/(1<<20))
	for _, c := range rep.Cases {
		if c.CPU == nil {
			continue
		}
		top := c.CPU
		fmt.Fprintf(out, "\nCPU profile of the scheduler, case %s: %.2f s in total (%s)", c.Name, top.Total/1e9, top.Note)
		if top.Path != "" {
			fmt.Fprintf(out, "; go tool pprof %s", top.Path)
		}
		fmt.Fprintln(out)
		fmt.Fprintf(out, "  %-6s %-6s %s\n", "flat%", "cum%", "top functions by flat")
		for _, f := range profiles.Head(top.Flat, 12) {
			fmt.Fprintf(out, "  %5.1f%% %5.1f%% %s\n", f.Flat*100, f.Cum*100, profiles.ShortFunc(f.Func))
		}
		fmt.Fprintf(out, "  %-6s %-6s %s\n", "flat%", "cum%", "phalanx functions by cum")
		for _, f := range top.Own {
			fmt.Fprintf(out, "  %5.1f%% %5.1f%% %s\n", f.Flat*100, f.Cum*100, profiles.ShortFunc(f.Func))
		}
	}
}

func msSpread(l stats.Latency) string {
	if math.IsNaN(l.Median) {
		return "-"
	}
	return fmt.Sprintf("%.1f (%.1f–%.1f)", l.Median, l.Min, l.Max)
}

func msFmt(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.1f", v)
}
