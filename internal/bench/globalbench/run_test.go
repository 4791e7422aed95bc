package globalbench

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestValidateNamesTheBadField(t *testing.T) {
	cases := []struct {
		name   string
		change func(*Options)
		want   string
	}{
		{"no members", func(o *Options) { o.Members = nil }, "members: no member count"},
		{"zero members", func(o *Options) { o.Members = []int{3, 0} }, "members: 0 is below 1"},
		{"small members", func(o *Options) { o.GPUs = 16 }, "gpus: 16 per member"},
		{"no teams", func(o *Options) { o.Weights = nil }, "weights: 0 teams"},
		{"zero weight", func(o *Options) { o.Weights = []int32{2, 0} }, "weights[1]: 0 is below 1"},
		{"no load", func(o *Options) { o.Load = 0 }, "load: 0 is not positive"},
		{"no tick", func(o *Options) { o.Tick = 0 }, "tick 0s"},
		{"no runs", func(o *Options) { o.Runs = 0 }, "runs: 0 is below 1"},
		{"no waiting", func(o *Options) { o.Waiting = []int{0} }, "waiting: 0 is below 1"},
	}
	if err := Defaults().Validate(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := Defaults()
			c.change(&o)
			if err := o.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestCostWorldIsHalfFullWithTheWaitingJobs(t *testing.T) {
	o := Defaults()
	w, est, now := costWorld(o, 20, 100, 1)
	waiting := 0
	for _, j := range w.Jobs {
		if j.Member == "" {
			waiting++
			if j.Created.After(now) || now.Sub(j.Created) > time.Hour {
				t.Fatalf("job %s created %v, want within the hour before %v", j.Name, j.Created, now)
			}
		}
	}
	if waiting != 100 || len(w.Members) != 20 || len(w.Queues) != 3 {
		t.Fatalf("%d waiting, %d members, %d queues", waiting, len(w.Members), len(w.Queues))
	}
	for _, m := range w.Members {
		if u := est.used[m.Name][gpu]; u > o.GPUs/2 || u < o.GPUs/2-32 {
			t.Fatalf("member %s runs %d GPUs, want about half of %d", m.Name, u, o.GPUs)
		}
	}
}

func TestPassCostRepeatsTheSamePass(t *testing.T) {
	o := Defaults()
	o.CostTime = 20 * time.Millisecond
	for _, mk := range dispatchers {
		c := passCost(context.Background(), o, 3, 100, 2, mk)
		if c.Passes < 3 || c.PerPass <= 0 || c.Verdicts != 100 || c.Dispatched < 1 || c.Dispatched > 100 {
			t.Fatalf("%+v: want at least 3 passes, a verdict for each of 100 jobs and some dispatched", c)
		}
	}
}

// Run covers every member count, waiting count, seed and dispatcher, and
// the report prints each figure's row and the ratios.
func TestRunAndReport(t *testing.T) {
	o := small()
	var progress bytes.Buffer
	o.Progress = &progress
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Costs) != 1*1*2*2 || len(rep.Sims) != 1*2*2 || rep.Wall <= 0 {
		t.Fatalf("%d cost probes, %d runs, wall %v; want 4, 4 and a wall time", len(rep.Costs), len(rep.Sims), rep.Wall)
	}
	if n := strings.Count(progress.String(), "global-bench: "); n != 4 {
		t.Fatalf("%d progress lines, want 4:\n%s", n, progress.String())
	}
	var out bytes.Buffer
	WriteReport(&out, rep, "test machine", "phalanx-sim global-bench -runs 2")
	text := out.String()
	for _, want := range []string{
		"Global tier (Karmada): phalanx-sim global-bench -runs 2", "Machine: test machine", "stand-ins",
		"weights 2:1:1", "target 50/25/25 %", "seeds 1..2",
		"ms per pass", "decisions/s", "wait p99 s", "share error pp", "karmada-default ÷ phalanx-global",
	} {
		if !strings.Contains(text, want) {
			t.Fatalf("report lacks %q:\n%s", want, text)
		}
	}
	for _, name := range []string{"phalanx-global", baselineName} {
		rows := 0
		for _, line := range strings.Split(text, "\n") {
			if f := strings.Fields(line); len(f) > 2 && f[0] == "3" && slices.Contains(f, name) {
				rows++
			}
		}
		if rows != 2 {
			t.Fatalf("%d rows for %s on 3 members, want a cost row and a run row:\n%s", rows, name, text)
		}
	}
}

func TestRunRefusesBadOptions(t *testing.T) {
	o := small()
	o.Runs = 0
	if _, err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "runs") {
		t.Fatalf("error %v, want one naming runs", err)
	}
}

func TestRunStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, small()); err != context.Canceled {
		t.Fatalf("error %v, want context.Canceled", err)
	}
}

// The ratios divide the baseline's figure by the tier's, seed by seed.
func TestRatiosAreSeedBySeed(t *testing.T) {
	o := small()
	o.Runs = 2
	mk := func(name string, waits ...time.Duration) runResult {
		return runResult{Dispatcher: name, Members: 3, Waits: waits, TeamGPUSeconds: []float64{200, 100, 100}, BusyUsed: 1, BusyOffered: 1}
	}
	rep := Report{Options: o, Sims: []runResult{
		mk("phalanx-global", 10*time.Second), mk(baselineName, 30*time.Second),
		mk("phalanx-global", 20*time.Second), mk(baselineName, 20*time.Second),
	}}
	var out bytes.Buffer
	writeRatios(&out, rep)
	// Seed 1: 30/10 = 3, seed 2: 20/20 = 1; median 2 (1–3). Share error
	// 0/0 is no figure.
	if !strings.Contains(out.String(), "2.00 (1.00–3.00)") {
		t.Fatalf("ratios:\n%s", out.String())
	}
}

func TestListsPrintAsGiven(t *testing.T) {
	if got := teamList(3); got != "team-a, team-b, team-c" {
		t.Fatalf("teams %q", got)
	}
	if got := weightList([]int32{2, 1}); got != "2:1" {
		t.Fatalf("weights %q", got)
	}
	if got := shareList([]float64{49.6, 25.2}); got != "50/25" {
		t.Fatalf("shares %q", got)
	}
	if got := medianShares([]runResult{{TeamGPUSeconds: []float64{1, 1}}, {TeamGPUSeconds: []float64{3, 1}}, {TeamGPUSeconds: []float64{2, 2}}}); !near(got[0], 50) || !near(got[1], 50) {
		t.Fatalf("median shares %v, want 50/50", got)
	}
	if got := dispatcherNames(Report{Sims: []runResult{{Dispatcher: "b"}, {Dispatcher: "a"}, {Dispatcher: "b"}}}); strings.Join(got, ",") != "b,a" {
		t.Fatalf("names %v, want b,a", got)
	}
}
