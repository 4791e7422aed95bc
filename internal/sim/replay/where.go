package replay

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/phalanx-sched/phalanx/internal/sim"
	"github.com/phalanx-sched/phalanx/internal/sim/metrics"
)

// Where the idle GPUs were while jobs waited, and what the longest waits
// waited for: the report's breakdown where useful allocation or the wait
// falls short (issue 30's goals).

// DomainIdle is one domain's GPUs and its mean free GPUs while jobs waited.
type DomainIdle struct {
	Level, Domain string
	GPUs          int64
	Idle          float64
}

// JobWait is one job's wait and what it waited for: the parts of its
// judged waiting time by cause (WaitCause), and the scheduler's word that
// held it longest while the room was there ("" if never).
type JobWait struct {
	Key                string
	Pods               int
	GPUsPerPod         int64
	Level              string
	Wait               float64 // trace seconds
	Causes             map[string]float64
	HeldBy             string
	Started, Restarted bool
}

// outcome says whether the job started: "started", "never started", or
// "restarted" after evictions.
func (j JobWait) outcome() string {
	switch {
	case !j.Started:
		return "never started"
	case j.Restarted:
		return "restarted"
	}
	return "started"
}

// longestWaitLines bounds the jobs listed per run.
const longestWaitLines = 10

// idleByDomain is each domain's mean free GPUs over the samples while jobs
// waited, in the network's level order, then by domain name.
func (tr TraceRun) idleByDomain(at []time.Duration, waiting []bool) []DomainIdle {
	r := tr.Result
	if len(r.Scenario.Network) == 0 {
		return nil
	}
	mean := meanWhile(r.Samples, at, r.Elapsed, waiting, func(x sim.Sample) map[string]int { return x.IdleGPU })
	var out []DomainIdle
	for _, l := range r.Scenario.Network {
		gpus := map[string]int64{}
		for _, n := range r.Nodes {
			if !n.Tainted {
				gpus[n.Labels[l.NodeLabel]] += n.GPUs
			}
		}
		names := make([]string, 0, len(gpus))
		for d := range gpus {
			names = append(names, d)
		}
		sort.Strings(names)
		for _, d := range names {
			out = append(out, DomainIdle{Level: l.Name, Domain: d, GPUs: gpus[d], Idle: mean[metrics.DomainKey(l.Name, d)]})
		}
	}
	return out
}

// longestWaits lists the jobs that waited longest (a job never started
// waits until the end), at most longestWaitLines, longest first.
func (tr TraceRun) longestWaits() []JobWait {
	r := tr.Result
	var out []JobWait
	for _, j := range r.Jobs {
		w := JobWait{Key: j.Job.Key(), Pods: j.Job.Replicas, GPUsPerPod: j.Job.GPUs, Level: j.Job.RequiredLevel(),
			Wait: j.WaitUntil(r.Elapsed).Seconds() * tr.Speed, Started: j.Ran(), Restarted: j.RestartedAt > 0}
		w.Causes = durationShares(j.WaitedBy)
		var held time.Duration
		for word, d := range j.HeldBy {
			if d > held || d == held && word < w.HeldBy {
				w.HeldBy, held = word, d
			}
		}
		out = append(out, w)
	}
	sort.SliceStable(out, func(a, b int) bool {
		if out[a].Wait != out[b].Wait {
			return out[a].Wait > out[b].Wait
		}
		return out[a].Key < out[b].Key
	})
	return out[:min(len(out), longestWaitLines)]
}

// durationShares is each key's part of the durations' sum (nil if zero).
func durationShares(m map[string]time.Duration) map[string]float64 {
	var total time.Duration
	for _, d := range m {
		total += d
	}
	if total == 0 {
		return nil
	}
	out := make(map[string]float64, len(m))
	for k, d := range m {
		out[k] = float64(d) / float64(total)
	}
	return out
}

// causeParts formats shares of metrics.WaitCauses in report order.
func causeParts(shares map[string]float64) string {
	parts := make([]string, len(metrics.WaitCauses))
	for i, c := range metrics.WaitCauses {
		parts[i] = fmt.Sprintf("%.0f%%", 100*shares[c])
	}
	return strings.Join(parts, " / ")
}

// domainsPerLine bounds the domains printed on one line of the text.
const domainsPerLine = 8

// writeWhere prints, per run, where the idle GPUs were while jobs waited
// and what the longest waits waited for.
func writeWhere(w io.Writer, sums []TraceSummary) {
	for _, s := range sums {
		if len(s.IdleByDomain) > 0 {
			fmt.Fprintf(w, "\n%s: where the idle GPUs were while jobs waited (mean free GPUs / the domain's GPUs):\n", s.Scheduler)
			writeIdle(w, s.IdleByDomain)
		}
		if len(s.LongestWaits) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s: the longest waits, and what each waited for (parts of its waited time):\n", s.Scheduler)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "  JOB\tPODS × GPUs\tREQUIRED\tWAIT (s)\t%s\tROOM HELD LONGEST BY\n", strings.ToUpper(strings.Join(metrics.WaitCauses, " / ")))
		for _, j := range s.LongestWaits {
			wait := fmt.Sprintf("%.0f", j.Wait)
			if o := j.outcome(); o != "started" {
				wait += ", " + o
			}
			fmt.Fprintf(tw, "  %s\t%d × %d\t%s\t%s\t%s\t%s\n", j.Key, j.Pods, j.GPUsPerPod, orDash(j.Level), wait, causeParts(j.Causes), orDash(j.HeldBy))
		}
		tw.Flush()
	}
}

// writeIdle prints the domains a level to a line, domainsPerLine at most.
func writeIdle(w io.Writer, idle []DomainIdle) {
	for first := 0; first < len(idle); {
		level, end := idle[first].Level, first
		for end < len(idle) && idle[end].Level == level {
			end++
		}
		for i := first; i < end; i += domainsPerLine {
			label := ""
			if i == first {
				label = level
			}
			var parts []string
			for _, d := range idle[i:min(i+domainsPerLine, end)] {
				parts = append(parts, fmt.Sprintf("%s %.1f/%d", d.Domain, d.Idle, d.GPUs))
			}
			fmt.Fprintf(w, "  %-12s %s\n", label, strings.Join(parts, ", "))
		}
		first = end
	}
}

// orDash writes "-" for nothing.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
