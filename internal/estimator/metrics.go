package estimator

import (
	"sync"
	"time"

	"google.golang.org/grpc/status"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	requests = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "phalanx", Subsystem: "estimator", Name: "requests_total",
		Help:           "Karmada estimator calls by method and gRPC code.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"method", "code"})
	duration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace: "phalanx", Subsystem: "estimator", Name: "duration_seconds",
		Help:           "Time to answer a Karmada estimator call, the planner's dry run included.",
		Buckets:        metrics.ExponentialBuckets(0.0005, 2, 16),
		StabilityLevel: metrics.ALPHA,
	}, []string{"method"})
	templateMisses = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: "phalanx", Subsystem: "estimator", Name: "template_misses_total",
		Help:           "Calls whose workload template could not be read from the Karmada API server (answered without its phalanx labels and annotations).",
		StabilityLevel: metrics.ALPHA,
	})
	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(requests, duration, templateMisses) })
}

func observe(method string, start time.Time, err *error) {
	duration.WithLabelValues(method).Observe(time.Since(start).Seconds())
	requests.WithLabelValues(method, status.Code(*err).String()).Inc()
}
