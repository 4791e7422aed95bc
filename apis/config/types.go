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
	// RejectAlignedPods admits pods that need no NUMA alignment and rejects,
	// with a reason, pods that do.
	RejectAlignedPods = "RejectAlignedPods"
	// AdmitAll admits every pod and leaves alignment to the kubelet.
	AdmitAll = "AdmitAll"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// NUMATopologyArgs configures the NUMATopology plugin.
type NUMATopologyArgs struct {
	metav1.TypeMeta

	// ScoringStrategy is one of LeastNUMANodes, MostAllocated, LeastAllocated.
	ScoringStrategy string
	// NodesWithoutTopology is one of RejectAlignedPods, AdmitAll.
	NodesWithoutTopology string
}
