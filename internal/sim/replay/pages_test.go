package replay

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/sim"
	"github.com/phalanx-sched/phalanx/internal/sim/metrics"
	"github.com/phalanx-sched/phalanx/internal/sim/scenario"
)

// twoRuns are two replays of one small trace: two queues, a leaf level,
// jobs waiting in the first half, and many scheduler words holding room.
func twoRuns() []TraceRun {
	s := time.Second
	jobs := []scenario.Job{{Name: "a", Replicas: 2, MinMember: 2, GPUs: 2, Queue: "qa"}, {Name: "b", Replicas: 1, GPUs: 1, Queue: "qb"}}
	sc := &scenario.Scenario{Name: "t", Jobs: jobs,
		Network: []phalanxv1alpha1.TopologyLevel{{Name: "leaf", NodeLabel: "leaf"}},
		Queues:  []scenario.Queue{{Name: "qa", QueueSpec: phalanxv1alpha1.QueueSpec{Weight: 1}}, {Name: "qb", QueueSpec: phalanxv1alpha1.QueueSpec{Weight: 3}}}}
	held := map[string]int{}
	for i := range heldByLines + 2 {
		held[fmt.Sprintf("Unschedulable: word %d", i)] = 1
	}
	run := func(name string, quorum time.Duration) TraceRun {
		r := &sim.Result{Scenario: sc, GPUs: 8, Elapsed: 4 * s,
			Nodes: []sim.NodeResult{{Name: "n0", GPUs: 8, Labels: map[string]string{"leaf": "l0"}}},
			Jobs: []*sim.JobResult{
				{Job: jobs[0], QuorumAt: quorum, MaxBound: 2, Nodes: map[string]int{"n0": 2}},
				{Job: jobs[1], QuorumAt: s, MaxBound: 1, Nodes: map[string]int{"n0": 1}},
			},
			Samples: []sim.Sample{
				{At: 0, GPUUsed: 2, UsefulGPU: 2, FragGPU: 1, JobsWaiting: 1, WaitCauses: map[string]int{metrics.WaitRoomHeld: 1}, HeldBy: held,
					QueueUsed: map[string]int64{"qb": 2}, QueueWaitingGPU: map[string]int64{"qa": 4}, IdleGPU: map[string]int{"leaf=l0": 6},
					SchedulerQueue: map[string]int{"unschedulable": 2, "active": 1}},
				{At: 2 * s, GPUUsed: 6, UsefulGPU: 6, QueueUsed: map[string]int64{"qa": 4, "qb": 2}},
			},
		}
		return TraceRun{Scheduler: name, Speed: 10, Result: r}
	}
	return []TraceRun{run("phalanx", 2*s), run("stock <b>", 3*s)}
}

// TestWriteTraceTextSections: the header, a column per scheduler, the
// words that held room (at most heldByLines), where the idle GPUs were and
// the scheduler's queue.
func TestWriteTraceTextSections(t *testing.T) {
	var b bytes.Buffer
	WriteTraceText(&b, nil)
	if b.Len() != 0 {
		t.Errorf("no runs wrote %q", b.String())
	}
	runs := twoRuns()
	WriteTraceText(&b, runs)
	out := b.String()
	for _, want := range []string{
		"phalanx-sim trace: 1 nodes, 8 GPUs, 2 jobs, replayed at 10x",
		"phalanx: the run took 4.0s", "stock <b>: the run took 4.0s",
		"phalanx: job-time with room held (100% of all waited)",
		fmt.Sprintf("  … %d more\n", 2),
		"phalanx: where the idle GPUs were while jobs waited",
		"  leaf         l0 6.0/8\n",
		"phalanx: the scheduler's pending pods while jobs waited, mean by its queue: active 1.0, unschedulable 2.0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`\n +phalanx +stock <b>\n`).MatchString(out) {
		t.Errorf("no header line naming both schedulers:\n%s", out)
	}
	if n := strings.Count(out, "Unschedulable: word"); n != 2*heldByLines {
		t.Errorf("%d words listed, want %d per run", n, heldByLines)
	}
	// Each summary row once, with a cell per replay.
	for _, r := range summaryRows([]TraceSummary{runs[0].Summary()}) {
		if strings.Count(out, r.label) != 1 {
			t.Errorf("row %q appears %d times", r.label, strings.Count(out, r.label))
		}
	}
}

