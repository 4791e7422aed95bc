package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Well-known label and annotation keys and object names of the phalanx contract.
const (
	// QueueLabel names the Queue of a pod, of a PodGroup or, as a fallback,
	// of every pod in a namespace.
	QueueLabel = GroupName + "/queue"
	// TopologyRequiredAnnotation names the NetworkTopology level that all
	// members of a gang must share.
	TopologyRequiredAnnotation = GroupName + "/topology-required"
	// TopologyPreferredAnnotation names the NetworkTopology level that the
	// members of a gang should share if they fit.
	TopologyPreferredAnnotation = GroupName + "/topology-preferred"
	// DependsOnAnnotation lists, comma separated, the PodGroups of the same
	// namespace that must be running before this gang is scheduled.
	DependsOnAnnotation = GroupName + "/depends-on"
	// HeldAnnotation on a gang's group object is written by the scheduler:
	// the capacity the gang's plan or reservation holds on nodes and its pods
	// do not use yet, as a JSON object of quantities ({"cpu":"8",
	// "nvidia.com/gpu":"4"}); absent when it holds nothing. The controller
	// counts it in the gang's queue's status.allocated, as the scheduler does.
	HeldAnnotation = GroupName + "/held"
	// ExpectedStartAnnotation on a gang's group object is written by the
	// scheduler beside HeldAnnotation: when the gang that holds its queue's
	// reservation is expected to start (RFC 3339), by the limits and
	// estimates of the pods it waits for; absent when unknown. The
	// controller copies it into QueuePositions.
	ExpectedStartAnnotation = GroupName + "/expected-start"

	// ExpectedRuntimeAnnotation on a pod (template), PodGroup or other group
	// object is the user's estimate of how long the work runs once started,
	// a Go duration ("4h", "90m"): a soft estimate the scheduler plans
	// reservations and backfill with (activeDeadlineSeconds, a hard limit,
	// goes first).
	ExpectedRuntimeAnnotation = GroupName + "/expected-runtime"

	// GangSizeAnnotation on a pod (template) makes the pods of its workload an
	// implicit gang of this many members (minMember), without a PodGroup
	// written by hand. See internal/workload for the grouping rules.
	GangSizeAnnotation = GroupName + "/gang-size"
	// GangNameAnnotation groups the annotated pods of one namespace into the
	// gang of this name, whatever workload they belong to.
	GangNameAnnotation = GroupName + "/gang-name"
	// GangScopeAnnotation chooses the unit a JobSet's pods are grouped by:
	// GangScopeWorkload (the whole JobSet, the default), GangScopeReplicatedJob
	// or GangScopeJob.
	GangScopeAnnotation = GroupName + "/gang-scope"

	// SubGroupSizeAnnotation makes a gang a gang of sub-groups of this many
	// members (tensor-parallel groups); members map to sub-groups by rank
	// (RankLabel, else the index label their operator sets).
	SubGroupSizeAnnotation = GroupName + "/subgroup-size"
	// SubGroupMinAnnotation is the number of whole sub-groups the gang
	// starts with (elastic); without it, all that minMember holds.
	SubGroupMinAnnotation = GroupName + "/subgroup-min"
	// SubGroupTopologyRequiredAnnotation and
	// SubGroupTopologyPreferredAnnotation name the level each sub-group
	// must (or should) fit inside one domain of, e.g. an NVLink clique.
	SubGroupTopologyRequiredAnnotation  = GroupName + "/subgroup-topology-required"
	SubGroupTopologyPreferredAnnotation = GroupName + "/subgroup-topology-preferred"
	// RankLabel gives a member's rank explicitly (0-based): ranks
	// i … i+size−1 share a sub-group.
	RankLabel = GroupName + "/rank"

	// ManagedByLabel and ManagedByValue mark the PodGroups that phalanx
	// creates for implicit gangs.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "phalanx-scheduler"

	// GangScopeWorkload groups by the top-level workload (default).
	GangScopeWorkload = "workload"
	// GangScopeReplicatedJob makes each replicated job of a JobSet one gang.
	GangScopeReplicatedJob = "replicated-job"
	// GangScopeJob makes each child Job of a JobSet one gang.
	GangScopeJob = "job"

	// DefaultQueueName is the queue of pods that name none.
	DefaultQueueName = "default"
	// DefaultNetworkTopologyName is the NetworkTopology object the scheduler reads.
	DefaultNetworkTopologyName = "default"
)

// TopologyManagerPolicyLabel on a node states the kubelet's Topology Manager
// policy (none, best-effort, restricted, single-numa-node) where the node
// publishes no NodeResourceTopology: with restricted or single-numa-node the
// node is held to NUMA alignment. Operators set it where they configure the
// kubelet (node provisioning, or an NFD NodeFeatureRule).
const TopologyManagerPolicyLabel = GroupName + "/topology-manager-policy"

// QueueState tells whether a queue admits new gangs.
// +kubebuilder:validation:Enum=Open;Closed
type QueueState string

