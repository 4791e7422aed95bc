package config

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// CoschedulingArgs configures the Coscheduling plugin.
type CoschedulingArgs struct {
	metav1.TypeMeta

	// DefaultScheduleTimeoutSeconds bounds how long reserved members wait in
	// Permit for their siblings when the PodGroup sets no scheduleTimeoutSeconds.
	DefaultScheduleTimeoutSeconds int64
	// ReservationAfterSeconds is how long a gang may fail to find room, first
	// in its queue's order, before it gets a reservation: the nodes it needs
	// are held against gangs of equal or lower priority, which then only
	// backfill around it. Bounds the wait of big gangs behind small ones.
	ReservationAfterSeconds int64
	// FragmentationHalfLifeSeconds is how long the GPU pod shapes seen keep
	// half their weight in the fragmentation-aware placement; 0 turns it off.
	FragmentationHalfLifeSeconds int64
	// ScheduledEvents says who gets the "Scheduled" event when a gang's
	// members bind: PerGang (one event on the gang's group object) or
	// PerMember (every member's own, as kube-scheduler writes for a pod).
	ScheduledEvents string
	// ConsolidationAfterSeconds: a gang that has waited this long for a
	// domain of its required level, none of which fits it, may have running
	// gangs moved out of one. 0 (the default) is off.
	ConsolidationAfterSeconds int64
	// ConsolidationMinRuntimeSeconds is how long a gang runs (since its last
	// start or move) before consolidation may move it.
	ConsolidationMinRuntimeSeconds int64
	// ConsolidationsPerHour bounds the consolidations for one queue's gangs
	// within any hour.
	ConsolidationsPerHour int32
	// ConsolidationEvictionGraceSeconds: a moved gang whose pods name
	// evictionResponders is asked to leave through the EvictionRequest API
	// (where served) and deleted after this long if still running; 0
	// deletes at once.
	ConsolidationEvictionGraceSeconds int64
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// CapacityQueueArgs configures the CapacityQueue plugin.
type CapacityQueueArgs struct {
	metav1.TypeMeta

	// DefaultQueue takes pods that name no queue; it is created if missing.
	DefaultQueue string
	// EnableReclaim lets a queue below its deserved share evict whole gangs of
	// reclaimable queues above theirs.
	EnableReclaim bool
	// MinRuntimeSeconds is how long a gang runs before reclaim may evict it,
	// so a gang admitted on idle capacity is not killed as soon as it starts.
	MinRuntimeSeconds int64
	// UsageHalfLifeSeconds turns decayed fair share on: a queue's recent
	// usage, averaged with this half-life, lowers its order and its part of
	// the room above guarantees. 0 (the default) is off.
	UsageHalfLifeSeconds int64
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// NetworkTopologyArgs configures the NetworkTopology plugin.
type NetworkTopologyArgs struct {
	metav1.TypeMeta

	// TopologyName names the NetworkTopology object that defines the levels.
	TopologyName string
	// UseHyperNodes also reads Volcano HyperNode objects when that CRD exists.
	UseHyperNodes bool
}

// NUMATopology scoring strategies.
const (
	// LeastNUMANodes prefers nodes where the pod spans the fewest zones.
	LeastNUMANodes = "LeastNUMANodes"
	// MostAllocated packs zones.
	MostAllocated = "MostAllocated"
	// LeastAllocated spreads over zones.
	LeastAllocated = "LeastAllocated"
)

// Policies for nodes that publish no NodeResourceTopology object.
const (
	// AdmitAll admits every pod where the node is not known to enforce
	// alignment, as the kubelet's default policy (none) does; a node labelled
	// with a restricted or single-numa-node policy is still held to it.
	AdmitAll = "AdmitAll"
	// RejectAlignedPods (strict) admits pods that need no NUMA alignment and
	// rejects, with a reason, pods that do.
	RejectAlignedPods = "RejectAlignedPods"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// NUMATopologyArgs configures the NUMATopology plugin.
type NUMATopologyArgs struct {
	metav1.TypeMeta

	// ScoringStrategy is one of LeastNUMANodes, MostAllocated, LeastAllocated.
	ScoringStrategy string
	// NodesWithoutTopology is one of AdmitAll, RejectAlignedPods.
	NodesWithoutTopology string
}
