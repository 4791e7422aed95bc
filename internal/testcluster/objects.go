package testcluster

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/phalanx-sched/phalanx/internal/testcluster/objects"
)

// The builders live in package objects; these are the names tests use.
type (
	// NodeSpec describes a fake node (objects.NodeSpec).
	NodeSpec = objects.NodeSpec
	// PodSpec describes a pause pod with requests (objects.PodSpec).
	PodSpec = objects.PodSpec
)

// GPU is the extended resource name the harness uses for GPUs.
const GPU = objects.GPU

// PodGroup builds a scheduler-plugins PodGroup.
func PodGroup(namespace, name string, minMember int32) *pgv1alpha1.PodGroup {
	return objects.PodGroup(namespace, name, minMember)
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
