package report

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/phalanx-sched/phalanx/internal/sim"
	"github.com/phalanx-sched/phalanx/internal/sim/chart"
	"github.com/phalanx-sched/phalanx/internal/sim/scenario"
)

// bar is a timeline bar: where it starts and ends, in pixels, and its
// tooltip.
type bar struct {
	x0, x1 float64
	title  string
}

var barRE = regexp.MustCompile(`<rect x="([0-9.]+)" y="[0-9.]+" width="([0-9.]+)" height="[0-9.]+" fill="[^"]*" [^>]*><title>([^<]*)</title></rect>`)

func bars(t *testing.T, svg string) []bar {
	t.Helper()
	var out []bar
	for _, m := range barRE.FindAllStringSubmatch(svg, -1) {
		x, _ := strconv.ParseFloat(m[1], 64)
		w, _ := strconv.ParseFloat(m[2], 64)
		out = append(out, bar{x, x + w, m[3]})
	}
	return out
}

// TestTimeline: a label per job; a wait and a run bar for each job that
// started, a hatched bar for each that did not; bars placed by time.
func TestTimeline(t *testing.T) {
	r := syntheticResult()
	out := string(timeline(r, "s0"))
	if n := strings.Count(out, `text-anchor="end" style="font-size:11px"`); n != len(r.Jobs) {
		t.Errorf("%d job labels, want %d", n, len(r.Jobs))
	}
	got := bars(t, out)
	want := 0
	for _, j := range r.Jobs {
		want += map[bool]int{true: 2, false: 1}[j.Ran()]
	}
	if len(got) != want {
		t.Fatalf("%d bars, want %d:\n%s", len(got), want, out)
	}
	if n := strings.Count(out, ">never started</text>"); n != 1 || !strings.Contains(out, `fill="url(#s0-never)"`) {
		t.Errorf("the blocked job is not marked never started (%d marks)", n)
	}
	// train-a is submitted at 0: its wait bar starts the time axis, which
	// ends at the chart's right margin; every bar sits where its times say.
	from, to := got[0].x0, float64(chart.Width-24)
	px := func(d time.Duration) float64 { return from + d.Seconds()/r.Elapsed.Seconds()*(to-from) }
	k := 0
	for _, j := range r.Jobs {
		check := func(b bar, start, end time.Duration) {
			if math.Abs(b.x0-px(start)) > 0.1 || math.Abs(b.x1-px(end)) > 0.1 {
				t.Errorf("%s: bar %.1f..%.1f, want %.1f..%.1f (%s)", j.Job.Key(), b.x0, b.x1, px(start), px(end), b.title)
			}
			if !strings.HasPrefix(b.title, j.Job.Key()+":") {
				t.Errorf("bar tooltip %q does not name %s", b.title, j.Job.Key())
			}
		}
		if !j.Ran() {
			check(got[k], j.Submitted, r.Elapsed)
			k++
			continue
		}
		end := j.FinishedAt
		if end == 0 {
			end = r.Elapsed
		}
		check(got[k], j.Submitted, j.QuorumAt)
		check(got[k+1], j.QuorumAt, end)
		k += 2
	}
	if !strings.Contains(out, "&lt;b&gt;no&lt;/b&gt;") || strings.Contains(out, "<b>") {
		t.Error("the reason in the tooltip is not escaped")
	}
}

// TestTimelineDense: many jobs get smaller rows, and long names are clipped
// on the label but whole in its tooltip.
func TestTimelineDense(t *testing.T) {
	r := syntheticResult()
	long := strings.Repeat("very-long-job-name-", 5)
	r.Jobs = nil
	for i := range 41 {
		r.Jobs = append(r.Jobs, &sim.JobResult{Job: scenario.Job{Name: fmt.Sprintf("%s%02d", long, i), Replicas: 1}, QuorumAt: time.Second})
	}
	out := string(timeline(r, "s0"))
	if n := strings.Count(out, `style="font-size:9px"`); n != len(r.Jobs) {
		t.Errorf("%d small labels, want %d", n, len(r.Jobs))
	}
	key := r.Jobs[0].Job.Key()
	if !strings.Contains(out, "…<title>"+key+"</title>") {
		t.Errorf("label of %s not clipped with its whole name as tooltip", key)
	}
}

