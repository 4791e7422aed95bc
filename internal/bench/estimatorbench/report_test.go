package estimatorbench

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/phalanx-sched/phalanx/internal/bench/profiles"
	"github.com/phalanx-sched/phalanx/internal/bench/stats"
)

// flat is the text with its padding squeezed to single spaces.
func flat(s string) string { return strings.Join(strings.Fields(s), " ") }

// rowOf is the flattened table row of case name.
func rowOf(out, name string) string {
	for _, l := range strings.Split(out, "\n") {
		if f := flat(l); strings.HasPrefix(f, name+" ") {
			return f
		}
	}
	return ""
}

func TestWriteReport(t *testing.T) {
	fc := []profiles.FuncCost{{Func: "github.com/phalanx-sched/phalanx/internal/gang.Plan", Flat: 0.25, Cum: 0.5}}
	rep := Report{Nodes: 1000, GangSize: 4, Runs: 2, Timeout: 3 * time.Second, GPUs: 8000, UsedGPUs: 2000, FillPods: 900,
		Setup: 65400 * time.Millisecond, Wall: 2 * time.Minute, PeakRSS: 64 << 20,
		Cases: []Case{
			{Name: "sets", What: "sets, no topology", Answer: 7, Answers: []int32{7}, Want: "1..9",
				ClientMS: []float64{10, 30}, ServerMS: []float64{5, 7}, CPUMS: []float64{20, 40}},
			{Name: "sets-ib", What: "sets, one ib-cluster", Want: "1..3", ClientMS: []float64{150, 50}, Timeouts: 1,
				Failed: "1 of 2 calls timed out"},
			{Name: "replicas", What: "single replicas", Answer: 5, Answers: []int32{5}, Want: "5", ClientMS: []float64{1},
				CPU: &profiles.Top{Total: 2e9, Note: "n", Path: "/p", Flat: fc, Own: fc}},
		}}
	var b strings.Builder
	WriteReport(&b, rep, "a machine", "bench estimator")
	raw := b.String()
	out := flat(raw)
	for _, want := range []string{
		"Karmada estimator latency: bench estimator",
		// 1000 nodes: two IB clusters of 512, the second partial.
		"Machine: a machine. Member: 1000 nodes (32 CPU, 256Gi, 8 GPUs; 2 IB clusters of 512 nodes, leaves of 32;",
		"900 pods bound taking 2000 of 8000 GPUs (25%). Set: 1 master + 3 workers. 2 timed calls per case after one warm-up, each under a 3s timeout;",
		"sets-ib FAILED: 1 of 2 calls timed out",
		"sets-ib sets, one ib-cluster",
		"Setup (cluster, nodes, pods, scheduler, first full answer) 1m5s; whole run 2m0s; scheduler peak RSS 64 MiB.",
		"CPU profile of the scheduler, case replicas: 2.00 s in total (n); go tool pprof /p",
		"25.0% 50.0% internal/gang.Plan",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, raw)
		}
	}
	for name, want := range map[string]string{
		// Medians of two calls (the mean of both), p95 the larger.
		"sets":     "sets 7 1..9 20.0 (10.0–30.0) 30.0 6.0 (5.0–7.0) 7.0 30.0 0/2 p95 ≤ 100 ms: met",
		"sets-ib":  "sets-ib - 1..3 100.0 (50.0–150.0) 150.0 - - - 1/2 p95 ≤ 100 ms: NOT met",
		"replicas": "replicas 5 5 1.0 (1.0–1.0) 1.0 - - - 0/2 -",
	} {
		if got := rowOf(raw, name); got != want {
			t.Errorf("row %s = %q, want %q", name, got, want)
		}
	}
	if strings.Count(out, "CPU profile of the scheduler") != 1 {
		t.Errorf("profiles of unprofiled cases printed:\n%s", raw)
	}
}

// TestReportGoal: a gang case meets the goal with its p95 at most GoalMS
// and no timeouts; the replicas case has none.
func TestReportGoal(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Case
		want string
	}{
		{"at the bound", Case{Name: "sets", ClientMS: []float64{GoalMS}}, "met"},
		{"over", Case{Name: "sets", ClientMS: []float64{GoalMS + 1}}, "NOT met"},
		{"quick but a timeout", Case{Name: "sets", ClientMS: []float64{1}, Timeouts: 1}, "NOT met"},
		{"no answer at all", Case{Name: "sets"}, "NOT met"},
		{"replicas", Case{Name: "replicas", ClientMS: []float64{GoalMS + 1}}, "-"},
	} {
		var b strings.Builder
		WriteReport(&b, Report{Runs: 1, Cases: []Case{tc.c}}, "m", "c")
		row := rowOf(b.String(), tc.c.Name)
		got := row[strings.LastIndex(row, " ")+1:]
		if strings.HasSuffix(row, "NOT met") {
			got = "NOT met"
		}
		if got != tc.want {
			t.Errorf("%s: row %q, want goal %q", tc.name, row, tc.want)
		}
	}
}

func TestMsFormats(t *testing.T) {
	if got := msFmt(12.34); got != "12.3" {
		t.Errorf("msFmt(12.34) = %q, want 12.3", got)
	}
	if got := msFmt(math.NaN()); got != "-" {
		t.Errorf("msFmt(NaN) = %q, want -", got)
	}
	if got := msSpread(stats.LatencyOf(nil)); got != "-" {
		t.Errorf("msSpread of no calls = %q, want -", got)
	}
}
