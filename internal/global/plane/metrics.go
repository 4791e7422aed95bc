package plane

import (
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/phalanx-sched/phalanx/internal/global"
)

var (
	passDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace: "phalanx", Subsystem: "global", Name: "pass_duration_seconds",
		Help:           "Time of one global pass: every waiting job decided, the members' estimators asked.",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 16),
		StabilityLevel: metrics.ALPHA,
	})
	verdictsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "phalanx", Subsystem: "global", Name: "verdicts_total",
		Help:           "Verdicts of global passes by reason (Success: dispatched; the others: why a job waits) and whether it was a move.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason", "move"})
	waitingJobs = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "phalanx", Subsystem: "global", Name: "waiting_jobs",
		Help:           "Jobs waiting on the Karmada plane after the last pass, by queue.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"queue"})
	registerOnce sync.Once
)

// RegisterMetrics registers the tier's metrics with component-base's
// legacy registry (served on the binary's /metrics).
func RegisterMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(passDuration, verdictsTotal, waitingJobs) })
}

func observePass(d time.Duration, verdicts []global.Verdict) {
	passDuration.Observe(d.Seconds())
	waiting := map[string]float64{}
	for _, v := range verdicts {
		move := "false"
		if v.Move {
			move = "true"
		}
		verdictsTotal.WithLabelValues(string(v.Reason), move).Inc()
		if v.Member == "" {
			waiting[v.Job.Queue]++
		}
	}
	waitingJobs.Reset()
	for q, n := range waiting {
		waitingJobs.WithLabelValues(q).Set(n)
	}
}
