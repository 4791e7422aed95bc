package estimatorbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// profilingScheduler adds the CPU profiler's endpoint to fakeScheduler:
// every window is one sample of ns nanoseconds in fn; served is closed at
// the first window.
type profilingScheduler struct {
	*fakeScheduler
	cpu     []byte
	mu      sync.Mutex
	windows int
	served  chan struct{}
}

func newProfilingScheduler(t *testing.T, fn string, ns int64) *profilingScheduler {
	t.Helper()
	f := &profile.Function{ID: 1, Name: fn}
	loc := &profile.Location{ID: 1, Line: []profile.Line{{Function: f}}}
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Function:   []*profile.Function{f}, Location: []*profile.Location{loc},
		Sample: []*profile.Sample{{Location: []*profile.Location{loc}, Value: []int64{1, ns}}},
	}
	var b strings.Builder
	if err := p.Write(&b); err != nil {
		t.Fatal(err)
	}
	return &profilingScheduler{fakeScheduler: &fakeScheduler{}, cpu: []byte(b.String()), served: make(chan struct{})}
}

func (f *profilingScheduler) Get(ctx context.Context, path string) ([]byte, error) {
	if !strings.HasPrefix(path, "/debug/pprof/profile") {
		return f.fakeScheduler.Get(ctx, path)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.windows++; f.windows == 1 {
		close(f.served)
	}
	return f.cpu, nil
}

func (f *profilingScheduler) servedWindows() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.windows
}

// afterWindow answers n, the calls past the first skip waiting for the
// profiler's first window (so that the profile holds one).
func afterWindow(f *profilingScheduler, skip int, n int32) query {
	calls := 0
	return func(ctx context.Context) (int32, error) {
		if calls++; calls > skip {
			select {
			case <-f.served:
			case <-ctx.Done():
				return 0, fmt.Errorf("no profile window: %w", ctx.Err())
			}
		}
		return n, nil
	}
}

func TestProfileCase(t *testing.T) {
	const fn = "github.com/phalanx-sched/phalanx/internal/gang.Plan"
	f := newProfilingScheduler(t, fn, 3e6)
	dir := t.TempDir()
	// ProfileSeconds 0: the calls are Runs.
	o := Options{Runs: 3, Timeout: 5 * time.Second, ProfileDir: filepath.Join(dir, "profiles")}
	top, err := profileCase(context.Background(), "sets", afterWindow(f, 0, 1), o, f)
	if err != nil {
		t.Fatal(err)
	}
	windows := f.servedWindows()
	if top.Note != "3 calls" || top.Total != float64(windows)*3e6 || len(top.Flat) != 1 || top.Flat[0].Func != fn || top.Flat[0].Flat != 1 {
		t.Errorf("top = %+v, want 3 calls, %d windows of 3 ms in %s", top, windows, fn)
	}
	want := filepath.Join(dir, "profiles", "estimator-sets.cpu.pb.gz")
	if top.Path != want {
		t.Fatalf("path %q, want %q", top.Path, want)
	}
	r, err := os.Open(want)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if kept, err := profile.Parse(r); err != nil || len(kept.Sample) == 0 {
		t.Errorf("kept profile: %v, %v", kept, err)
	}
}

func TestProfileCaseFailures(t *testing.T) {
	boom := errors.New("boom")
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		// profiled: the scheduler serves CPU profiles
		profiled bool
		call     func(*profilingScheduler) query
		dir      string
		err      string
	}{
		{"a call fails", true, func(*profilingScheduler) query {
			return func(context.Context) (int32, error) { return 0, boom }
		}, "", "boom"},
		{"no profile window", false, func(*profilingScheduler) query {
			return func(context.Context) (int32, error) { return 1, nil }
		}, "", "no CPU profile windows"},
		{"profile dir is a file", true, func(f *profilingScheduler) query { return afterWindow(f, 0, 1) }, file, "not a directory"},
	} {
		f := newProfilingScheduler(t, "main.main", 1)
		var sched metricsSource = f
		if !tc.profiled {
			sched = f.fakeScheduler // its /debug/pprof paths fail
		}
		o := Options{Runs: 1, Timeout: 5 * time.Second, ProfileDir: tc.dir}
		top, err := profileCase(context.Background(), "sets", tc.call(f), o, sched)
		if err == nil || !strings.Contains(err.Error(), tc.err) || top != nil {
			t.Errorf("%s: %v, %v; want no profile and an error naming %q", tc.name, top, err, tc.err)
		}
	}
}

