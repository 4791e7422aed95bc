// Package metrics holds the phalanx metrics, all in one place
// (docs/metrics.md lists them), registered with the scheduler's registry.
package metrics

import (
	"sync"

	k8smetrics "k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

var (
	// PlanOutcomes counts gang plan attempts and teardowns by outcome.
	PlanOutcomes = k8smetrics.NewCounterVec(&k8smetrics.CounterOpts{
		Namespace: "phalanx", Subsystem: "gang", Name: "plan_outcomes_total",
		Help:           "Gang plan attempts and teardowns by outcome: planned, unschedulable, reserved, PlanBroken, ScheduleTimeout.",
		StabilityLevel: k8smetrics.ALPHA,
	}, []string{"outcome"})
	// PlanDuration is the time to plan a whole gang.
	PlanDuration = k8smetrics.NewHistogram(&k8smetrics.HistogramOpts{
		Namespace: "phalanx", Subsystem: "gang", Name: "plan_duration_seconds",
		Help:           "Time to plan a whole gang, filters included.",
		Buckets:        k8smetrics.ExponentialBuckets(0.0005, 2, 16),
		StabilityLevel: k8smetrics.ALPHA,
	})
	// GangWait is the time from a gang's creation to its quorum.
	GangWait = k8smetrics.NewHistogram(&k8smetrics.HistogramOpts{
		Namespace: "phalanx", Subsystem: "gang", Name: "wait_seconds",
		Help:           "Time from the group object's creation until the gang reached its quorum.",
		Buckets:        k8smetrics.ExponentialBuckets(0.1, 2, 16),
		StabilityLevel: k8smetrics.ALPHA,
	})
	// GangsPending counts gangs that wait, by the reason of their condition.
	GangsPending = k8smetrics.NewGaugeVec(&k8smetrics.GaugeOpts{
		Namespace: "phalanx", Subsystem: "gang", Name: "pending",
		Help:           "Gangs the scheduler is holding back now, by the reason of their Scheduled condition (MembersPending, Unschedulable, QueueAdmission, Reserving, ...).",
		StabilityLevel: k8smetrics.ALPHA,
	}, []string{"reason"})
	// Evictions counts whole gangs (or plain pods) evicted by the scheduler.
	Evictions = k8smetrics.NewCounterVec(&k8smetrics.CounterOpts{
		Namespace: "phalanx", Subsystem: "gang", Name: "evictions_total",
		Help:           "Whole gangs (or plain pods) the scheduler evicted, by reason: Preempted (priority), Reclaimed (queue share), PartiallyBound (stranded after a crash).",
		StabilityLevel: k8smetrics.ALPHA,
	}, []string{"reason"})
	queueAllocated = k8smetrics.NewGaugeVec(&k8smetrics.GaugeOpts{
		Namespace: "phalanx", Subsystem: "queue", Name: "allocated",
		Help:           "Resources allocated to a queue (placed pods and capacity its planned gangs hold), CPU in millicores.",
		StabilityLevel: k8smetrics.ALPHA,
	}, []string{"queue", "resource"})
	queueDeserved = k8smetrics.NewGaugeVec(&k8smetrics.GaugeOpts{
		Namespace: "phalanx", Subsystem: "queue", Name: "deserved",
		Help:           "A queue's deserved share by hierarchical water-filling, CPU in millicores.",
		StabilityLevel: k8smetrics.ALPHA,
	}, []string{"queue", "resource"})
	queueRecent = k8smetrics.NewGaugeVec(&k8smetrics.GaugeOpts{
		Namespace: "phalanx", Subsystem: "queue", Name: "recent_usage",
		Help:           "A queue's allocation averaged with CapacityQueue's usageHalfLifeSeconds (decayed fair share; absent when off), CPU in millicores.",
		StabilityLevel: k8smetrics.ALPHA,
	}, []string{"queue", "resource"})
	queuePending = k8smetrics.NewGaugeVec(&k8smetrics.GaugeOpts{
		Namespace: "phalanx", Subsystem: "queue", Name: "pending",
		Help:           "Requests of a queue's pods waiting to be placed, CPU in millicores.",
		StabilityLevel: k8smetrics.ALPHA,
	}, []string{"queue", "resource"})
	// Reclaims counts gangs evicted for a queue below its deserved share.
	Reclaims = k8smetrics.NewCounterVec(&k8smetrics.CounterOpts{
		Namespace: "phalanx", Subsystem: "queue", Name: "reclaimed_gangs_total",
		Help:           "Gangs evicted so that the labelled queue gets its deserved share.",
		StabilityLevel: k8smetrics.ALPHA,
	}, []string{"queue"})
	// NodesWithoutTopology counts nodes that NUMATopology turns aligned pods
	// away from for lack of NodeResourceTopology data.
	NodesWithoutTopology = k8smetrics.NewGauge(&k8smetrics.GaugeOpts{
		Namespace: "phalanx", Subsystem: "numa", Name: "nodes_without_topology",
		Help:           "Nodes that enforce NUMA alignment (strict mode or a topology-policy label) but publish no NodeResourceTopology, so pods that need alignment are not placed there.",
		StabilityLevel: k8smetrics.ALPHA,
	})

	// PodsWoken counts pods the plugins moved back to the active queue, by
	// why: a flood of one kind shows what keeps the queue long.
	PodsWoken = k8smetrics.NewCounterVec(&k8smetrics.CounterOpts{
		Namespace: "phalanx", Subsystem: "gang", Name: "pods_woken_total",
		Help:           "Pods the phalanx plugins moved back to the scheduling queue's active queue, by reason: Quorum, Planned, Resumed, LeadRefused, LeadOverdue, LeadDeleted, FailedRetry, RoomFreed, StaleFailure, Displaced, RetryAfter, TurnedAway, QueueAdmission, GroupChanged, SubGroup, ClaimsNamed, DependencyRunning.",
		StabilityLevel: k8smetrics.ALPHA,
	}, []string{"reason"})

	registerOnce sync.Once
)

// Register registers the phalanx metrics with the scheduler's registry
// (once per process).
func Register() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(PlanOutcomes, PlanDuration, GangWait, GangsPending, Evictions,
			queueAllocated, queueDeserved, queueRecent, queuePending, Reclaims, NodesWithoutTopology, PodsWoken)
	})
}

// RecordQueues sets the queue gauges from a snapshot and removes the
// series of queues that are gone.
func RecordQueues(allocated, deserved, recent, pending map[string]resources.List, gone []string) {
	for _, set := range []struct {
		g *k8smetrics.GaugeVec
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
	WokenPlanned           = "Planned"
	WokenQuorum            = "Quorum"
	WokenResumed           = "Resumed"
	WokenLeadRefused       = "LeadRefused"
	WokenLeadOverdue       = "LeadOverdue"
	WokenLeadDeleted       = "LeadDeleted"
	WokenFailedRetry       = "FailedRetry"
	WokenRoomFreed         = "RoomFreed"
	WokenStaleFailure      = "StaleFailure"
	WokenTurnedAway        = "TurnedAway"
	WokenQueueAdmission    = "QueueAdmission"
	WokenGroupChanged      = "GroupChanged"
	WokenSubGroup          = "SubGroup"
	WokenClaimsNamed       = "ClaimsNamed"
	WokenDependencyRunning = "DependencyRunning"
)