// TestWriteTraceHTML: one document, the schedulers' names escaped, a chart
// per replay plus the wait CDF and the queue shares, each well-formed.
func TestWriteTraceHTML(t *testing.T) {
	runs := twoRuns()
	var b bytes.Buffer
	if err := WriteTraceHTML(&b, runs); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.Count(out, "<html") != 1 || !strings.HasSuffix(strings.TrimSpace(out), "</html>") {
		t.Error("want one HTML document")
	}
	for _, want := range []string{
		"<th>phalanx</th><th>stock &lt;b&gt;</th>",
		"1 nodes, 8 GPUs, 2 jobs, replayed at 10x", "seconds of the replay × 10",
		"<h3>phalanx</h3>", "<h3>stock &lt;b&gt;</h3>",
		"<td>jobs started</td><td class=\"num\">2/2</td><td class=\"num\">2/2</td>",
		"Queue shares", "qa (weight 1)", "qb (weight 3)",
		"<td>leaf</td><td>l0</td><td class=\"num\">8</td><td class=\"num\">6.0</td>",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(out, "<b>") || strings.Contains(out, "<script") {
		t.Error("page has unescaped markup or a script")
	}
	svgs := regexp.MustCompile(`(?s)<svg.*?</svg>`).FindAllString(out, -1)
	if len(svgs) != len(runs)+2 {
		t.Errorf("%d charts, want %d (allocation per replay, waits, shares)", len(svgs), len(runs)+2)
	}
	for i, s := range svgs {
		if err := xml.Unmarshal([]byte(s), new(struct{})); err != nil {
			t.Errorf("chart %d: %v", i, err)
		}
	}
}

// TestAllocationChart: a wait band per sample with jobs waiting, four
// lines of a point per sample; nothing to draw without GPUs.
func TestAllocationChart(t *testing.T) {
	tr := twoRuns()[0]
	out := string(allocationChart(tr))
	if n := strings.Count(out, `fill-opacity=".35"`); n != 1 {
		t.Errorf("%d wait bands, want 1", n)
	}
	lines := regexp.MustCompile(`points="([^"]*)"`).FindAllStringSubmatch(out, -1)
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 4", len(lines))
	}
	for _, l := range lines {
		if n := len(strings.Fields(l[1])); n != len(tr.Result.Samples) {
			t.Errorf("line of %d points, want %d", n, len(tr.Result.Samples))
		}
	}
	// The time axis is in trace seconds: 4 s at 10x ends at 40.
	if !strings.Contains(out, ">40s</text>") {
		t.Errorf("axis does not reach 40 trace seconds:\n%s", out)
	}
	tr.Result.GPUs = 0
	if out := string(allocationChart(tr)); strings.Contains(out, "polyline") {
		t.Error("lines drawn for a cluster without GPUs")
	}
}

// TestWaitCDF: each scheduler's line starts at 0 and steps up once per
// wait.
func TestWaitCDF(t *testing.T) {
	sums := []TraceSummary{{Scheduler: "a", Waits: []float64{3, 1, 2}}, {Scheduler: "b", Waits: []float64{5}}}
	out := string(waitCDF(sums))
	lines := regexp.MustCompile(`points="([^"]*)"`).FindAllStringSubmatch(out, -1)
	if len(lines) != len(sums) {
		t.Fatalf("%d lines, want %d", len(lines), len(sums))
	}
	for i, l := range lines {
		if n := len(strings.Fields(l[1])); n != 1+2*len(sums[i].Waits) {
			t.Errorf("%s: %d points, want %d", sums[i].Scheduler, n, 1+2*len(sums[i].Waits))
		}
	}
	if !strings.Contains(out, "<title>a: p50 0s, p95 0s</title>") {
		t.Errorf("tooltip missing:\n%s", out)
	}
}

// TestQueueShareBars: a bar and a deserved mark per queue and scheduler;
// nothing without queues.
func TestQueueShareBars(t *testing.T) {
	if queueShareBars(nil) != "" || queueShareBars([]TraceSummary{{}}) != "" {
		t.Error("bars drawn without queues")
	}
	q := []TraceQueueShare{{Name: "a", Weight: 1, Share: 0.2, Deserved: 0.3}, {Name: "b", Weight: 2, Share: 0.6, Deserved: 0.5}}
	sums := []TraceSummary{{Scheduler: "x", Queues: q}, {Scheduler: "y", Queues: q[:1]}}
	out := string(queueShareBars(sums))
	if n := strings.Count(out, "<rect"); n != 3 {
		t.Errorf("%d bars, want 3 (y lacks queue b)", n)
	}
	if n := strings.Count(out, `stroke-dasharray="4 3"`); n != 3 {
		t.Errorf("%d deserved marks, want 3", n)
	}
	for _, want := range []string{"a (weight 1)", "b (weight 2)", "a, x: share 20.0%, deserved 30.0%"} {
		if !strings.Contains(out, want) {
			t.Errorf("bars lack %q", want)
		}
	}
	// The y axis reaches the largest share (60%), in round steps, not 100%.
	top := 0
	for _, m := range regexp.MustCompile(`>(\d+)%</text>`).FindAllStringSubmatch(out, -1) {
		var v int
		fmt.Sscan(m[1], &v)
		top = max(top, v)
	}
	if top < 60 || top >= 100 {
		t.Errorf("y axis tops at %d%%, want the largest share 60%% covered and no more than needed", top)
	}
	if err := xml.Unmarshal([]byte(out), new(struct{})); err != nil {
		t.Error(err)
	}
}
