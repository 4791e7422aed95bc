package replay

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/phalanx-sched/phalanx/internal/sim"
	"github.com/phalanx-sched/phalanx/internal/sim/metrics"
)

// TraceRun is one scheduler's replay of a trace.
type TraceRun struct {
	Scheduler string
	// Speed is the time compression: trace seconds per second of the run.
	Speed  float64
	Result *sim.Result
}

// TraceSummary is a replay's placement quality. Times are trace seconds
// (the run's seconds × Speed); fractions are of the cluster's GPUs.
type TraceSummary struct {
	Scheduler     string
	Jobs, Started int
	GPUs          int64
	// Alloc is the mean fraction of GPUs held; AllocWaiting and
	// UsefulWaiting the mean fraction held, and held by started jobs, over
	// the time when at least one job waited (WaitingSeconds of it).
	Alloc, AllocWaiting, UsefulWaiting float64
	WaitingSeconds                     float64
	// FragWaiting is the mean fraction of GPUs free but unusable by any
	// waiting pod, over the time when at least one job waited.
	FragWaiting float64
	// UsefulSettled is UsefulWaiting over the time when a job had waited
	// SettleSeconds or more (SettledSeconds of it): a job that arrived a
	// moment ago waits for the scheduler's reaction, which compression
	// stretches (0.1 s is 5 trace seconds at 50x), not for room.
	UsefulSettled, SettledSeconds float64
	// Waits are every job's wait until all its minMember (all its pods, for
	// plain jobs) were bound; a job that never started counts its wait until
	// the end of the run.
	Waits            []float64
	WaitP50, WaitP95 float64
	Split, Partial   int
	// SubGroupJobs counts the jobs with sub-groups; SplitSubGroupJobs those
	// of them whose running pods had a sub-group in more than one domain of
	// the sub-groups' level at some sample.
	SubGroupJobs, SplitSubGroupJobs int
	// Evicted counts pods deleted before they completed (reclaim); the
	// simulator resubmits them.
	Evicted int
	// Goodput is the GPU-seconds (trace) held by pods that ran to
	// completion; LostGPUSeconds those held by pods evicted before they
	// completed: work thrown away, which useful allocation counted while
	// it ran. Restarted counts the jobs evictions took below their quorum
	// and that started again (their wait runs from the first arrival to
	// the last start).
	Goodput, LostGPUSeconds float64
	Restarted               int
	// StrandedMean and StrandedPeak are GPUs held by members of gangs that
	// had not started.
	StrandedMean float64
	StrandedPeak int64
	Queues       []TraceQueueShare
	// WaitCauses is each cause's part of the job-seconds spent waiting
	// (WaitCause, judged at every sample).
	WaitCauses map[string]float64
	// HeldBy is each scheduler word's part of the job-seconds judged
	// metrics.WaitRoomHeld (metrics.SchedulerWord), largest first.
	HeldBy []WordShare
	// IdleByDomain is each network domain's mean free GPUs while jobs
	// waited; LongestWaits the jobs that waited longest, and for what.
	IdleByDomain []DomainIdle
	LongestWaits []JobWait
	// SchedulerQueue is the in-process scheduler's mean pending pods by
	// its queue while jobs waited (nil for a scheduler binary).
	SchedulerQueue map[string]float64
	// SubmitLag and SampleGap are the replay's own delays, the longest:
	// a job submitted after its arrival, and between two samples. Beyond a
	// few trace seconds the replay, not the scheduler, did not keep up.
	SubmitLag, SampleGap float64
}

// WordShare is a scheduler word and its part of the job-seconds waited.
type WordShare struct {
	Word  string
	Share float64
}

// TraceQueueShare is a queue's mean share of the cluster's GPUs against the
// share water-filling by weight over its demand (held + asked) deserved,
// over the time when at least one job waited.
type TraceQueueShare struct {
	Name            string
	Weight          int32
	Share, Deserved float64
}

// SettleSeconds is how long (trace seconds) a job waits before its wait
// counts as the cluster keeping it out (TraceSummary.UsefulSettled): beyond
// kube-scheduler's first backoff (1 s) at 50x.
const SettleSeconds = 60

