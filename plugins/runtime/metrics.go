package runtime

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

// The phalanx metrics, all in one place (docs/metrics.md lists them).
var (
	// PlanOutcomes counts gang plan attempts and teardowns by outcome.
	PlanOutcomes = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "phalanx", Subsystem: "gang", Name: "plan_outcomes_total",
		Help:           "Gang plan attempts and teardowns by outcome: planned, unschedulable, reserved, PlanBroken, ScheduleTimeout.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"outcome"})
	// PlanDuration is the time to plan a whole gang.
	PlanDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace: "phalanx", Subsystem: "gang", Name: "plan_duration_seconds",
		Help:           "Time to plan a whole gang, filters included.",
		Buckets:        metrics.ExponentialBuckets(0.0005, 2, 16),
		StabilityLevel: metrics.ALPHA,
	})
	// GangWait is the time from a gang's creation to its quorum.
	GangWait = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace: "phalanx", Subsystem: "gang", Name: "wait_seconds",
		Help:           "Time from the group object's creation until the gang reached its quorum.",
		Buckets:        metrics.ExponentialBuckets(0.1, 2, 16),
		StabilityLevel: metrics.ALPHA,
	})
	// GangsPending counts gangs that wait, by the reason of their condition.
	GangsPending = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "phalanx", Subsystem: "gang", Name: "pending",
		Help:           "Gangs the scheduler is holding back now, by the reason of their Scheduled condition (MembersPending, Unschedulable, QueueAdmission, Reserving, ...).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	// Evictions counts whole gangs (or plain pods) evicted by the scheduler.
	Evictions = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "phalanx", Subsystem: "gang", Name: "evictions_total",
		Help:           "Whole gangs (or plain pods) the scheduler evicted, by reason: Preempted (priority), Reclaimed (queue share), PartiallyBound (stranded after a crash).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	queueAllocated = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "phalanx", Subsystem: "queue", Name: "allocated",
		Help:           "Resources allocated to a queue (placed pods and capacity its planned gangs hold), CPU in millicores.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"queue", "resource"})
	queueDeserved = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "phalanx", Subsystem: "queue", Name: "deserved",
		Help:           "A queue's deserved share by hierarchical water-filling, CPU in millicores.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"queue", "resource"})
	queueRecent = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "phalanx", Subsystem: "queue", Name: "recent_usage",
		Help:           "A queue's allocation averaged with CapacityQueue's usageHalfLifeSeconds (decayed fair share; absent when off), CPU in millicores.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"queue", "resource"})
	queuePending = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "phalanx", Subsystem: "queue", Name: "pending",
		Help:           "Requests of a queue's pods waiting to be placed, CPU in millicores.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"queue", "resource"})
	// Reclaims counts gangs evicted for a queue below its deserved share.
	Reclaims = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "phalanx", Subsystem: "queue", Name: "reclaimed_gangs_total",
		Help:           "Gangs evicted so that the labelled queue gets its deserved share.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"queue"})
	// NodesWithoutTopology counts nodes that NUMATopology turns aligned pods
	// away from for lack of NodeResourceTopology data.
	NodesWithoutTopology = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: "phalanx", Subsystem: "numa", Name: "nodes_without_topology",
		Help:           "Nodes that enforce NUMA alignment (strict mode or a topology-policy label) but publish no NodeResourceTopology, so pods that need alignment are not placed there.",
		StabilityLevel: metrics.ALPHA,
	})

	// PodsWoken counts pods the plugins moved back to the active queue, by
	// why: a flood of one kind shows what keeps the queue long.
	PodsWoken = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "phalanx", Subsystem: "gang", Name: "pods_woken_total",
		Help:           "Pods the phalanx plugins moved back to the scheduling queue's active queue, by reason: Quorum, Planned, Resumed, LeadRefused, LeadOverdue, LeadDeleted, FailedRetry, RoomFreed, StaleFailure, Displaced, RetryAfter, TurnedAway, QueueAdmission, GroupChanged, SubGroup, ClaimsNamed, DependencyRunning.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})

	registerOnce sync.Once
)

// RegisterMetrics registers the phalanx metrics with the scheduler's registry
// (once per process).
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(PlanOutcomes, PlanDuration, GangWait, GangsPending, Evictions,
			queueAllocated, queueDeserved, queueRecent, queuePending, Reclaims, NodesWithoutTopology, PodsWoken)
	})
}

// recordQueueMetrics sets the queue gauges from a snapshot and removes the
// series of queues that are gone.
func recordQueueMetrics(allocated, deserved, recent, pending map[string]resources.List, gone []string) {
	for _, set := range []struct {
		g *metrics.GaugeVec
		m map[string]resources.List
	}{{queueAllocated, allocated}, {queueDeserved, deserved}, {queueRecent, recent}, {queuePending, pending}} {
		for q, l := range set.m {
			for r, v := range l {
				set.g.WithLabelValues(q, string(r)).Set(float64(v))
			}
		}
		for _, q := range gone {
			set.g.DeletePartialMatch(map[string]string{"queue": q})
		}
	}
}

// Why the plugins wake pods, besides the manager's gang.Wake* reasons
// (PodsWoken's label).
const (
	wokenPlanned           = "Planned"
	wokenQuorum            = "Quorum"
	wokenResumed           = "Resumed"
	wokenLeadRefused       = "LeadRefused"
	wokenLeadOverdue       = "LeadOverdue"
	wokenLeadDeleted       = "LeadDeleted"
	wokenFailedRetry       = "FailedRetry"
	wokenRoomFreed         = "RoomFreed"
	wokenStaleFailure      = "StaleFailure"
	wokenTurnedAway        = "TurnedAway"
	wokenQueueAdmission    = "QueueAdmission"
	wokenGroupChanged      = "GroupChanged"
	wokenSubGroup          = "SubGroup"
	wokenClaimsNamed       = "ClaimsNamed"
	wokenDependencyRunning = "DependencyRunning"
)
