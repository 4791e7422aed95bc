// Package objects builds the API objects of a test cluster's fixtures: fake
// nodes, pause pods with requests, PodGroups, and NodeResourceTopology
// objects as NFD topology-updater publishes them.
package objects

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// GPU is the extended resource name the harness uses for GPUs.
const GPU v1.ResourceName = "nvidia.com/gpu"

// NodeSpec describes a fake node: no kubelet, just capacity and labels.
type NodeSpec struct {
	Name   string
	CPU    string // e.g. "4"
	Memory string // e.g. "16Gi"
	GPUs   int64
	Pods   int64 // default 110
	Labels map[string]string
	Taints []v1.Taint
	// NRTPolicy, when set, publishes a NodeResourceTopology object for the
	// node with this Topology Manager policy and one zone holding the whole
	// node, as NFD topology-updater does ("none" on most GPU nodes).
	NRTPolicy string
}

// Node builds the Node object of a spec, Ready, with capacity = allocatable.
func (s NodeSpec) Node() *v1.Node {
	pods := s.Pods
	if pods == 0 {
		pods = 110
	}
	capacity := v1.ResourceList{
		v1.ResourcePods: *resource.NewQuantity(pods, resource.DecimalSI),
	}
	if s.CPU != "" {
		capacity[v1.ResourceCPU] = resource.MustParse(s.CPU)
	}
	if s.Memory != "" {
		capacity[v1.ResourceMemory] = resource.MustParse(s.Memory)
	}
	if s.GPUs > 0 {
		capacity[GPU] = *resource.NewQuantity(s.GPUs, resource.DecimalSI)
	}
	labels := map[string]string{v1.LabelHostname: s.Name}
	for k, v := range s.Labels {
		labels[k] = v
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Labels: labels},
		Spec:       v1.NodeSpec{Taints: s.Taints},
		Status: v1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			Phase:       v1.NodeRunning,
			Conditions:  []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.Now()}},
		},
	}
}

// PodSpec describes a pod for tests: a pause container with requests.
type PodSpec struct {
	Name, Namespace string
	SchedulerName   string // default "phalanx-scheduler"
	CPU, Memory     string
	GPUs            int64
	PodGroup        string // joins the gang via the PodGroup label
	Labels          map[string]string
	Annotations     map[string]string
	Priority        *int32
	// PriorityClassName names a PriorityClass (the API server sets Priority).
	PriorityClassName string
	NodeSelector      map[string]string
	Tolerations       []v1.Toleration
	// Guaranteed sets limits equal to requests (Guaranteed QoS), so the
	// kubelet aligns the pod's CPUs and memory to NUMA zones.
	Guaranteed bool
}

// Pod builds the pod object.
func (s PodSpec) Pod() *v1.Pod {
	sched := s.SchedulerName
	if sched == "" {
		sched = "phalanx-scheduler"
	}
	ns := s.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	req := v1.ResourceList{}
	if s.CPU != "" {
		req[v1.ResourceCPU] = resource.MustParse(s.CPU)
	}
	if s.Memory != "" {
		req[v1.ResourceMemory] = resource.MustParse(s.Memory)
	}
	if s.GPUs > 0 {
		req[GPU] = *resource.NewQuantity(s.GPUs, resource.DecimalSI)
	}
	labels := map[string]string{}
	for k, v := range s.Labels {
		labels[k] = v
	}
	if s.PodGroup != "" {
		labels[pgv1alpha1.PodGroupLabel] = s.PodGroup
	}
	limits := v1.ResourceList{}
	if s.GPUs > 0 {
		limits[GPU] = req[GPU]
	}
	if s.Guaranteed {
		limits = req.DeepCopy()
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: ns, Labels: labels, Annotations: s.Annotations},
		Spec: v1.PodSpec{
			SchedulerName:     sched,
			Priority:          s.Priority,
			PriorityClassName: s.PriorityClassName,
			NodeSelector:      s.NodeSelector,
			Tolerations:       s.Tolerations,
			Containers: []v1.Container{{
				Name:      "main",
				Image:     "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{Requests: req, Limits: limits},
			}},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
}

// PodGroup builds a scheduler-plugins PodGroup.
func PodGroup(namespace, name string, minMember int32) *pgv1alpha1.PodGroup {
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	return &pgv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       pgv1alpha1.PodGroupSpec{MinMember: minMember},
	}
}
