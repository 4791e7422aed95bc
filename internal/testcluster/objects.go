package testcluster

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
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

// CreateNodes creates nodes and sets their status (which create ignores).
func (c *Cluster) CreateNodes(ctx context.Context, specs ...NodeSpec) error {
	for _, s := range specs {
		want := s.Node()
		got, err := c.Client.CoreV1().Nodes().Create(ctx, want, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating node %s: %w", s.Name, err)
		}
		got.Status = want.Status
		if _, err := c.Client.CoreV1().Nodes().UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("setting status of node %s: %w", s.Name, err)
		}
		if s.NRTPolicy != "" {
			zone := ZoneSpec{Name: "node-0", CPU: s.CPU, Memory: s.Memory, GPUs: s.GPUs}
			if err := c.CreateNRT(ctx, s.Name, s.NRTPolicy, "container", zone); err != nil {
				return fmt.Errorf("publishing the NodeResourceTopology of %s: %w", s.Name, err)
			}
		}
	}
	return nil
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

// CreatePods creates pods.
func (c *Cluster) CreatePods(ctx context.Context, specs ...PodSpec) error {
	for _, s := range specs {
		p := s.Pod()
		if _, err := c.Client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return nil
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

// CreatePodGroup creates a PodGroup.
func (c *Cluster) CreatePodGroup(ctx context.Context, pg *pgv1alpha1.PodGroup) error {
	_, err := c.PodGroups.SchedulingV1alpha1().PodGroups(pg.Namespace).Create(ctx, pg, metav1.CreateOptions{})
	return err
}

// BoundPods lists the pods of a namespace matching selector that have a node.
func (c *Cluster) BoundPods(ctx context.Context, namespace, selector string) ([]v1.Pod, error) {
	list, err := c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	var out []v1.Pod
	for _, p := range list.Items {
		if p.Spec.NodeName != "" {
			out = append(out, p)
		}
	}
	return out, nil
}

// Eventually polls cond every interval until it returns true or timeout
// passes; it returns the last error or a timeout error.
func Eventually(ctx context.Context, timeout time.Duration, cond func(ctx context.Context) (bool, error)) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil {
			last = err
			return false, nil
		}
		return ok, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("%w (last error: %v)", err, last)
	}
	return err
}
