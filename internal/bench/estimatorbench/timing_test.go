package estimatorbench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fakeScheduler is this test process standing in for the scheduler: its
// /metrics holds an estimator histogram whose sum the test sets.
type fakeScheduler struct {
	mu   sync.Mutex
	sum  float64
	body string // overrides the histogram when set
	err  error
}

func (f *fakeScheduler) PID() int { return os.Getpid() }

func (f *fakeScheduler) Get(_ context.Context, path string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if path != "/metrics" {
		return nil, fmt.Errorf("unexpected path %s", path)
	}
	if f.err != nil {
		return nil, f.err
	}
	if f.body != "" {
		return []byte(f.body), nil
	}
	return []byte(fmt.Sprintf("# TYPE %[1]s histogram\n%[1]s_bucket{method=\"sets\",le=\"+Inf\"} 1\n%[1]s_sum{method=\"sets\"} %[2]g\n%[1]s_count{method=\"sets\"} 1\n", estimatorMetric, f.sum)), nil
}

func (f *fakeScheduler) add(s float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sum += s
}

func TestEstimatorSeconds(t *testing.T) {
	two := fmt.Sprintf("# TYPE %[1]s histogram\n%[1]s_bucket{method=\"a\",le=\"+Inf\"} 1\n%[1]s_sum{method=\"a\"} 0.25\n%[1]s_count{method=\"a\"} 1\n"+
		"%[1]s_bucket{method=\"b\",le=\"+Inf\"} 1\n%[1]s_sum{method=\"b\"} 0.5\n%[1]s_count{method=\"b\"} 1\n", estimatorMetric)
	for _, tc := range []struct {
		name string
		f    *fakeScheduler
		sum  float64
		ok   bool
	}{
		{"summed over methods", &fakeScheduler{body: two}, 0.75, true},
		{"no estimator histogram", &fakeScheduler{body: "# TYPE other counter\nother 1\n"}, 0, false},
		{"not metrics", &fakeScheduler{body: "not { metrics"}, 0, false},
		{"unreachable", &fakeScheduler{err: errors.New("refused")}, 0, false},
	} {
		if sum, ok := estimatorSeconds(context.Background(), tc.f); sum != tc.sum || ok != tc.ok {
			t.Errorf("%s: %v, %v; want %v, %v", tc.name, sum, ok, tc.sum, tc.ok)
		}
	}
}

// TestTimeCase: each timed call's answer, client time, and server time as
// the growth of the estimator's sum over the call.
func TestTimeCase(t *testing.T) {
	f := &fakeScheduler{}
	calls := 0
	call := func(context.Context) (int32, error) {
		calls++
		f.add(0.002 * float64(calls)) // the server's time for this call
		if calls > 2 {
			return 5, nil
		}
		return 4, nil
	}
	var ec Case
	if err := timeCase(context.Background(), &ec, call, 3, time.Second, f); err != nil {
		t.Fatal(err)
	}
	if calls != 4 {
		t.Errorf("%d calls, want a warm-up and 3", calls)
	}
	// Calls 2..4 (after the warm-up) took 4, 6 and 8 ms on the server.
	if len(ec.ServerMS) != 3 {
		t.Fatalf("server ms %v, want 3", ec.ServerMS)
	}
	for i, want := range []float64{4, 6, 8} {
		if math.Abs(ec.ServerMS[i]-want) > 1e-6 {
			t.Errorf("server ms[%d] = %v, want %v", i, ec.ServerMS[i], want)
		}
	}
	if ec.Answer != 5 || fmt.Sprint(ec.Answers) != "[4 5]" || len(ec.ClientMS) != 3 || len(ec.CPUMS) != 3 || ec.Timeouts != 0 {
		t.Errorf("case %+v: want answers [4 5], 3 timed calls", ec)
	}
}

func TestTimeCaseFailures(t *testing.T) {
	boom := errors.New("boom")
	deadline := status.Error(codes.DeadlineExceeded, "too slow")
	for _, tc := range []struct {
		name string
		// results of the calls in order, the warm-up first
		results  []error
		err      string
		timeouts int
		server   bool
	}{
		{"warm-up fails", []error{boom}, "warm-up call: boom", 0, false},
		{"a call fails", []error{nil, nil, boom}, "after 1 calls: boom", 0, false},
		{"a call times out", []error{nil, deadline, nil}, "", 1, true},
	} {
		f := &fakeScheduler{}
		i := 0
		call := func(context.Context) (int32, error) {
			err := tc.results[i]
			i++
			f.add(0.001) // every call, timed out or not, ends on the server
			return 1, err
		}
		var ec Case
		err := timeCase(context.Background(), &ec, call, len(tc.results)-1, time.Second, f)
		if got := ""; err != nil || tc.err != "" {
			if err != nil {
				got = err.Error()
			}
			if got != tc.err {
				t.Errorf("%s: err %q, want %q", tc.name, got, tc.err)
			}
			continue
		}
		if ec.Timeouts != tc.timeouts || len(ec.ClientMS) != len(tc.results)-1-tc.timeouts || (ec.ServerMS != nil) != tc.server {
			t.Errorf("%s: case %+v", tc.name, ec)
		}
	}
	// Without /metrics the server times are unknown, not zero.
	f := &fakeScheduler{body: "no metrics here {"}
	var ec Case
	if err := timeCase(context.Background(), &ec, func(context.Context) (int32, error) { return 1, nil }, 2, time.Second, f); err != nil {
		t.Fatal(err)
	}
	if ec.ServerMS != nil || len(ec.ClientMS) != 2 {
		t.Errorf("without metrics: server %v, client %v", ec.ServerMS, ec.ClientMS)
	}
	if fmt.Sprint(ec.Answers) != "[1]" {
		t.Errorf("answers %v", ec.Answers)
	}
}

// TestWaitEstimatorSeconds: the wait ends once the sum has grown, or at
// once when the context is done.
func TestWaitEstimatorSeconds(t *testing.T) {
	f := &fakeScheduler{sum: 0.5}
	if after, ok := waitEstimatorSeconds(context.Background(), f, 0.25); after != 0.5 || !ok {
		t.Errorf("grown: %v, %v; want 0.5, true", after, ok)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if after, ok := waitEstimatorSeconds(ctx, f, 0.5); after != 0.5 || !ok {
		t.Errorf("cancelled: %v, %v; want the sum unchanged, true", after, ok)
	}
	f.err = errors.New("gone")
	if _, ok := waitEstimatorSeconds(context.Background(), f, 0.5); ok {
		t.Error("unreachable /metrics: ok")
	}
}
