// Package plane is phalanx-global's adapter to the Karmada control plane:
// it reads ResourceBindings, Clusters, Queues and resource templates into
// the tier's Jobs and Members, and writes each verdict back on its binding
// (spec.clusters, the Scheduled condition, an event). Karmada's API is read
// through its JSON shapes (the fields below, as work.karmada.io/v1alpha2 and
// cluster.karmada.io/v1alpha1 define them), not Karmada's Go module, whose
// dependencies phalanx's module does not take (see test/karmada).
package plane

import (
	"encoding/json"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// ResourceBindings are Karmada's bindings, one per resource template.
	ResourceBindings = schema.GroupVersionResource{Group: "work.karmada.io", Version: "v1alpha2", Resource: "resourcebindings"}
	// Clusters are the member clusters (served by karmada-aggregated-apiserver).
	Clusters = schema.GroupVersionResource{Group: "cluster.karmada.io", Version: "v1alpha1", Resource: "clusters"}
)

// ScheduledCondition is the condition karmada-scheduler writes, and the
// tier with it, on a binding it decided.
const ScheduledCondition = "Scheduled"

// appliedPlacementAnnotation is what karmada-scheduler records of the
// placement it scheduled by; Karmada's controllers compare it.
const appliedPlacementAnnotation = "policy.karmada.io/applied-placement"

type binding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              bindingSpec   `json:"spec"`
	Status            bindingStatus `json:"status"`
}

type bindingSpec struct {
	Resource            objectReference      `json:"resource"`
	ReplicaRequirements *replicaRequirements `json:"replicaRequirements,omitempty"`
	Replicas            int32                `json:"replicas,omitempty"`
	Components          []component          `json:"components,omitempty"`
	Clusters            []targetCluster      `json:"clusters,omitempty"`
	Placement           *placement           `json:"placement,omitempty"`
	SchedulerName       string               `json:"schedulerName,omitempty"`
	// GracefulEvictionTasks are Karmada failover's evictions in progress:
	// the member each came from keeps its copy until the job is healthy
	// elsewhere.
	GracefulEvictionTasks []struct {
		FromCluster string `json:"fromCluster"`
	} `json:"gracefulEvictionTasks,omitempty"`
	SchedulePriority *struct {
		Priority int32 `json:"priority,omitempty"`
	} `json:"schedulePriority,omitempty"`
}

type objectReference struct {
	APIVersion      string `json:"apiVersion"`
	Kind            string `json:"kind"`
	Namespace       string `json:"namespace,omitempty"`
	Name            string `json:"name"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

type replicaRequirements struct {
	NodeClaim         *nodeClaim      `json:"nodeClaim,omitempty"`
	ResourceRequest   v1.ResourceList `json:"resourceRequest,omitempty"`
	PriorityClassName string          `json:"priorityClassName,omitempty"`
}

type nodeClaim struct {
	HardNodeAffinity *v1.NodeSelector  `json:"hardNodeAffinity,omitempty"`
	NodeSelector     map[string]string `json:"nodeSelector,omitempty"`
	Tolerations      []v1.Toleration   `json:"tolerations,omitempty"`
}

type component struct {
	Name                string               `json:"name"`
	Replicas            int32                `json:"replicas"`
	ReplicaRequirements *replicaRequirements `json:"replicaRequirements,omitempty"`
}

type targetCluster struct {
	Name     string `json:"name"`
	Replicas int32  `json:"replicas,omitempty"`
}

type placement struct {
	ClusterAffinity   *clusterAffinity   `json:"clusterAffinity,omitempty"`
	ClusterAffinities []clusterAffinity  `json:"clusterAffinities,omitempty"`
	SpreadConstraints []spreadConstraint `json:"spreadConstraints,omitempty"`
	ReplicaScheduling *replicaScheduling `json:"replicaScheduling,omitempty"`
}

type clusterAffinity struct {
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	FieldSelector json.RawMessage       `json:"fieldSelector,omitempty"`
	ClusterNames  []string              `json:"clusterNames,omitempty"`
	Exclude       []string              `json:"exclude,omitempty"`
}

type spreadConstraint struct {
	SpreadByField string `json:"spreadByField,omitempty"`
	SpreadByLabel string `json:"spreadByLabel,omitempty"`
	MaxGroups     int    `json:"maxGroups,omitempty"`
	MinGroups     int    `json:"minGroups,omitempty"`
}

type replicaScheduling struct {
	ReplicaSchedulingType     string `json:"replicaSchedulingType,omitempty"`
	ReplicaDivisionPreference string `json:"replicaDivisionPreference,omitempty"`
	WeightPreference          *struct {
		StaticWeightList []json.RawMessage `json:"staticWeightList,omitempty"`
	} `json:"weightPreference,omitempty"`
}

type bindingStatus struct {
	SchedulerObservedGeneration int64                  `json:"schedulerObservedGeneration,omitempty"`
	LastScheduledTime           *metav1.Time           `json:"lastScheduledTime,omitempty"`
	Conditions                  []metav1.Condition     `json:"conditions,omitempty"`
	AggregatedStatus            []aggregatedStatusItem `json:"aggregatedStatus,omitempty"`
}

type aggregatedStatusItem struct {
	ClusterName string          `json:"clusterName"`
	Status      json.RawMessage `json:"status,omitempty"`
	Applied     bool            `json:"applied,omitempty"`
	Health      string          `json:"health,omitempty"`
}

type cluster struct {
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Taints []v1.Taint `json:"taints,omitempty"`
	} `json:"spec"`
	Status struct {
		Conditions      []metav1.Condition `json:"conditions,omitempty"`
		ResourceSummary *resourceSummary   `json:"resourceSummary,omitempty"`
	} `json:"status"`
}

// resourceSummary is what Karmada's cluster status controller collects
// from a member's nodes and pods (allocated: bound pods; allocating: pods
// not bound yet).
type resourceSummary struct {
	Allocatable v1.ResourceList `json:"allocatable,omitempty"`
	Allocated   v1.ResourceList `json:"allocated,omitempty"`
	Allocating  v1.ResourceList `json:"allocating,omitempty"`
}
