package v1

import "k8s.io/utils/ptr"

// Defaults of the plugin args; the plugins and docs refer to these.
const (
	DefaultScheduleTimeoutSeconds  int64 = 60
	DefaultQueueName                     = "default"
	DefaultTopologyName                  = "default"
	DefaultNUMAScoringStrategy           = "LeastNUMANodes"
	DefaultNodesWithoutTopology          = "AdmitAll"
	DefaultReservationAfterSeconds int64 = 30
	DefaultMinRuntimeSeconds       int64 = 15
	// An hour: the mix of GPU shapes a cluster runs changes over hours.
	DefaultFragmentationHalfLifeSeconds int64 = 3600
	// Scheduled events of gang members: one per gang, or one per member.
	ScheduledEventsPerGang   = "PerGang"
	ScheduledEventsPerMember = "PerMember"
	DefaultScheduledEvents   = ScheduledEventsPerGang
	// Consolidation is off unless asked for; once on, a moved gang has run
	// ten minutes, and a queue's gangs cause at most two moves an hour.
	DefaultConsolidationAfterSeconds      int64 = 0
	DefaultConsolidationMinRuntimeSeconds int64 = 600
	DefaultConsolidationsPerHour          int32 = 2
	// A checkpoint of a large model takes minutes.
	DefaultConsolidationEvictionGraceSeconds int64 = 300
)

// SetDefaults_CoschedulingArgs sets unset fields to their defaults.
func SetDefaults_CoschedulingArgs(obj *CoschedulingArgs) {
	if obj.DefaultScheduleTimeoutSeconds == nil {
		obj.DefaultScheduleTimeoutSeconds = ptr.To(DefaultScheduleTimeoutSeconds)
	}
	if obj.ReservationAfterSeconds == nil {
		obj.ReservationAfterSeconds = ptr.To(DefaultReservationAfterSeconds)
	}
	if obj.FragmentationHalfLifeSeconds == nil {
		obj.FragmentationHalfLifeSeconds = ptr.To(DefaultFragmentationHalfLifeSeconds)
	}
	if obj.ScheduledEvents == nil {
		obj.ScheduledEvents = ptr.To(DefaultScheduledEvents)
	}
	if obj.ConsolidationAfterSeconds == nil {
		obj.ConsolidationAfterSeconds = ptr.To(DefaultConsolidationAfterSeconds)
	}
	if obj.ConsolidationMinRuntimeSeconds == nil {
		obj.ConsolidationMinRuntimeSeconds = ptr.To(DefaultConsolidationMinRuntimeSeconds)
	}
	if obj.ConsolidationsPerHour == nil {
		obj.ConsolidationsPerHour = ptr.To(DefaultConsolidationsPerHour)
	}
	if obj.ConsolidationEvictionGraceSeconds == nil {
		obj.ConsolidationEvictionGraceSeconds = ptr.To(DefaultConsolidationEvictionGraceSeconds)
	}
}

// SetDefaults_CapacityQueueArgs sets unset fields to their defaults.
func SetDefaults_CapacityQueueArgs(obj *CapacityQueueArgs) {
	if obj.DefaultQueue == nil {
		obj.DefaultQueue = ptr.To(DefaultQueueName)
	}
	if obj.EnableReclaim == nil {
		obj.EnableReclaim = ptr.To(true)
	}
	if obj.MinRuntimeSeconds == nil {
		obj.MinRuntimeSeconds = ptr.To(DefaultMinRuntimeSeconds)
	}
	if obj.UsageHalfLifeSeconds == nil {
		obj.UsageHalfLifeSeconds = ptr.To(int64(0))
	}
}

// SetDefaults_NetworkTopologyArgs sets unset fields to their defaults.
func SetDefaults_NetworkTopologyArgs(obj *NetworkTopologyArgs) {
	if obj.TopologyName == nil {
		obj.TopologyName = ptr.To(DefaultTopologyName)
	}
	if obj.UseHyperNodes == nil {
		obj.UseHyperNodes = ptr.To(true)
	}
}

// SetDefaults_NUMATopologyArgs sets unset fields to their defaults.
func SetDefaults_NUMATopologyArgs(obj *NUMATopologyArgs) {
	if obj.ScoringStrategy == nil {
		obj.ScoringStrategy = ptr.To(DefaultNUMAScoringStrategy)
	}
	if obj.NodesWithoutTopology == nil {
		obj.NodesWithoutTopology = ptr.To(DefaultNodesWithoutTopology)
	}
}
