// Package report writes what a scenario run did, as text and as one
// self-contained HTML page, and checks it against the scenario's
// expectations and the rules every run keeps.
package report

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/phalanx-sched/phalanx/internal/sim"
	"github.com/phalanx-sched/phalanx/internal/sim/scenario"
)

// WriteText prints a readable summary: per job, the wait, where it ran,
// whether it started whole, and why it did not run.
func WriteText(w io.Writer, r *sim.Result) {
	sc := r.Scenario
	fmt.Fprintf(w, "\nphalanx-sim: %s — %d nodes, %d GPUs, %d jobs, %.1fs\n", sc.Name, len(r.Nodes), r.GPUs, len(r.Jobs), r.Elapsed.Seconds())
	if sc.Description != "" {
		fmt.Fprintf(w, "%s\n", strings.TrimSpace(sc.Description))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tQUEUE\tPODS\tMIN\tSTARTED\tWHOLE\tWAIT\tDOMAIN\tNODES\tDONE")
	for _, j := range r.Jobs {
		c := cells(j)
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", j.Job.Key(), orDash(j.Job.Queue), j.Job.Replicas, c.Min, c.Started, c.Whole, c.Wait, orDash(Domain(r, j)), nodeList(j.Nodes), c.Done)
	}
	tw.Flush()

	var waiting []*sim.JobResult
	for _, j := range r.Jobs {
		if !j.Ran() {
			waiting = append(waiting, j)
		}
	}
	if len(waiting) > 0 {
		fmt.Fprintln(w, "\nNot started, and why:")
		for _, j := range waiting {
			fmt.Fprintf(w, "  %s: %s\n", j.Job.Key(), why(j))
		}
	}
	if shares := QueueShares(r); len(shares) > 0 {
		fmt.Fprintf(w, "\nQueue shares while every queue had work waiting (%s):\n", shareUnit(r))
		for _, q := range shares {
			expect := ""
			if q.Expect != nil {
				expect = fmt.Sprintf(", expected %.0f%% ± %.0f", *q.Expect*100, r.Scenario.ShareTolerance*100)
			}
			fmt.Fprintf(w, "  %-12s weight %-3d share %3.0f%% over %d samples%s\n", q.Name, q.Weight, q.Share*100, q.Samples, expect)
		}
		fmt.Fprintf(w, "Share of the %s in use over time (0s to %.0fs, each mark %.1fs; ▁ none, █ all):\n", shareUnit(r), r.Elapsed.Seconds(), r.Elapsed.Seconds()/sparkWidth)
		for _, q := range shares {
			fmt.Fprintf(w, "  %-12s %s\n", q.Name, shareSparkline(r, q.Name))
		}
	}
	if len(numaNodes(r)) > 0 {
		if len(r.NUMAViolations) == 0 {
			fmt.Fprintf(w, "\nNUMA: on %d NUMA nodes, every running pod fit its zones at every sample, as the kubelet assigns them.\n", len(numaNodes(r)))
		} else {
			fmt.Fprintln(w, "\nNUMA: pods the kubelet would reject:")
			for _, v := range r.NUMAViolations {
				fmt.Fprintf(w, "  %s\n", v)
			}
		}
	}
	if r.GPUs > 0 {
		avg, peak := utilization(r, func(s sim.Sample) float64 { return float64(s.GPUUsed) / float64(r.GPUs) })
		fmt.Fprintf(w, "\nGPU utilization: average %.0f%%, peak %.0f%%\n", avg*100, peak*100)
	}
	if r.CPU > 0 {
		avg, peak := utilization(r, func(s sim.Sample) float64 { return float64(s.CPUUsed) / float64(r.CPU) })
		fmt.Fprintf(w, "CPU utilization: average %.0f%%, peak %.0f%%\n", avg*100, peak*100)
	}
	if errs := Check(r); len(errs) > 0 {
		fmt.Fprintln(w, "\nExpectations NOT met:")
		for _, e := range errs {
			fmt.Fprintf(w, "  - %v\n", e)
		}
	} else {
		fmt.Fprintln(w, "\nAll expectations met: every gang started whole or not at all.")
	}
}

func utilization(r *sim.Result, f func(sim.Sample) float64) (avg, peak float64) {
	if len(r.Samples) == 0 {
		return 0, 0
	}
	for _, s := range r.Samples {
		v := f(s)
		avg += v
		if v > peak {
			peak = v
		}
	}
	return avg / float64(len(r.Samples)), peak
}

// Check compares the run with the jobs' expectations and with the rules that
// hold for every run: no gang is ever left partially bound, a gang with a
// required network level lands inside one domain of it, queue shares are
// within tolerance, and no pod lands where the kubelet's NUMA alignment would
// reject it.
func Check(r *sim.Result) []error {
	var errs []error
	for _, j := range r.Jobs {
		if j.Job.MinMember > 0 && !j.Ran() && j.MaxBound > 0 {
			errs = append(errs, fmt.Errorf("%s: %d members bound but minMember %d never reached", j.Job.Key(), j.MaxBound, j.Job.MinMember))
		}
		switch j.Job.Expect {
		case scenario.ExpectRun:
			if !j.Ran() {
				errs = append(errs, fmt.Errorf("%s: expected to run, did not (%s)", j.Job.Key(), j.Reason))
			}
		case scenario.ExpectPending:
			if j.MaxBound > 0 {
				errs = append(errs, fmt.Errorf("%s: expected to stay pending, %d members were bound", j.Job.Key(), j.MaxBound))
			}
		}
		if level := j.Job.RequiredLevel(); level != "" && len(j.Nodes) > 0 {
			if domains := domainsOf(r, j, level); len(domains) > 1 {
				errs = append(errs, fmt.Errorf("%s: required one %s, ran in %d: %s", j.Job.Key(), level, len(domains), strings.Join(domains, ", ")))
			}
		}
	}
	for _, q := range QueueShares(r) {
		if q.Expect == nil {
			continue
		}
		if q.Samples == 0 {
			errs = append(errs, fmt.Errorf("queue %s: no moment with every queue waiting; the share cannot be measured", q.Name))
			continue
		}
		if !shareOK(r, q) {
			errs = append(errs, fmt.Errorf("queue %s: share %.2f, expected %.2f ± %.2f", q.Name, q.Share, *q.Expect, r.Scenario.ShareTolerance))
		}
	}
	for _, v := range r.NUMAViolations {
		errs = append(errs, fmt.Errorf("NUMA: the kubelet would reject %s", v))
	}
	return errs
}

// Domain names where a job ran: the domain of its required level, else the
// widest network domains it used ("" without a network or before it ran).
func Domain(r *sim.Result, j *sim.JobResult) string {
	if len(j.Nodes) == 0 {
		return ""
	}
	level := j.Job.RequiredLevel()
	if level == "" {
		if len(r.Scenario.Network) == 0 {
			return ""
		}
		level = r.Scenario.Network[0].Name
	}
	return strings.Join(domainsOf(r, j, level), "+")
}

// domainsOf lists the distinct domains of a level the job's nodes are in.
func domainsOf(r *sim.Result, j *sim.JobResult, level string) []string {
	l := r.Scenario.Level(level)
	if l == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, n := range r.Nodes {
		if j.Nodes[n.Name] == 0 {
			continue
		}
		v := n.Labels[l.NodeLabel]
		if v == "" {
			v = unlabelled
		}
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}

// share is a queue's fraction of what all queues used at the sample; false
// when nothing was in use.
func share(s sim.Sample, queue string) (float64, bool) {
	var total int64
	for _, v := range s.QueueUsed {
		total += v
	}
	if total == 0 {
		return 0, false
	}
	return float64(s.QueueUsed[queue]) / float64(total), true
}

const sparkWidth = 50

// shareSparkline draws a queue's share of the used resource over the run,
// one block per time bucket (the bucket's mean).
func shareSparkline(r *sim.Result, queue string) string {
	blocks := []rune("▁▂▃▄▅▆▇█")
	var sum [sparkWidth]float64
	var n [sparkWidth]int
	for _, s := range r.Samples {
		share, ok := share(s, queue)
		if !ok || r.Elapsed <= 0 {
			continue
		}
		b := min(int(float64(s.At)/float64(r.Elapsed)*sparkWidth), sparkWidth-1)
		sum[b] += share
		n[b]++
	}
	out := make([]rune, sparkWidth)
	for b := range out {
		out[b] = ' '
		if n[b] > 0 {
			out[b] = blocks[int(sum[b]/float64(n[b])*float64(len(blocks)-1)+0.5)]
		}
	}
	return string(out)
}

// unlabelled names the domain of nodes without the level's label.
const unlabelled = "(unlabelled)"

// QueueShare is a queue's measured share of what the queues used.
type QueueShare struct {
	Name   string
	Weight int32
	Expect *float64
	// Share is the queue's mean share of the used resource over the samples
	// in which every queue with an expectShare (or every scenario queue) had
	// pods waiting, so the share is what fairness gave, not what demand left.
	Share   float64
	Samples int
}

// QueueShares measures the scenario's queues (nil without queues).
func QueueShares(r *sim.Result) []QueueShare {
	qs := r.Scenario.Queues
	if len(qs) == 0 {
		return nil
	}
	contended := func(s sim.Sample) bool {
		for _, q := range qs {
			if (q.ExpectShare != nil || !anyExpectShare(r)) && s.QueueWaiting[q.Name] == 0 {
				return false
			}
		}
		return true
	}
	out := make([]QueueShare, len(qs))
	for i, q := range qs {
		out[i] = QueueShare{Name: q.Name, Weight: q.Weight, Expect: q.ExpectShare}
	}
	for _, s := range r.Samples {
		if !contended(s) {
			continue
		}
		for i, q := range qs {
			if share, ok := share(s, q.Name); ok {
				out[i].Share += share
				out[i].Samples++
			}
		}
	}
	for i := range out {
		if out[i].Samples > 0 {
			out[i].Share /= float64(out[i].Samples)
		}
	}
	return out
}

func anyExpectShare(r *sim.Result) bool {
	for _, q := range r.Scenario.Queues {
		if q.ExpectShare != nil {
			return true
		}
	}
	return false
}

// shareUnit names the resource queue shares are measured in.
func shareUnit(r *sim.Result) string {
	if r.GPUs > 0 {
		return "GPUs"
	}
	return "CPU"
}

func numaNodes(r *sim.Result) []sim.NodeResult {
	var out []sim.NodeResult
	for _, n := range r.Nodes {
		if n.Zones > 0 {
			out = append(out, n)
		}
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func nodeList(nodes map[string]int) string {
	if len(nodes) == 0 {
		return "-"
	}
	names := make([]string, 0, len(nodes))
	for n := range nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) > 4 {
		return fmt.Sprintf("%s… (%d nodes)", strings.Join(names[:3], ","), len(names))
	}
	return strings.Join(names, ",")
}
