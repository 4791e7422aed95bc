package estimatorbench

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/phalanx-sched/phalanx/internal/bench"
	"github.com/phalanx-sched/phalanx/internal/bench/host"
	"github.com/phalanx-sched/phalanx/internal/bench/profiles"
	"github.com/phalanx-sched/phalanx/internal/bench/schedproc"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
	"github.com/phalanx-sched/phalanx/manifests"
)

// metricsSource is what the timing and profiling read of the scheduler
// process: its pid (for CPU time) and its HTTP endpoints (/metrics,
// /debug/pprof).
type metricsSource interface {
	PID() int
	Get(ctx context.Context, path string) ([]byte, error)
}

// timeCase makes one warm-up call, then runs timed calls, each under
// timeout; the estimator's own duration of each call is read from its
// /metrics between calls.
func timeCase(ctx context.Context, ec *Case, call query, runs int, timeout time.Duration, sched metricsSource) error {
	pid := sched.PID()
	cpu := func() float64 {
		s, err := host.CPUSeconds(pid)
		if err != nil {
			return math.NaN()
		}
		return s
	}
	var cpuMS float64
	one := func(timeout time.Duration) (int32, time.Duration, error) {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		c0, t0 := cpu(), time.Now()
		n, err := call(cctx)
		d := time.Since(t0)
		cpuMS = (cpu() - c0) * 1000
		return n, d, err
	}
	// The warm-up call may take its time (first template read, caches).
	if _, _, err := one(max(timeout, 30*time.Second)); err != nil {
		return fmt.Errorf("warm-up call: %w", err)
	}
	before, serverOK := estimatorSeconds(ctx, sched)
	for range runs {
		n, d, err := one(timeout)
		if status.Code(err) == codes.DeadlineExceeded && ctx.Err() == nil {
			// Karmada gets no answer from this cluster on this attempt.
			ec.Timeouts++
			// The estimator goes on with the call; wait for it to end
			// (its duration shows in /metrics) before the next one.
			after, ok := waitEstimatorSeconds(ctx, sched, before)
			serverOK = serverOK && ok
			before = after
			continue
		}
		if err != nil {
			return fmt.Errorf("after %d calls: %w", len(ec.ClientMS)+ec.Timeouts, err)
		}
		if len(ec.Answers) == 0 || ec.Answers[len(ec.Answers)-1] != n {
			ec.Answers = append(ec.Answers, n)
		}
		ec.Answer = n
		ec.ClientMS = append(ec.ClientMS, float64(d.Microseconds())/1000)
		ec.CPUMS = append(ec.CPUMS, cpuMS)
		after, ok := estimatorSeconds(ctx, sched)
		serverOK = serverOK && ok
		if serverOK {
			// Only this client calls: the sum's growth is this call.
			ec.ServerMS = append(ec.ServerMS, (after-before)*1000)
		}
		before = after
	}
	if !serverOK {
		ec.ServerMS = nil
	}
	return nil
}

// waitEstimatorSeconds waits (up to a minute) until the estimator's sum of
// answer times has grown past before: a timed-out call has ended there.
func waitEstimatorSeconds(ctx context.Context, sched metricsSource, before float64) (float64, bool) {
	deadline := time.Now().Add(time.Minute)
	for {
		after, ok := estimatorSeconds(ctx, sched)
		if !ok || after > before || time.Now().After(deadline) || ctx.Err() != nil {
			return after, ok
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// estimatorMetric is the estimator's histogram of answer times.
const estimatorMetric = "phalanx_estimator_duration_seconds"

// estimatorSeconds is the sum of the estimator's answer times so far, all
// methods together.
func estimatorSeconds(ctx context.Context, sched metricsSource) (float64, bool) {
	raw, err := sched.Get(ctx, "/metrics")
	if err != nil {
		return 0, false
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return 0, false
	}
	f, ok := families[estimatorMetric]
	if !ok {
		return 0, false
	}
	sum := 0.0
	for _, m := range f.GetMetric() {
		sum += m.GetHistogram().GetSampleSum()
	}
	return sum, true
}

// profileCase calls the estimator back to back for at least o.ProfileSeconds
// under the scheduler's CPU profiler.
func profileCase(ctx context.Context, name string, call query, o Options, sched metricsSource) (*profiles.Top, error) {
	cp := profiles.StartCPUProfile(ctx, sched.Get)
	deadline := time.Now().Add(time.Duration(o.ProfileSeconds) * time.Second)
	calls := 0
	for time.Now().Before(deadline) || calls < o.Runs {
		cctx, cancel := context.WithTimeout(ctx, o.Timeout)
		_, err := call(cctx)
		cancel()
		if err != nil {
			_, _, _ = cp.Stop()
			return nil, err
		}
		calls++
	}
	_, prof, err := cp.Stop()
	if err != nil {
		return nil, err
	}
	top := profiles.Summarise(prof, "cpu", len(prof.SampleType)-1, 20, nil)
	top.Note = fmt.Sprintf("%d calls", calls)
	if lost := cp.Lost(); lost != "" {
		top.Note += "; " + lost
	}
	if o.ProfileDir != "" {
		if err := os.MkdirAll(o.ProfileDir, 0o755); err != nil {
			return nil, err
		}
		path := filepath.Join(o.ProfileDir, "estimator-"+name+".cpu.pb.gz")
		if err := profiles.Write(prof, path); err != nil {
			return nil, err
		}
		top.Path = path
	}
	return &top, nil
}

// startEstimatorScheduler runs phalanx-scheduler with the canonical
// configuration, serving /metrics and pprof on a local port, with extra
// flags.
func startEstimatorScheduler(c *testcluster.Cluster, binary string, extra ...string) (*schedproc.Process, error) {
	return schedproc.Start(c, binary, manifests.SchedulerConfig, bench.Phalanx.SchedulerName(), false, "estimator-scheduler", extra...)
}
