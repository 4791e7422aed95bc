// Package gangspec is what the scheduler needs of a gang's definition,
// whatever its source (PodGroup, Workload, CompositePodGroup): its minimum,
// timeout, priority, topology constraint and sub-groups, and the keys its
// members are planned under. Sources build a Spec; the manager and the
// plugins read it.
package gangspec

import (
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
)

// Spec is what the scheduler needs of a gang's definition, whatever its
// source. It is a read-only value: sources build a new one on every change.
type Spec struct {
	ident.Ref
	UID        types.UID
	Generation int64
	MinMember  int
	// Timeout bounds how long reserved members wait for their siblings;
	// zero means the scheduler's default.
	Timeout time.Duration
	Created time.Time
	// Labels and Annotations of the group object: queue label, topology and
	// dependency annotations.
	Labels, Annotations map[string]string
	// Succeeded counts members that finished (the scheduler's informer drops
	// terminal pods, the group's status keeps them); Running is the status'
	// running count; Finished is set once the whole gang is done.
	Succeeded, Running int
	Finished           bool
	// TopologyKey is a node label the whole gang must share (the upstream
	// API's topology constraint), "" for none.
	TopologyKey string
	// Priority is the group object's own priority (the upstream PodGroup's
	// spec.priority, else its Workload template's); nil: the pods' priority.
	Priority *int32
	// NeverPreempts: the group object's preemptionPolicy is Never (an
	// upstream PodGroup's spec.preemptionPolicy); the gang makes no room by
	// preemption. A member's own preemptionPolicy Never counts too.
	NeverPreempts bool
	// Disruption is how preemption and reclaim may take the gang as a
	// victim (an upstream PodGroup's spec.disruptionMode).
	Disruption DisruptionMode
	// SubGroups is set for a gang of sub-groups (nil: a flat gang).
	SubGroups *SubGroups
}

// Quorum is the number of members that must be placed together: the gang's
// minimum, or for an elastic gang of sub-groups its minimum of whole
// sub-groups.
func Quorum(spec *Spec) int {
	if sg := spec.SubGroups; sg != nil && sg.Min > 0 && sg.Size > 0 {
		return sg.Min * sg.Size
	}
	return max(spec.MinMember, 1)
}

// DisruptionMode is how a running gang may be disrupted to make room.
type DisruptionMode string

const (
	// DisruptAll: the gang is evicted whole or not at all. phalanx's own
	// PodGroups and implicit gangs always are.
	DisruptAll DisruptionMode = ""
	// DisruptSingle: members above the gang's minimum may be evicted one
	// by one; the gang is never left below its minimum, so taking more
	// than its surplus evicts it whole.
	DisruptSingle DisruptionMode = "Single"
)

// PriorityOf is the priority a member counts with in ordering, holds and
// preemption: the gang's own, else the pod's.
func (s *Spec) PriorityOf(pod *v1.Pod) int32 {
	if s != nil && s.Priority != nil {
		return *s.Priority
	}
	return corev1helpers.PodPriority(pod)
}

// GroupAnnotations are the group object's annotations (nil outside gangs).
func (s *Spec) GroupAnnotations() map[string]string {
	if s == nil {
		return nil
	}
	return s.Annotations
}

// DependsOn lists the gangs (same namespace) that must be running or done
// before this gang's pods are scheduled.
func (s *Spec) DependsOn() []string {
	raw := s.Annotations[phalanxv1alpha1.DependsOnAnnotation]
	if raw == "" {
		return nil
	}
	var out []string
	for _, d := range strings.Split(raw, ",") {
		if d = strings.TrimSpace(d); d != "" {
			out = append(out, d)
		}
	}
	return out
}

// TopologyConstraint returns the gang's required and preferred network level:
// from the group's annotations, else from the pod's (pod templates propagate
// through every operator, group objects often do not).
func TopologyConstraint(groupAnnotations, podAnnotations map[string]string) (required, preferred string) {
	for _, a := range []map[string]string{groupAnnotations, podAnnotations} {
		if required == "" {
			required = a[phalanxv1alpha1.TopologyRequiredAnnotation]
		}
		if preferred == "" {
			preferred = a[phalanxv1alpha1.TopologyPreferredAnnotation]
		}
	}
	return required, preferred
}