// Summary computes the run's placement quality.
func (tr TraceRun) Summary() TraceSummary {
	r := tr.Result
	s := TraceSummary{Scheduler: tr.Scheduler, Jobs: len(r.Scenario.Jobs), GPUs: r.GPUs}
	n := len(r.Samples)
	at := make([]time.Duration, n)
	waiting := make([]bool, n)
	settled := make([]bool, n)
	all := make([]bool, n)
	alloc, useful, frag, stranded := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	s.SubmitLag = r.SubmitLag.Seconds() * tr.Speed
	for i, x := range r.Samples {
		if i > 0 {
			s.SampleGap = max(s.SampleGap, (x.At-r.Samples[i-1].At).Seconds()*tr.Speed)
		}
		at[i], waiting[i], all[i] = x.At, x.JobsWaiting > 0, true
		settled[i] = x.JobsWaiting > 0 && x.LongestWait.Seconds()*tr.Speed >= SettleSeconds
		if r.GPUs > 0 {
			alloc[i] = float64(x.GPUUsed) / float64(r.GPUs)
			useful[i] = float64(x.UsefulGPU) / float64(r.GPUs)
			frag[i] = float64(x.FragGPU) / float64(r.GPUs)
		}
		stranded[i] = float64(x.StrandedGPU)
		s.StrandedPeak = max(s.StrandedPeak, x.StrandedGPU)
	}
	s.Alloc, _ = metrics.TimeMean(at, r.Elapsed, alloc, all)
	s.AllocWaiting, _ = metrics.TimeMean(at, r.Elapsed, alloc, waiting)
	s.UsefulWaiting, _ = metrics.TimeMean(at, r.Elapsed, useful, waiting)
	s.FragWaiting, _ = metrics.TimeMean(at, r.Elapsed, frag, waiting)
	s.UsefulSettled, _ = metrics.TimeMean(at, r.Elapsed, useful, settled)
	s.SettledSeconds = spanSeconds(at, r.Elapsed, settled) * tr.Speed
	s.StrandedMean, _ = metrics.TimeMean(at, r.Elapsed, stranded, all)
	s.WaitingSeconds = spanSeconds(at, r.Elapsed, waiting) * tr.Speed
	s.WaitCauses = jobTimeShares(r.Samples, at, r.Elapsed, waiting, func(x sim.Sample) map[string]int { return x.WaitCauses })
	for word, share := range jobTimeShares(r.Samples, at, r.Elapsed, waiting, func(x sim.Sample) map[string]int { return x.HeldBy }) {
		s.HeldBy = append(s.HeldBy, WordShare{word, share})
	}
	s.SchedulerQueue = meanWhile(r.Samples, at, r.Elapsed, waiting, func(x sim.Sample) map[string]int { return x.SchedulerQueue })
	sort.Slice(s.HeldBy, func(i, j int) bool {
		if s.HeldBy[i].Share != s.HeldBy[j].Share {
			return s.HeldBy[i].Share > s.HeldBy[j].Share
		}
		return s.HeldBy[i].Word < s.HeldBy[j].Word
	})

	var gangs []metrics.GangOutcome
	for _, j := range r.Jobs {
		if j.Ran() {
			s.Started++
		}
		s.Waits = append(s.Waits, j.WaitUntil(r.Elapsed).Seconds()*tr.Speed)
		s.Evicted += j.Evicted
		s.Goodput += j.CompletedGPUSeconds * tr.Speed
		s.LostGPUSeconds += j.LostGPUSeconds * tr.Speed
		if j.RestartedAt > 0 {
			s.Restarted++
		}
		if size, _ := j.Job.SubGroups(); size > 0 {
			s.SubGroupJobs++
			if j.MaxSplitSubGroups > 0 {
				s.SplitSubGroupJobs++
			}
		}
		if j.Job.MinMember > 0 {
			// Domains spanned at once: a gang reclaimed and placed again
			// elsewhere is not split.
			g := metrics.GangOutcome{Started: j.Ran(), MaxBound: j.MaxBound, Domains: j.MaxLiveDomains}
			gangs = append(gangs, g)
		}
	}
	// Jobs the run never submitted (it timed out first) wait from their
	// arrival to the end.
	for _, j := range r.Scenario.Jobs {
		if !submitted(r, j.Key()) {
			s.Waits = append(s.Waits, max(0, (r.Elapsed-j.Arrival.Duration).Seconds()*tr.Speed))
		}
	}
	s.WaitP50, s.WaitP95 = metrics.Percentile(s.Waits, 50), metrics.Percentile(s.Waits, 95)
	s.Split, s.Partial = metrics.GangCounts(gangs)
	s.Queues = tr.queueShares(at, waiting)
	s.IdleByDomain = tr.idleByDomain(at, waiting)
	s.LongestWaits = tr.longestWaits()
	return s
}

// jobTimeShares is each key's part of the job-seconds that count (a count
// of jobs per key at each sample) sums.
func jobTimeShares(samples []sim.Sample, at []time.Duration, end time.Duration, waiting []bool, count func(sim.Sample) map[string]int) map[string]float64 {
	sums, total := map[string]float64{}, 0.0
	metrics.EachSpan(at, end, waiting, func(i int, dt float64) {
		c := count(samples[i])
		// Sorted: float sums in map order differ in the last bits.
		for _, cause := range slices.Sorted(maps.Keys(c)) {
			n := c[cause]
			sums[cause] += float64(n) * dt
			total += float64(n) * dt
		}
	})
	if total == 0 {
		return nil
	}
	for cause := range sums {
		sums[cause] /= total
	}
	return sums
}

