// Package validation checks phalanx plugin args. Errors carry field paths so that
// a bad config names the exact field when the scheduler refuses to start.
package validation

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/phalanx-sched/phalanx/apis/config"
	configv1 "github.com/phalanx-sched/phalanx/apis/config/v1"
)

// maxTimeoutSeconds keeps timeouts in a range where a typo is caught (one day).
const maxTimeoutSeconds = 24 * 60 * 60

// maxConsolidationsPerHour: more than one a minute is churn, not consolidation.
const maxConsolidationsPerHour = 60

// maxEvictionGraceSeconds: a waiting gang's freed domain is held that long
// at most for a moved gang's checkpoint.
const maxEvictionGraceSeconds = 3600

// maxHalfLifeSeconds bounds decayed fair share's memory (30 days).
const maxHalfLifeSeconds = 30 * 24 * 60 * 60

// ValidateCoschedulingArgs validates CoschedulingArgs.
func ValidateCoschedulingArgs(path *field.Path, args *config.CoschedulingArgs) error {
	var errs field.ErrorList
	errs = append(errs, validateSeconds(path.Child("defaultScheduleTimeoutSeconds"), args.DefaultScheduleTimeoutSeconds, 1)...)
	errs = append(errs, validateSeconds(path.Child("reservationAfterSeconds"), args.ReservationAfterSeconds, 1)...)
	errs = append(errs, validateSeconds(path.Child("fragmentationHalfLifeSeconds"), args.FragmentationHalfLifeSeconds, 0)...)
	if e := args.ScheduledEvents; e != configv1.ScheduledEventsPerGang && e != configv1.ScheduledEventsPerMember {
		errs = append(errs, field.NotSupported(path.Child("scheduledEvents"), e, []string{configv1.ScheduledEventsPerGang, configv1.ScheduledEventsPerMember}))
	}
	errs = append(errs, validateSeconds(path.Child("consolidationAfterSeconds"), args.ConsolidationAfterSeconds, 0)...)
	errs = append(errs, validateSeconds(path.Child("consolidationMinRuntimeSeconds"), args.ConsolidationMinRuntimeSeconds, 0)...)
	if g := args.ConsolidationEvictionGraceSeconds; g < 0 || g > maxEvictionGraceSeconds {
		errs = append(errs, field.Invalid(path.Child("consolidationEvictionGraceSeconds"), g, fmt.Sprintf("must be between 0 (delete at once) and %d", maxEvictionGraceSeconds)))
	}
	// 0 is accepted while consolidation is off (args built without it).
	if n, least := args.ConsolidationsPerHour, min(args.ConsolidationAfterSeconds, 1); n < int32(least) || n > maxConsolidationsPerHour {
		errs = append(errs, field.Invalid(path.Child("consolidationsPerHour"), n, fmt.Sprintf("must be between 1 and %d while consolidation is on", maxConsolidationsPerHour)))
	}
	return errs.ToAggregate()
}

// ValidateCapacityQueueArgs validates CapacityQueueArgs.
func ValidateCapacityQueueArgs(path *field.Path, args *config.CapacityQueueArgs) error {
	var errs field.ErrorList
	errs = append(errs, validateObjectName(path.Child("defaultQueue"), args.DefaultQueue)...)
	errs = append(errs, validateSeconds(path.Child("minRuntimeSeconds"), args.MinRuntimeSeconds, 0)...)
	if v := args.UsageHalfLifeSeconds; v < 0 || v > maxHalfLifeSeconds {
		errs = append(errs, field.Invalid(path.Child("usageHalfLifeSeconds"), v, fmt.Sprintf("must be between 0 (off) and %d (30 days)", maxHalfLifeSeconds)))
	}
	return errs.ToAggregate()
}

// ValidateNetworkTopologyArgs validates NetworkTopologyArgs.
func ValidateNetworkTopologyArgs(path *field.Path, args *config.NetworkTopologyArgs) error {
	var errs field.ErrorList
	errs = append(errs, validateObjectName(path.Child("topologyName"), args.TopologyName)...)
	return errs.ToAggregate()
}

// ValidateNUMATopologyArgs validates NUMATopologyArgs.
func ValidateNUMATopologyArgs(path *field.Path, args *config.NUMATopologyArgs) error {
	var errs field.ErrorList
	switch args.ScoringStrategy {
	case config.LeastNUMANodes, config.MostAllocated, config.LeastAllocated:
	default:
		errs = append(errs, field.NotSupported(path.Child("scoringStrategy"), args.ScoringStrategy,
			[]string{config.LeastNUMANodes, config.MostAllocated, config.LeastAllocated}))
	}
	switch args.NodesWithoutTopology {
	case config.AdmitAll, config.RejectAlignedPods:
	default:
		errs = append(errs, field.NotSupported(path.Child("nodesWithoutTopology"), args.NodesWithoutTopology,
			[]string{config.AdmitAll, config.RejectAlignedPods}))
	}
	return errs.ToAggregate()
}

func validateSeconds(path *field.Path, v int64, min int64) field.ErrorList {
	if v < min || v > maxTimeoutSeconds {
		return field.ErrorList{field.Invalid(path, v, fmt.Sprintf("must be between %d and %d", min, maxTimeoutSeconds))}
	}
	return nil
}

func validateObjectName(path *field.Path, name string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	return errs
}
