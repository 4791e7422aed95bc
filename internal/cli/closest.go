package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// Closest is where a waiting gang comes nearest to fitting now, counted by
// resources, node selectors and taints (the scheduler's other filters,
// NUMA and devices are not repeated here; its condition names them).
type Closest struct {
	// Level and Domain: the domain of the gang's required level (Level
	// "cluster" when it requires none).
	Level  string `json:"level"`
	Domain string `json:"domain"`
	// Fit members fit there now, of Need still unbound.
	Fit  int `json:"fit"`
	Need int `json:"need"`
	// ToFree is the room Need-Fit more members ask for: what must free in
	// that domain for the gang to start.
	ToFree map[string]string `json:"toFree,omitempty"`
}

// closest places the gang's missing members by arithmetic over the nodes a
// member may use, per domain of its required level.
func closest(ctx context.Context, c *clients, member *corev1.Pod, required string, need int) (*Closest, error) {
	if need <= 0 {
		return nil, nil
	}
	req := resourcehelper.PodRequests(member, resourcehelper.PodResourcesOptions{})
	levelLabel := ""
	if required != "" {
		nt, err := c.phalanx.SchedulingV1alpha1().NetworkTopologies().Get(ctx, phalanxv1alpha1.DefaultNetworkTopologyName, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		if nt != nil {
			for _, l := range nt.Spec.Levels {
				if l.Name == required {
					levelLabel = l.NodeLabel
				}
			}
		}
		if levelLabel == "" {
			return nil, fmt.Errorf("level %q is not in NetworkTopology default", required)
		}
	}
	nodes, used, err := nodeUsage(ctx, c)
	if err != nil {
		return nil, err
	}
	selector := labels.SelectorFromSet(member.Spec.NodeSelector)
	fits := map[string]int{}
	for _, n := range nodes {
		if n.Spec.Unschedulable || !selector.Matches(labels.Set(n.Labels)) {
			continue
		}
		if _, bad := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, member.Spec.Tolerations, func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		}, false); bad {
			continue
		}
		domain := "cluster"
		if levelLabel != "" {
			if domain = n.Labels[levelLabel]; domain == "" {
				continue
			}
		}
		fits[domain] += membersFitting(n.Status.Allocatable, used[n.Name], req)
	}
	if len(fits) == 0 {
		return nil, fmt.Errorf("no node may take a member (node selector, taints, or no node of level %q)", required)
	}
	domains := make([]string, 0, len(fits))
	for d := range fits {
		domains = append(domains, d)
	}
	sort.Slice(domains, func(i, j int) bool {
		if fits[domains[i]] != fits[domains[j]] {
			return fits[domains[i]] > fits[domains[j]]
		}
		return domains[i] < domains[j]
	})
	best := domains[0]
	out := &Closest{Level: "cluster", Domain: best, Fit: min(fits[best], need), Need: need}
	if required != "" {
		out.Level = required
	}
	if short := need - out.Fit; short > 0 {
		out.ToFree = map[string]string{}
		for n, q := range req {
			if q.IsZero() {
				continue
			}
			total := q.DeepCopy()
			total.Mul(int64(short))
			out.ToFree[string(n)] = total.String()
		}
	}
	return out, nil
}

// nodeUsage reads the nodes and what their bound, unfinished pods request.
func nodeUsage(ctx context.Context, c *clients) ([]*corev1.Node, map[string]corev1.ResourceList, error) {
	nodes, err := c.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	pods, err := c.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"})
	if err != nil {
		return nil, nil, err
	}
	used := map[string]corev1.ResourceList{}
	for i := range pods.Items {
		p := &pods.Items[i]
		u := used[p.Spec.NodeName]
		if u == nil {
			u = corev1.ResourceList{}
			used[p.Spec.NodeName] = u
		}
		for n, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}) {
			sum := u[n]
			sum.Add(q)
			u[n] = sum
		}
	}
	out := make([]*corev1.Node, len(nodes.Items))
	for i := range nodes.Items {
		out[i] = &nodes.Items[i]
	}
	return out, used, nil
}

// membersFitting counts the members of request r that fit the room
// allocatable leaves after used.
func membersFitting(allocatable, used, r corev1.ResourceList) int {
	best := -1
	for n, q := range r {
		if q.IsZero() {
			continue
		}
		a, ok := allocatable[n]
		if !ok {
			return 0
		}
		free := a.DeepCopy()
		if u, ok := used[n]; ok {
			free.Sub(u)
		}
		k := 0
		if free.Sign() > 0 {
			k = int(free.MilliValue() / q.MilliValue())
		}
		if best < 0 || k < best {
			best = k
		}
	}
	if best < 0 {
		// A pod that asks for nothing fits any node (pod count aside).
		return 1 << 20
	}
	return best
}

func (c *Closest) String() string {
	s := fmt.Sprintf("%s %s: %d of %d missing members fit now (by resources, node selectors and taints)", c.Level, c.Domain, c.Fit, c.Need)
	if len(c.ToFree) == 0 {
		return s
	}
	parts := []string{}
	for _, k := range sortedKeys(c.ToFree) {
		parts = append(parts, c.ToFree[k]+" "+k)
	}
	return s + "\nTo start:   free room for " + fmt.Sprint(c.Need-c.Fit) + " more there: " + strings.Join(parts, ", ")
}
