package sim

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteText prints a readable summary: per job, the wait, where it ran,
// whether it started whole, and why it did not run.
func (r *Result) WriteText(w io.Writer) {
	sc := r.Scenario
	fmt.Fprintf(w, "\nphalanx-sim: %s — %d nodes, %d GPUs, %d jobs, %.1fs\n", sc.Name, r.Nodes, r.GPUs, len(r.Jobs), r.Elapsed.Seconds())
	if sc.Description != "" {
		fmt.Fprintf(w, "%s\n", strings.TrimSpace(sc.Description))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tPODS\tMIN\tSTARTED\tWHOLE\tWAIT\tNODES\tDONE")
	for _, j := range r.Jobs {
		min := "-"
		if j.Job.MinMember > 0 {
			min = fmt.Sprint(j.Job.MinMember)
		}
		started, whole, wait := "no", "-", "-"
		if j.Ran() {
			started = "yes"
			wait = j.Wait().Round(10 * time.Millisecond).String()
			if j.Job.MinMember > 0 {
				whole = "yes"
				if j.Spread > time.Second {
					whole = fmt.Sprintf("spread %v", j.Spread.Round(10*time.Millisecond))
				}
			}
		} else if j.MaxBound > 0 {
			whole = fmt.Sprintf("PARTIAL %d", j.MaxBound)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%d/%d\n", j.Job.Key(), j.Job.Replicas, min, started, whole, wait, nodeList(j.Nodes), j.Completed, j.Job.Replicas)
	}
	tw.Flush()

	var waiting []*JobResult
	for _, j := range r.Jobs {
		if !j.Ran() {
			waiting = append(waiting, j)
		}
	}
	if len(waiting) > 0 {
		fmt.Fprintln(w, "\nNot started, and why:")
		for _, j := range waiting {
			reason := j.Reason
			if reason == "" {
				reason = "no condition written"
			}
			fmt.Fprintf(w, "  %s: %s\n", j.Job.Key(), reason)
		}
	}
	if r.GPUs > 0 {
		avg, peak := r.utilization(func(s Sample) float64 { return float64(s.GPUUsed) / float64(r.GPUs) })
		fmt.Fprintf(w, "\nGPU utilization: average %.0f%%, peak %.0f%%\n", avg*100, peak*100)
	}
	if r.CPU > 0 {
		avg, peak := r.utilization(func(s Sample) float64 { return float64(s.CPUUsed) / float64(r.CPU) })
		fmt.Fprintf(w, "CPU utilization: average %.0f%%, peak %.0f%%\n", avg*100, peak*100)
	}
	if errs := r.Check(); len(errs) > 0 {
		fmt.Fprintln(w, "\nExpectations NOT met:")
		for _, e := range errs {
			fmt.Fprintf(w, "  - %v\n", e)
		}
	} else {
		fmt.Fprintln(w, "\nAll expectations met: every gang started whole or not at all.")
	}
}

func (r *Result) utilization(f func(Sample) float64) (avg, peak float64) {
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

// Check compares the run with the jobs' expectations and with the one rule
// that holds for every gang: it is never left partially bound.
func (r *Result) Check() []error {
	var errs []error
	for _, j := range r.Jobs {
		if j.Job.MinMember > 0 && !j.Ran() && j.MaxBound > 0 {
			errs = append(errs, fmt.Errorf("%s: %d members bound but minMember %d never reached", j.Job.Key(), j.MaxBound, j.Job.MinMember))
		}
		switch j.Job.Expect {
		case ExpectRun:
			if !j.Ran() {
				errs = append(errs, fmt.Errorf("%s: expected to run, did not (%s)", j.Job.Key(), j.Reason))
			}
		case ExpectPending:
			if j.MaxBound > 0 {
				errs = append(errs, fmt.Errorf("%s: expected to stay pending, %d members were bound", j.Job.Key(), j.MaxBound))
			}
		}
	}
	return errs
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