const (
	// QueueStateOpen admits new gangs.
	QueueStateOpen QueueState = "Open"
	// QueueStateClosed admits no new gangs; running ones are left alone.
	QueueStateClosed QueueState = "Closed"
)

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=pq,categories=phalanx
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Weight",type=integer,JSONPath=`.spec.weight`,description="Share relative to sibling queues"
// +kubebuilder:printcolumn:name="Parent",type=string,JSONPath=`.spec.parent`,description="Parent queue"
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.spec.state`,description="Open or Closed"
// +kubebuilder:printcolumn:name="Running",type=integer,JSONPath=`.status.runningGangs`,description="Gangs running"
// +kubebuilder:printcolumn:name="Pending",type=integer,JSONPath=`.status.pendingGangs`,description="Gangs waiting"
// +kubebuilder:printcolumn:name="Reclaimable",type=boolean,JSONPath=`.spec.reclaimable`,priority=1,description="Whether other queues may reclaim resources lent by this one"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.parent) || self.spec.parent != self.metadata.name",message="a queue cannot be its own parent"

// Queue shares cluster resources between teams. Queues form a tree through
// spec.parent; only leaf queues take pods.
type Queue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired share of the queue.
	// +optional
	// +kubebuilder:default={}
	Spec QueueSpec `json:"spec"`
	// Status is the observed usage and share of the queue.
	// +optional
	Status QueueStatus `json:"status,omitempty"`
}

// QueueSpec is the desired share of a queue.
// +kubebuilder:validation:XValidation:rule="!has(self.guarantee) || !has(self.capability) || self.guarantee.all(r, !(r in self.capability) || quantity(string(self.guarantee[r])).compareTo(quantity(string(self.capability[r]))) <= 0)",message="guarantee must not exceed capability for any resource"
type QueueSpec struct {
	// Weight is the queue's share of its parent relative to its siblings.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	Weight int32 `json:"weight,omitempty"`

	// Parent is the name of the parent queue; empty for a top-level queue.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Parent string `json:"parent,omitempty"`

	// Guarantee is the minimum the queue is always given and never lends
	// below, per resource.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) > 0)",message="resource names must not be empty"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !quantity(string(self[k])).isLessThan(quantity('0')))",message="quantities must not be negative"
	Guarantee corev1.ResourceList `json:"guarantee,omitempty"`

	// Capability is the hard maximum the queue may use, per resource;
	// resources not listed are unbounded.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) > 0)",message="resource names must not be empty"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !quantity(string(self[k])).isLessThan(quantity('0')))",message="quantities must not be negative"
	Capability corev1.ResourceList `json:"capability,omitempty"`

	// Reclaimable lets starved queues evict gangs that use more than this
	// queue's deserved share.
	// +optional
	// +kubebuilder:default=true
	Reclaimable *bool `json:"reclaimable,omitempty"`

	// State is Open (admits new gangs) or Closed (admits none).
	// +optional
	// +kubebuilder:default=Open
	State QueueState `json:"state,omitempty"`
}

// QueueStatus is the observed usage and share of a queue.
type QueueStatus struct {
	// Allocated is the sum of the requests of the queue's bound pods,
	// including those of its descendants.
	// +optional
	Allocated corev1.ResourceList `json:"allocated,omitempty"`

	// Deserved is the queue's current fair share.
	// +optional
	Deserved corev1.ResourceList `json:"deserved,omitempty"`

	// RecentUsage is the queue's allocation averaged over recent time, with
	// weights that halve every CapacityQueue usageHalfLifeSeconds
	// (including its descendants). Set only with decayed fair share on: it
	// lowers the queue's order and its part of the room above guarantees.
	// +optional
	RecentUsage corev1.ResourceList `json:"recentUsage,omitempty"`

	// PendingGangs counts gangs of the queue not yet scheduled.
	// +optional
	PendingGangs int32 `json:"pendingGangs,omitempty"`

	// RunningGangs counts gangs of the queue with at least minMember pods bound.
	// +optional
	RunningGangs int32 `json:"runningGangs,omitempty"`

	// Conditions are the latest observations of the queue's state.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// +kubebuilder:object:root=true
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// QueueList is a list of Queues.
type QueueList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the queues.
	Items []Queue `json:"items"`
}

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=nettopo,categories=phalanx
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Widest",type=string,JSONPath=`.spec.levels[0].name`,description="Widest level"
// +kubebuilder:printcolumn:name="Narrowest",type=string,JSONPath=`.spec.levels[-1:].name`,description="Narrowest level"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// NetworkTopology names the levels of the network, widest first, each given by
// a node label. Nodes with equal values of a level's label share a domain of
// that level. The scheduler reads the object named "default".
type NetworkTopology struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec lists the topology levels.
	Spec NetworkTopologySpec `json:"spec"`
	// Status reports whether the scheduler uses the topology.
	// +optional
	Status NetworkTopologyStatus `json:"status,omitempty"`
}

// NetworkTopologySpec lists the topology levels.
type NetworkTopologySpec struct {
	// Levels are the topology levels, widest first (for example
	// cluster, spine, leaf, host). Names and node labels are unique.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(x, self.exists_one(y, y.name == x.name))",message="level names must be unique"
	// +kubebuilder:validation:XValidation:rule="self.all(x, self.exists_one(y, y.nodeLabel == x.nodeLabel))",message="level nodeLabels must be unique"
	Levels []TopologyLevel `json:"levels"`
}

// TopologyLevel is one level of a NetworkTopology.
type TopologyLevel struct {
	// Name of the level, as used in the topology annotations of gangs;
	// a DNS-1123 label.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// NodeLabel is the key of the node label whose value names the node's
	// domain at this level, e.g. kubernetes.io/hostname.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self.indexOf('/') <= 253",message="the prefix of a label key must be at most 253 characters"
	NodeLabel string `json:"nodeLabel"`
}

// NetworkTopologyStatus reports whether the scheduler uses the topology.
type NetworkTopologyStatus struct {
	// Conditions are the latest observations of the topology's state.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// +kubebuilder:object:root=true
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// NetworkTopologyList is a list of NetworkTopologies.
type NetworkTopologyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the topologies.
	Items []NetworkTopology `json:"items"`
}

// QueuePositionsName is the name of the one QueuePositions object of each
// namespace with pending gangs.
const QueuePositionsName = "phalanx"

// MaxGangPositions bounds the gangs listed in one QueuePositions object
// (the first ones in the cluster's order); the rest are counted.
const MaxGangPositions = 1000

// +genclient
// +resourceName=queuepositions
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,path=queuepositions,singular=queuepositions,shortName=qpos,categories=phalanx
// +kubebuilder:printcolumn:name="Pending",type=integer,JSONPath=`.pendingGangs`,description="Gangs of this namespace waiting"
// +kubebuilder:printcolumn:name="Cluster",type=integer,JSONPath=`.clusterPendingGangs`,description="Gangs waiting in the cluster"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// QueuePositions says where each pending gang of a namespace stands: its
// position in its queue and in the cluster, and why the gang ahead of it
// goes first. phalanx-controller writes one, named "phalanx", in every
// namespace with pending gangs, from the order the scheduler sorts its queue
// by (gang.Compare); users read it with the namespace's view role.
type QueuePositions struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// PendingGangs counts the namespace's gangs not yet started.
	// +optional
	PendingGangs int32 `json:"pendingGangs,omitempty"`

	// ClusterPendingGangs counts the gangs not yet started in the cluster.
	// +optional
	ClusterPendingGangs int32 `json:"clusterPendingGangs,omitempty"`

	// Gangs are the namespace's pending gangs in the cluster's order, at
	// most 1000 (the first ones); PendingGangs counts them all.
	// +optional
	// +kubebuilder:validation:MaxItems=1000
	Gangs []GangPosition `json:"gangs,omitempty"`
}

// GangPosition is one pending gang's place.
type GangPosition struct {
	// Name of the gang's group object (a PodGroup, or the PodGroup phalanx
	// made for an implicit gang).
	Name string `json:"name"`

	// Kind of the group object: PodGroup (scheduling.x-k8s.io),
	// Workload (a scheduling.k8s.io PodGroup) or CompositePodGroup.
	Kind string `json:"kind"`

	// Queue the gang waits in.
	Queue string `json:"queue"`

	// Priority the gang is ordered by.
	// +optional
	Priority int32 `json:"priority,omitempty"`

	// Submitted is when the gang's group object was created.
	Submitted metav1.Time `json:"submitted"`

	// PositionInQueue counts from 1 among the pending gangs of its queue.
	PositionInQueue int32 `json:"positionInQueue"`

	// QueueLength counts the pending gangs of its queue.
	QueueLength int32 `json:"queueLength"`

	// PositionInCluster counts from 1 among every pending gang, the queues
	// interleaved by their shares as the scheduler interleaves them now.
	PositionInCluster int32 `json:"positionInCluster"`

	// Ahead is the gang just before this one in its queue, if any.
	// +optional
	Ahead *GangAhead `json:"ahead,omitempty"`

	// ExpectedStart is when the scheduler expects the gang to start: set
	// for the gang that holds its queue's reservation when the pods it
	// waits for have limits or expected-runtime estimates; absent when
	// unknown.
	// +optional
	ExpectedStart *metav1.Time `json:"expectedStart,omitempty"`
}

// GangAhead is the gang just ahead of another in its queue.
type GangAhead struct {
	// Name of the gang ahead, when it is in the same namespace; a gang of
	// another namespace is not named.
	// +optional
	Name string `json:"name,omitempty"`

	// Reason it goes first, in words.
	Reason string `json:"reason"`
}

// +kubebuilder:object:root=true
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// QueuePositionsList is a list of QueuePositions.
type QueuePositionsList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the namespaces' positions.
	Items []QueuePositions `json:"items"`
}
