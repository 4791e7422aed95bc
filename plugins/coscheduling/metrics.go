package coscheduling

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	planOutcomes = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "phalanx",
		Subsystem:      "gang",
		Name:           "plan_outcomes_total",
		Help:           "Gang plan attempts and teardowns by outcome: planned, unschedulable, PlanBroken, ScheduleTimeout.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"outcome"})
	planDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace:      "phalanx",
		Subsystem:      "gang",
		Name:           "plan_duration_seconds",
		Help:           "Time to plan a whole gang, filters included.",
		Buckets:        metrics.ExponentialBuckets(0.0005, 2, 16),
		StabilityLevel: metrics.ALPHA,
	})
	gangWait = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace:      "phalanx",
		Subsystem:      "gang",
		Name:           "wait_seconds",
		Help:           "Time from PodGroup creation until the gang reached its quorum.",
		Buckets:        metrics.ExponentialBuckets(0.1, 2, 16),
		StabilityLevel: metrics.ALPHA,
	})
	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(planOutcomes, planDuration, gangWait)
	})
}