// meanWhile is each key's time-weighted mean count over the spans that
// count; nil when no sample has counts.
func meanWhile(samples []sim.Sample, at []time.Duration, end time.Duration, waiting []bool, count func(sim.Sample) map[string]int) map[string]float64 {
	var sums map[string]float64
	total := 0.0
	metrics.EachSpan(at, end, waiting, func(i int, dt float64) {
		c := count(samples[i])
		if c == nil {
			return
		}
		if sums == nil {
			sums = map[string]float64{}
		}
		for k, n := range c {
			sums[k] += float64(n) * dt
		}
		total += dt
	})
	for k := range sums {
		sums[k] /= total
	}
	return sums
}

func submitted(r *sim.Result, key string) bool {
	for _, j := range r.Jobs {
		if j.Job.Key() == key {
			return true
		}
	}
	return false
}

func spanSeconds(at []time.Duration, end time.Duration, include []bool) float64 {
	var span float64
	metrics.EachSpan(at, end, include, func(_ int, dt float64) { span += dt })
	return span
}

func (tr TraceRun) queueShares(at []time.Duration, waiting []bool) []TraceQueueShare {
	r := tr.Result
	qs := r.Scenario.Queues
	if len(qs) == 0 || r.GPUs == 0 {
		return nil
	}
	weights := map[string]float64{}
	for _, q := range qs {
		weights[q.Name] = float64(q.Weight)
	}
	share := make([][]float64, len(qs))
	deserved := make([][]float64, len(qs))
	for i := range qs {
		share[i] = make([]float64, len(r.Samples))
		deserved[i] = make([]float64, len(r.Samples))
	}
	for k, x := range r.Samples {
		demand := map[string]float64{}
		for _, q := range qs {
			demand[q.Name] = float64(x.QueueUsed[q.Name] + x.QueueWaitingGPU[q.Name])
		}
		fill := metrics.WaterFill(float64(r.GPUs), weights, demand)
		for i, q := range qs {
			share[i][k] = float64(x.QueueUsed[q.Name]) / float64(r.GPUs)
			deserved[i][k] = fill[q.Name] / float64(r.GPUs)
		}
	}
	out := make([]TraceQueueShare, len(qs))
	for i, q := range qs {
		out[i] = TraceQueueShare{Name: q.Name, Weight: q.Weight}
		out[i].Share, _ = metrics.TimeMean(at, r.Elapsed, share[i], waiting)
		out[i].Deserved, _ = metrics.TimeMean(at, r.Elapsed, deserved[i], waiting)
	}
	return out
}

// summaryRow is one line of the comparison, in the text and HTML reports.
type summaryRow struct {
	label string
	cell  func(TraceSummary) string
}