// TestRunCases: every case timed in order, failures named by case and
// kept in the report; only the sane cases profiled.
func TestRunCases(t *testing.T) {
	f := newProfilingScheduler(t, "main.main", 1)
	var progress strings.Builder
	o := Options{Runs: 2, Timeout: 5 * time.Second, Profile: true, Progress: &progress}
	two := func(n int32) bool { return n == 2 }
	// The warm-up and the timed calls come before the profiled ones.
	cs := []benchCase{
		{Case{Name: "ok", Want: "2"}, afterWindow(f, 1+o.Runs, 2), two},
		{Case{Name: "insane", Want: "2"}, afterWindow(f, 1+o.Runs, 3), two},
		{Case{Name: "broken", Want: "2"}, func(context.Context) (int32, error) { return 0, errors.New("unavailable") }, two},
	}
	var rep Report
	failed, err := runCases(context.Background(), o, f, cs, &rep)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(failed); got != "[insane: answer 3, want 2 broken: warm-up call: unavailable]" {
		t.Errorf("failed = %s", got)
	}
	if len(rep.Cases) != 3 {
		t.Fatalf("cases %+v, want 3", rep.Cases)
	}
	for i, want := range []struct {
		name, failed string
		calls        int
		profiled     bool
	}{
		{"ok", "", 2, true},
		{"insane", "answer 3, want 2", 2, false},
		{"broken", "warm-up call: unavailable", 0, false},
	} {
		c := rep.Cases[i]
		if c.Name != want.name || c.Failed != want.failed || len(c.ClientMS) != want.calls || (c.CPU != nil) != want.profiled {
			t.Errorf("case %d = %+v, want %+v", i, c, want)
		}
	}
	if rep.Cases[0].CPU != nil && rep.Cases[0].CPU.Note != "2 calls" {
		t.Errorf("ok profiled over %q, want 2 calls", rep.Cases[0].CPU.Note)
	}
	out := progress.String()
	for _, want := range []string{"estimator: ok       warm-up and 2 calls: answer 2, median ", "estimator: insane   warm-up and 2 calls: FAILED: answer 3, want 2\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("progress lacks %q:\n%s", want, out)
		}
	}
}

// TestRunCasesProfilingError: a failed profile ends the run, without the
// case.
func TestRunCasesProfilingError(t *testing.T) {
	f := newProfilingScheduler(t, "main.main", 1)
	o := Options{Runs: 1, Timeout: 5 * time.Second, Profile: true, Progress: io.Discard}
	calls := 0
	flaky := func(context.Context) (int32, error) {
		if calls++; calls > 1+o.Runs {
			return 0, errors.New("reset")
		}
		return 1, nil
	}
	var rep Report
	failed, err := runCases(context.Background(), o, f, []benchCase{{Case{Name: "sets"}, flaky, func(int32) bool { return true }}}, &rep)
	if err == nil || err.Error() != "sets: profiling: reset" || len(failed) != 0 || len(rep.Cases) != 0 {
		t.Errorf("runCases = %v, %v, cases %+v; want the profiling error alone", failed, err, rep.Cases)
	}
}

// TestWaitWholeMember: done at the first exact count of single replicas;
// otherwise the error says what the estimator answered, the count wanted
// and the scheduler's log.
func TestWaitWholeMember(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	o := Options{Nodes: 9, GangSize: 4} // 36 single replicas
	for _, tc := range []struct {
		name string
		ctx  context.Context
		n    int32
		err  error
		want string
	}{
		{"exact", context.Background(), 36, nil, ""},
		{"short", cancelled, 35, nil, "the estimator's count of single replicas is 35 (<nil>), want 36: context canceled; scheduler log: the tail"},
		{"failing", cancelled, 0, errors.New("unavailable"), "the estimator's count of single replicas is 0 (unavailable), want 36: context canceled; scheduler log: the tail"},
	} {
		var progress strings.Builder
		o.Progress = &progress
		replicas := func(context.Context) (int32, error) { return tc.n, tc.err }
		err := waitWholeMember(tc.ctx, o, replicas, func() string { return "the tail" })
		if got := fmt.Sprint(err); (tc.want == "" && err != nil) || (tc.want != "" && got != tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		if !strings.Contains(progress.String(), "whole member (36 single replicas)") {
			t.Errorf("%s: progress %q", tc.name, progress.String())
		}
	}
}
