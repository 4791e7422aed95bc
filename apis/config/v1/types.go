package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// CoschedulingArgs configures the Coscheduling plugin.
type CoschedulingArgs struct {
	metav1.TypeMeta `json:",inline"`

	// DefaultScheduleTimeoutSeconds bounds how long reserved members wait in
	// Permit for their siblings when the PodGroup sets no scheduleTimeoutSeconds.
	// Default 60.
	DefaultScheduleTimeoutSeconds *int64 `json:"defaultScheduleTimeoutSeconds,omitempty"`
	// ReservationAfterSeconds is how long a gang may fail to find room, first
	// in its queue's order, before the nodes it needs are reserved for it
	// against gangs of equal or lower priority. Default 30.
	ReservationAfterSeconds *int64 `json:"reservationAfterSeconds,omitempty"`
	// FragmentationHalfLifeSeconds: GPU placement keeps room for the pod
	// shapes the scheduler has seen, each weighted by how often it came;
	// weights halve every this many seconds. 0 turns fragmentation-aware
	// placement off. Default 3600.
	FragmentationHalfLifeSeconds *int64 `json:"fragmentationHalfLifeSeconds,omitempty"`
	// ScheduledEvents says who gets the "Scheduled" event when a gang's
	// members bind. PerGang: the gang's group object gets one event when the
	// gang starts, and members bind without an event of their own (an event
	// write costs the API server as much as the bind). PerMember: every
	// member gets kube-scheduler's "Successfully assigned" event too.
	// Pods outside gangs always get theirs. Default PerGang.
	ScheduledEvents *string `json:"scheduledEvents,omitempty"`
	// ConsolidationAfterSeconds: a gang that has waited this long for a
	// domain of its required topology level, none of which fits it, may
	// have running gangs moved out of one, each proven to fit elsewhere
	// right away; the cheapest set (GPU-seconds of work lost) is evicted
	// whole. 0 turns consolidation off. Default 0.
	ConsolidationAfterSeconds *int64 `json:"consolidationAfterSeconds,omitempty"`
	// ConsolidationMinRuntimeSeconds is how long a gang runs, since its
	// last start or move, before consolidation may move it. Default 600.
	ConsolidationMinRuntimeSeconds *int64 `json:"consolidationMinRuntimeSeconds,omitempty"`
	// ConsolidationsPerHour bounds the consolidations done for the gangs of
	// one queue within any hour. Default 2.
	ConsolidationsPerHour *int32 `json:"consolidationsPerHour,omitempty"`
	// ConsolidationEvictionGraceSeconds: where the API server serves
	// Kubernetes 1.37's EvictionRequest API (lifecycle.k8s.io/v1alpha1), a
	// gang moved by consolidation whose pods all name
	// spec.evictionResponders (a training operator that checkpoints first)
	// is asked to leave with an EvictionRequest per pod; once one member
	// has left, or after this long, the rest are deleted. 0 deletes at
	// once, as reclaim does. Default 300.
	ConsolidationEvictionGraceSeconds *int64 `json:"consolidationEvictionGraceSeconds,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// CapacityQueueArgs configures the CapacityQueue plugin.
type CapacityQueueArgs struct {
	metav1.TypeMeta `json:",inline"`

	// DefaultQueue takes pods that name no queue. Default "default".
	DefaultQueue *string `json:"defaultQueue,omitempty"`
	// EnableReclaim lets starved queues evict whole gangs. Default true.
	EnableReclaim *bool `json:"enableReclaim,omitempty"`
	// MinRuntimeSeconds is how long a gang runs before reclaim may evict it.
	// Default 15.
	MinRuntimeSeconds *int64 `json:"minRuntimeSeconds,omitempty"`
	// UsageHalfLifeSeconds turns decayed fair share on: each queue's
	// allocation is averaged over time with weights that halve every
	// UsageHalfLifeSeconds, and a queue that used more than its weight's
	// part recently goes after the others and gets less of the room above
	// guarantees. Default 0: off, shares and order from the allocation of
	// the moment. At most 30 days.
	UsageHalfLifeSeconds *int64 `json:"usageHalfLifeSeconds,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// NetworkTopologyArgs configures the NetworkTopology plugin.
type NetworkTopologyArgs struct {
	metav1.TypeMeta `json:",inline"`

	// TopologyName names the NetworkTopology object. Default "default".
	TopologyName *string `json:"topologyName,omitempty"`
	// UseHyperNodes also reads Volcano HyperNodes when installed. Default true.
	UseHyperNodes *bool `json:"useHyperNodes,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// NUMATopologyArgs configures the NUMATopology plugin.
type NUMATopologyArgs struct {
	metav1.TypeMeta `json:",inline"`

	// ScoringStrategy: LeastNUMANodes (default), MostAllocated or LeastAllocated.
	ScoringStrategy *string `json:"scoringStrategy,omitempty"`
	// NodesWithoutTopology: AdmitAll (default: only nodes known to enforce
	// alignment are held to it) or RejectAlignedPods (strict).
	NodesWithoutTopology *string `json:"nodesWithoutTopology,omitempty"`
}