// summaryRows are the comparison's lines (times in trace seconds).
func summaryRows(sums []TraceSummary) []summaryRow {
	rows := []summaryRow{
		{"jobs started", func(s TraceSummary) string { return fmt.Sprintf("%d/%d", s.Started, s.Jobs) }},
		{"GPU allocation, whole run", func(s TraceSummary) string { return pct(s.Alloc) }},
		{"GPU allocation while jobs wait", func(s TraceSummary) string { return pct(s.AllocWaiting) }},
		{"useful allocation while jobs wait", func(s TraceSummary) string { return pct(s.UsefulWaiting) }},
		{"time with jobs waiting (s)", func(s TraceSummary) string { return fmt.Sprintf("%.0f", s.WaitingSeconds) }},
		{fmt.Sprintf("useful allocation while a job waits %ds+", SettleSeconds), func(s TraceSummary) string { return pct(s.UsefulSettled) }},
		{fmt.Sprintf("time with a job waiting %ds+ (s)", SettleSeconds), func(s TraceSummary) string { return fmt.Sprintf("%.0f", s.SettledSeconds) }},
		{"fragmentation while jobs wait", func(s TraceSummary) string { return pct(s.FragWaiting) }},
		{"job wait p50 (s)", func(s TraceSummary) string { return fmt.Sprintf("%.0f", s.WaitP50) }},
		{"job wait p95 (s)", func(s TraceSummary) string { return fmt.Sprintf("%.0f", s.WaitP95) }},
		{"job-time waiting: " + strings.Join(metrics.WaitCauses, " / "), func(s TraceSummary) string { return causeParts(s.WaitCauses) }},
		{"split gangs", func(s TraceSummary) string { return fmt.Sprint(s.Split) }},
		{"partial gangs", func(s TraceSummary) string { return fmt.Sprint(s.Partial) }},
	}
	if subGroupJobs(sums) {
		rows = append(rows, summaryRow{"jobs with split sub-groups", func(s TraceSummary) string {
			return fmt.Sprintf("%d/%d", s.SplitSubGroupJobs, s.SubGroupJobs)
		}})
	}
	rows = append(rows, []summaryRow{
		{"pods evicted (reclaim, preemption)", func(s TraceSummary) string { return fmt.Sprint(s.Evicted) }},
		{"goodput: GPU·s of pods run to completion", func(s TraceSummary) string { return fmt.Sprintf("%.0f", s.Goodput) }},
		{"GPU·s lost to evictions (of all run)", func(s TraceSummary) string {
			return fmt.Sprintf("%.0f (%s)", s.LostGPUSeconds, pct(safeDiv(s.LostGPUSeconds, s.LostGPUSeconds+s.Goodput)))
		}},
		{"jobs restarted after evictions", func(s TraceSummary) string { return fmt.Sprint(s.Restarted) }},
		{"GPUs stranded by incomplete gangs, mean / peak", func(s TraceSummary) string {
			return fmt.Sprintf("%.1f / %d", s.StrandedMean, s.StrandedPeak)
		}},
		{"replay's own lag, max: submission / between samples (s)", func(s TraceSummary) string {
			return fmt.Sprintf("%.0f / %.0f", s.SubmitLag, s.SampleGap)
		}},
	}...)
	if len(sums) == 0 {
		return rows
	}
	for qi, q := range sums[0].Queues {
		rows = append(rows, summaryRow{fmt.Sprintf("queue %s (weight %d): share / deserved", q.Name, q.Weight), func(s TraceSummary) string {
			if qi >= len(s.Queues) {
				return "-"
			}
			return pct(s.Queues[qi].Share) + " / " + pct(s.Queues[qi].Deserved)
		}})
	}
	return rows
}

// subGroupJobs reports whether any replay had jobs with sub-groups (the
// row about them is left out otherwise).
func subGroupJobs(sums []TraceSummary) bool {
	for _, s := range sums {
		if s.SubGroupJobs > 0 {
			return true
		}
	}
	return false
}

// WriteTraceText prints the replays side by side.
func WriteTraceText(w io.Writer, runs []TraceRun) {
	if len(runs) == 0 {
		return
	}
	sums := make([]TraceSummary, len(runs))
	for i, tr := range runs {
		sums[i] = tr.Summary()
	}
	r0 := runs[0].Result
	fmt.Fprintf(w, "\nphalanx-sim trace: %d nodes, %d GPUs, %d jobs, replayed at %gx (times below are trace seconds)\n\n",
		len(r0.Nodes), r0.GPUs, len(r0.Scenario.Jobs), runs[0].Speed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(label string, f func(TraceSummary) string) {
		cells := []string{label}
		for _, s := range sums {
			cells = append(cells, f(s))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	row("", func(s TraceSummary) string { return s.Scheduler })
	for _, r := range summaryRows(sums) {
		row(r.label, r.cell)
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, tr := range runs {
		fmt.Fprintf(w, "%s: the run took %.1fs\n", tr.Scheduler, tr.Result.Elapsed.Seconds())
	}
	fmt.Fprintln(w, "\nuseful allocation: GPUs held by started jobs (gangs with minMember bound at once, and plain pods),\n"+
		"over the time when at least one job waited; fragmentation: GPUs free on nodes where no waiting pod fits.")
	for _, s := range sums {
		if len(s.HeldBy) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s: job-time with room held (%.0f%% of all waited), by the scheduler's last word on the job's pods:\n", s.Scheduler, 100*s.WaitCauses[metrics.WaitRoomHeld])
		for i, h := range s.HeldBy {
			if i == heldByLines {
				fmt.Fprintf(w, "  … %d more\n", len(s.HeldBy)-i)
				break
			}
			fmt.Fprintf(w, "  %5.1f%%  %s\n", 100*h.Share, h.Word)
		}
	}
	writeWhere(w, sums)
	for _, s := range sums {
		if len(s.SchedulerQueue) == 0 {
			continue
		}
		keys := make([]string, 0, len(s.SchedulerQueue))
		for k := range s.SchedulerQueue {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%s %.1f", k, s.SchedulerQueue[k])
		}
		fmt.Fprintf(w, "\n%s: the scheduler's pending pods while jobs waited, mean by its queue: %s\n", s.Scheduler, strings.Join(parts, ", "))
	}
}

// heldByLines bounds the scheduler words listed per run.
const heldByLines = 8

func pct(f float64) string { return fmt.Sprintf("%.1f%%", f*100) }

func safeDiv(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
