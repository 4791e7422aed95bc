package testcluster

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/workload"
)

// PodGroupCondition reads a condition of a scheduler-plugins PodGroup from
// the raw object (the upstream Go type has no conditions field); nil if the
// PodGroup has none of that type.
func (c *Cluster) PodGroupCondition(ctx context.Context, ns, name, condType string) (*metav1.Condition, error) {
	raw, err := c.PodGroups.SchedulingV1alpha1().RESTClient().Get().Namespace(ns).Resource("podgroups").Name(name).DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	conds, err := gangspec.ReadConditions(raw)
	if err != nil {
		return nil, err
	}
	return apimeta.FindStatusCondition(conds, condType), nil
}

// WorkloadPods lists the pods of a namespace that match selector, once at
// least want exist (a workload controller creates them), and checks that
// they all belong to one implicit gang; it returns the pods and that gang.
func (c *Cluster) WorkloadPods(ctx context.Context, ns, selector string, want int, timeout time.Duration) ([]v1.Pod, workload.Implicit, error) {
	var pods []v1.Pod
	err := Eventually(ctx, timeout, func(ctx context.Context) (bool, error) {
		list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		pods = pods[:0]
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil {
				pods = append(pods, p)
			}
		}
		return len(pods) >= want, nil
	})
	if err != nil {
		return nil, workload.Implicit{}, fmt.Errorf("%d pods matching %q in %s, want %d: %w", len(pods), selector, ns, want, err)
	}
	gang, err := SameImplicitGang(pods)
	return pods, gang, err
}

// SameImplicitGang checks that pods are all in one implicit gang and
// returns it.
func SameImplicitGang(pods []v1.Pod) (workload.Implicit, error) {
	var gang workload.Implicit
	for i := range pods {
		g, ok, err := workload.ImplicitGang(&pods[i])
		if err != nil || !ok {
			return gang, fmt.Errorf("pod %s: implicit gang ok=%v err=%v", pods[i].Name, ok, err)
		}
		if i == 0 {
			gang = g
		} else if g.Name != gang.Name {
			return gang, fmt.Errorf("pods %s and %s are in gangs %s and %s", pods[0].Name, pods[i].Name, gang.Name, g.Name)
		}
	}
	return gang, nil
}

// WaitImplicitPodGroup waits until the scheduler has created the PodGroup of
// an implicit gang, and checks it against the gang: minMember and owner.
func (c *Cluster) WaitImplicitPodGroup(ctx context.Context, ns string, gang workload.Implicit, timeout time.Duration) (*pgv1alpha1.PodGroup, error) {
	var pg *pgv1alpha1.PodGroup
	err := Eventually(ctx, timeout, func(ctx context.Context) (bool, error) {
		var err error
		pg, err = c.PodGroups.SchedulingV1alpha1().PodGroups(ns).Get(ctx, gang.Name, metav1.GetOptions{})
		if errors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return nil, fmt.Errorf("PodGroup %s/%s of %s was never created: %w", ns, gang.Name, gang.Workload, err)
	}
	if pg.Spec.MinMember != gang.MinMember {
		return pg, fmt.Errorf("PodGroup %s/%s: minMember %d, want %d", ns, gang.Name, pg.Spec.MinMember, gang.MinMember)
	}
	if gang.Owner != nil {
		found := false
		for _, o := range pg.OwnerReferences {
			found = found || o.UID == gang.Owner.UID
		}
		if !found {
			return pg, fmt.Errorf("PodGroup %s/%s: owners %v, want %s %s (uid %s)", ns, gang.Name, pg.OwnerReferences, gang.Owner.Kind, gang.Owner.Name, gang.Owner.UID)
		}
	}
	return pg, nil
}

// WaitImplicitGangCondition waits for `members` pods of selector, their
// implicit gang's PodGroup, and its condition of type condType with reason.
func (c *Cluster) WaitImplicitGangCondition(ctx context.Context, ns, selector string, members int, condType, reason string, timeout time.Duration) (workload.Implicit, *metav1.Condition, error) {
	_, gang, err := c.WorkloadPods(ctx, ns, selector, members, timeout)
	if err != nil {
		return gang, nil, err
	}
	if _, err := c.WaitImplicitPodGroup(ctx, ns, gang, timeout); err != nil {
		return gang, nil, err
	}
	cond, err := c.WaitCondition(ctx, ns, gang.Name, condType, reason, timeout)
	return gang, cond, err
}

// WaitCondition waits until the PodGroup's condition of type condType has
// reason, and returns it.
func (c *Cluster) WaitCondition(ctx context.Context, ns, name, condType, reason string, timeout time.Duration) (*metav1.Condition, error) {
	var got *metav1.Condition
	err := Eventually(ctx, timeout, func(ctx context.Context) (bool, error) {
		var err error
		got, err = c.PodGroupCondition(ctx, ns, name, condType)
		return err == nil && got != nil && got.Reason == reason, err
	})
	if err != nil {
		return got, fmt.Errorf("PodGroup %s/%s never got %s reason %s (last: %+v): %w", ns, name, condType, reason, got, err)
	}
	return got, nil
}

// WaitPodGroupGone waits until a scheduler-plugins PodGroup no longer exists
// (the garbage collector deleted it with its owner).
func (c *Cluster) WaitPodGroupGone(ctx context.Context, ns, name string, timeout time.Duration) error {
	return Eventually(ctx, timeout, func(ctx context.Context) (bool, error) {
		_, err := c.PodGroups.SchedulingV1alpha1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
		if errors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}