var pointsRE = regexp.MustCompile(`points="([^"]*)"`)

// TestUtilizationChart: a line per resource the cluster has, a point per
// sample, and the mean and peak computed from the samples.
func TestUtilizationChart(t *testing.T) {
	r := syntheticResult()
	svg, legend, stats := utilizationChart(r)
	lines := pointsRE.FindAllStringSubmatch(string(svg), -1)
	if len(lines) != 2 || len(legend) != 2 {
		t.Fatalf("%d lines, %d legend items; want GPU and CPU", len(lines), len(legend))
	}
	for _, l := range lines {
		if n := len(strings.Fields(l[1])); n != len(r.Samples) {
			t.Errorf("%d points, want %d", n, len(r.Samples))
		}
	}
	gpuMean, gpuPeak := meanPeak(r.Samples, func(s sim.Sample) int64 { return s.GPUUsed }, r.GPUs)
	if want := fmt.Sprintf("GPU: average %.0f%%, peak %.0f%%", gpuMean*100, gpuPeak*100); stats[0] != want {
		t.Errorf("stats %q, want %q", stats[0], want)
	}
	r.GPUs = 0
	_, legend, stats = utilizationChart(r)
	if len(legend) != 1 || legend[0].Label != "CPU" || !strings.HasPrefix(stats[0], "CPU: ") {
		t.Errorf("a CPU cluster: legend %+v, stats %v", legend, stats)
	}
}

// TestSharesChart: a band per queue, stacked by each sample's shares, and a
// dashed line for each leading queue with an expected share.
func TestSharesChart(t *testing.T) {
	r := syntheticResult()
	svg, legend := sharesChart(r)
	out := string(svg)
	// The y axis by its labels: 0% and 100%.
	label := func(pct string) float64 {
		m := regexp.MustCompile(`y="([0-9.]+)" text-anchor="end">` + pct + `</text>`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no %s label", pct)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v - 4
	}
	y0, y1 := label("0%"), label("100%")
	py := func(v float64) float64 { return y0 + v*(y1-y0) }
	bands := regexp.MustCompile(`<polygon [^>]*points="([^"]*)"`).FindAllStringSubmatch(out, -1)
	if len(bands) != len(r.Scenario.Queues) {
		t.Fatalf("%d bands, want %d", len(bands), len(r.Scenario.Queues))
	}
	cum := make([]float64, len(r.Samples))
	for k, q := range r.Scenario.Queues {
		pts := strings.Fields(bands[k][1])
		if len(pts) != 2*len(r.Samples) {
			t.Fatalf("queue %s: %d points, want %d", q.Name, len(pts), 2*len(r.Samples))
		}
		for i, s := range r.Samples {
			var total int64
			for _, v := range s.QueueUsed {
				total += v
			}
			if total > 0 {
				cum[i] += float64(s.QueueUsed[q.Name]) / float64(total)
			}
			var x, y float64
			fmt.Sscanf(pts[i], "%f,%f", &x, &y)
			if math.Abs(y-py(cum[i])) > 0.1 {
				t.Errorf("queue %s, sample %d: band top at %.1f, want %.1f", q.Name, i, y, py(cum[i]))
			}
		}
	}
	if n := strings.Count(out, `stroke-dasharray="6 4"`); n != 2 {
		t.Errorf("%d expected lines, want 2", n)
	}
	if len(legend) != 4 || legend[3].Label != "expected top of team-b (100%)" || legend[3].Class != "dash" {
		t.Errorf("legend %+v", legend)
	}
	// An expectation only on the second queue draws no line: the first
	// band's top is not known.
	r.Scenario.Queues[0].ExpectShare = nil
	svg, _ = sharesChart(r)
	if strings.Contains(string(svg), "stroke-dasharray") {
		t.Error("an expected line without the queues below it")
	}
}

// TestSecondsNeverZero: a run of no time still has a time axis.
func TestSecondsNeverZero(t *testing.T) {
	if seconds(&sim.Result{}) != 1 || seconds(&sim.Result{Elapsed: 2500 * time.Millisecond}) != 2.5 {
		t.Error("seconds")
	}
}
