package replay

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/sim"
	"github.com/phalanx-sched/phalanx/internal/sim/metrics"
	"github.com/phalanx-sched/phalanx/internal/sim/scenario"
)

func TestDurationShares(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		in   map[string]time.Duration
		want map[string]float64
	}{
		{nil, nil},
		{map[string]time.Duration{"a": 0}, nil},
		{map[string]time.Duration{"a": s}, map[string]float64{"a": 1}},
		{map[string]time.Duration{"a": s, "b": 3 * s}, map[string]float64{"a": 0.25, "b": 0.75}},
	} {
		if got := durationShares(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("durationShares(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestCauseParts: the shares in metrics.WaitCauses order, missing ones 0%.
func TestCauseParts(t *testing.T) {
	shares := map[string]float64{metrics.WaitRoomHeld: 0.25, metrics.WaitNoRoom: 0.754}
	var want []string
	for _, c := range metrics.WaitCauses {
		want = append(want, fmt.Sprintf("%.0f%%", 100*shares[c]))
	}
	if got := causeParts(shares); got != strings.Join(want, " / ") || got != "75% / 0% / 25%" {
		t.Errorf("causeParts = %q, want %q", got, strings.Join(want, " / "))
	}
	if got := causeParts(nil); got != "0% / 0% / 0%" {
		t.Errorf("causeParts(nil) = %q", got)
	}
}

func TestOutcome(t *testing.T) {
	for _, tc := range []struct {
		j    JobWait
		want string
	}{
		{JobWait{}, "never started"},
		{JobWait{Restarted: true}, "never started"},
		{JobWait{Started: true}, "started"},
		{JobWait{Started: true, Restarted: true}, "restarted"},
	} {
		if got := tc.j.outcome(); got != tc.want {
			t.Errorf("%+v: outcome %q, want %q", tc.j, got, tc.want)
		}
	}
}

func TestSmallFormats(t *testing.T) {
	if pct(0.1234) != "12.3%" || pct(1) != "100.0%" || pct(0) != "0.0%" {
		t.Errorf("pct: %s %s %s", pct(0.1234), pct(1), pct(0))
	}
	if safeDiv(1, 0) != 0 || safeDiv(3, 4) != 0.75 {
		t.Errorf("safeDiv: %v %v", safeDiv(1, 0), safeDiv(3, 4))
	}
	if orDash("") != "-" || orDash("leaf") != "leaf" {
		t.Error("orDash")
	}
}

// TestJobTimeShares: each key's job-seconds over all of them, counting only
// the included spans.
func TestJobTimeShares(t *testing.T) {
	s := time.Second
	samples := []sim.Sample{
		{WaitCauses: map[string]int{"x": 2}},
		{WaitCauses: map[string]int{"x": 1, "y": 1}},
		{WaitCauses: map[string]int{"y": 100}}, // not included
	}
	at := []time.Duration{0, 3 * s, 4 * s}
	include := []bool{true, true, false}
	got := jobTimeShares(samples, at, 10*s, include, func(x sim.Sample) map[string]int { return x.WaitCauses })
	// x: 2 jobs × 3 s + 1 × 1 s = 7; y: 1 × 1 s = 1.
	if math.Abs(got["x"]-7.0/8) > 1e-12 || math.Abs(got["y"]-1.0/8) > 1e-12 {
		t.Errorf("shares %v, want x 7/8, y 1/8", got)
	}
	if got := jobTimeShares(samples, at, 10*s, []bool{false, false, false}, func(x sim.Sample) map[string]int { return x.WaitCauses }); got != nil {
		t.Errorf("nothing included: %v", got)
	}
}

// TestMeanWhile: the time-weighted mean per key over the spans with counts;
// spans whose sample has none do not count.
func TestMeanWhile(t *testing.T) {
	s := time.Second
	samples := []sim.Sample{
		{SchedulerQueue: map[string]int{"active": 4}},
		{},
		{SchedulerQueue: map[string]int{"active": 1, "backoff": 2}},
	}
	at := []time.Duration{0, s, 2 * s}
	all := []bool{true, true, true}
	got := meanWhile(samples, at, 5*s, all, func(x sim.Sample) map[string]int { return x.SchedulerQueue })
	// active: (4×1 + 1×3) / 4 s; backoff: 2×3 / 4 s.
	if want := map[string]float64{"active": 7.0 / 4, "backoff": 6.0 / 4}; !reflect.DeepEqual(got, want) {
		t.Errorf("means %v, want %v", got, want)
	}
	if got := meanWhile(samples[1:2], at[:1], s, all[:1], func(x sim.Sample) map[string]int { return x.SchedulerQueue }); got != nil {
		t.Errorf("no counts: %v", got)
	}
	if spanSeconds(at, 5*s, []bool{true, false, true}) != 4 {
		t.Errorf("span %v, want 4", spanSeconds(at, 5*s, []bool{true, false, true}))
	}
}

// TestLongestWaitsCapped: at most longestWaitLines jobs, longest first, ties
// by name; the word that held a job longest, ties to the first by name.
func TestLongestWaitsCapped(t *testing.T) {
	s := time.Second
	r := &sim.Result{Scenario: &scenario.Scenario{Name: "t"}, Elapsed: 100 * s}
	for i := range longestWaitLines + 3 {
		j := &sim.JobResult{Job: scenario.Job{Name: fmt.Sprintf("j%02d", i), Replicas: 1}, Submitted: 0, QuorumAt: time.Duration(1+i%5) * s}
		r.Jobs = append(r.Jobs, j)
	}
	r.Jobs[3].HeldBy = map[string]time.Duration{"b": 2 * s, "a": 2 * s, "c": s}
	got := TraceRun{Speed: 2, Result: r}.longestWaits()
	if len(got) != longestWaitLines {
		t.Fatalf("%d waits, want %d", len(got), longestWaitLines)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Wait > got[i-1].Wait || got[i].Wait == got[i-1].Wait && got[i].Key < got[i-1].Key {
			t.Errorf("waits out of order at %d: %+v then %+v", i, got[i-1], got[i])
		}
	}
	// The longest wait is 5 s of run, 10 trace seconds: jobs 4, 9 and 14.
	if got[0].Key != "default/j04" || got[0].Wait != 10 || got[1].Key != "default/j09" {
		t.Errorf("first waits %+v", got[:2])
	}
	for _, w := range got {
		if w.Key == "default/j03" && w.HeldBy != "a" {
			t.Errorf("j03 held longest by %q, want a", w.HeldBy)
		}
	}
}

// TestQueueSharesNeedQueuesAndGPUs: no queues or no GPUs, no shares.
func TestQueueSharesNeedQueuesAndGPUs(t *testing.T) {
	q := []scenario.Queue{{Name: "a", QueueSpec: phalanxv1alpha1.QueueSpec{Weight: 1}}}
	samples := []sim.Sample{{QueueUsed: map[string]int64{"a": 1}}}
	for _, r := range []*sim.Result{
		{Scenario: &scenario.Scenario{}, GPUs: 8, Samples: samples},
		{Scenario: &scenario.Scenario{Queues: q}, Samples: samples},
	} {
		if got := (TraceRun{Result: r}).queueShares([]time.Duration{0}, []bool{true}); got != nil {
			t.Errorf("shares %v, want none", got)
		}
	}
}

// TestSummaryRows: a row per queue of the first replay, "-" where another
// replay lacks it; the lost work's part of all run work.
func TestSummaryRows(t *testing.T) {
	sums := []TraceSummary{
		{Started: 3, Jobs: 4, Alloc: 0.5, Goodput: 300, LostGPUSeconds: 100,
			Queues: []TraceQueueShare{{Name: "a", Weight: 1, Share: 0.25, Deserved: 0.5}, {Name: "b", Weight: 2, Share: 0.5, Deserved: 0.5}}},
		{Started: 4, Jobs: 4, Queues: []TraceQueueShare{{Name: "a", Weight: 1, Share: 0.1, Deserved: 0.2}}},
	}
	cells := map[string][]string{}
	for _, r := range summaryRows(sums) {
		for _, s := range sums {
			cells[r.label] = append(cells[r.label], r.cell(s))
		}
	}
	for label, want := range map[string][]string{
		"jobs started":                         {"3/4", "4/4"},
		"GPU allocation, whole run":            {"50.0%", "0.0%"},
		"GPU·s lost to evictions (of all run)": {"100 (25.0%)", "0 (0.0%)"},
		"queue a (weight 1): share / deserved": {"25.0% / 50.0%", "10.0% / 20.0%"},
		"queue b (weight 2): share / deserved": {"50.0% / 50.0%", "-"},
	} {
		if !reflect.DeepEqual(cells[label], want) {
			t.Errorf("row %q: %v, want %v", label, cells[label], want)
		}
	}
	if len(summaryRows(nil)) == 0 {
		t.Error("no rows without replays")
	}
}

// TestWhereSections: a replay with neither idle domains nor waits has no
// section; a wait's cells are the text report's.
func TestWhereSections(t *testing.T) {
	sums := []TraceSummary{
		{Scheduler: "empty"},
		{Scheduler: "x", LongestWaits: []JobWait{{Key: "default/j", Pods: 2, GPUsPerPod: 4, Wait: 12.4, Causes: map[string]float64{metrics.WaitNoRoom: 1}}}},
	}
	got := whereSections(sums)
	if len(got) != 1 || got[0].Scheduler != "x" {
		t.Fatalf("sections %+v", got)
	}
	want := []string{"default/j", "2 × 4", "-", "12", "never started", "100% / 0% / 0%", "-"}
	if !reflect.DeepEqual(got[0].Waits[0], want) {
		t.Errorf("cells %q, want %q", got[0].Waits[0], want)
	}
}
