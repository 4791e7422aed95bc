package capacityqueue

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

var (
	queueAllocated = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "phalanx", Subsystem: "queue", Name: "allocated",
		Help:           "Resources allocated to a queue (placed pods and planned gangs), CPU in millicores.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"queue", "resource"})
	queueDeserved = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "phalanx", Subsystem: "queue", Name: "deserved",
		Help:           "A queue's deserved share by hierarchical water-filling, CPU in millicores.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"queue", "resource"})
	queuePending = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "phalanx", Subsystem: "queue", Name: "pending",
		Help:           "Requests of a queue's pods waiting to be placed, CPU in millicores.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"queue", "resource"})
	reclaims = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "phalanx", Subsystem: "queue", Name: "reclaimed_gangs_total",
		Help:           "Gangs evicted so that the labelled queue gets its deserved share.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"queue"})
	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(queueAllocated, queueDeserved, queuePending, reclaims)
	})
}

func recordMetrics(s *snapshot) {
	for _, set := range []struct {
		g *metrics.GaugeVec
		m map[string]map[string]int64
	}{{queueAllocated, flatten(s.allocated)}, {queueDeserved, flatten(s.deserved)}, {queuePending, flatten(s.pending)}} {
		for q, byRes := range set.m {
			for r, v := range byRes {
				set.g.WithLabelValues(q, r).Set(float64(v))
			}
		}
	}
}

func flatten(m map[string]resources.List) map[string]map[string]int64 {
	out := make(map[string]map[string]int64, len(m))
	for q, l := range m {
		out[q] = map[string]int64{}
		for r, v := range l {
			out[q][string(r)] = v
		}
	}
	return out
}
