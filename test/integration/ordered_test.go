package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
	"github.com/phalanx-sched/phalanx/manifests"
)

// gangStatefulSet is a StatefulSet of n pods of 1 CPU whose pod template
// makes them one implicit gang (gang-size n).
func gangStatefulSet(ns, name string, n int32, policy appsv1.PodManagementPolicyType) *appsv1.StatefulSet {
	labels := map[string]string{"app": name}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(n),
			PodManagementPolicy: policy,
			ServiceName:         name,
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{
					phalanxv1alpha1.GangSizeAnnotation: fmt.Sprint(n),
				}},
				Spec: v1.PodSpec{
					SchedulerName:                 "phalanx-scheduler",
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers: []v1.Container{{
						Name: "worker", Image: "registry.k8s.io/pause:3.10",
						Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}},
					}},
				},
			},
		},
	}
}

// TestOrderedStartupStatefulSet: kube-controller-manager's StatefulSet
// controller creates an OrderedReady StatefulSet's pods one at a time, each
// after the previous is Ready, so its implicit gang can never form. The
// gang's condition and a Warning event say so and name the fix; nothing
// binds. The same StatefulSet with podManagementPolicy Parallel binds whole.
func TestOrderedStartupStatefulSet(t *testing.T) {
	c := startCluster(t, nodes("n", 2, testcluster.NodeSpec{CPU: "4", Memory: "16Gi"})...)
	if err := c.StartStatefulSetController(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartSchedulerBinary(schedulerBinary, manifests.SchedulerConfig); err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	const ns = "sts"
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	if _, err := c.Client.AppsV1().StatefulSets(ns).Create(ctx, gangStatefulSet(ns, "ordered", 3, ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gang, cond, err := c.WaitImplicitGangCondition(ctx, ns, "app=ordered", 1, "Scheduled", "OrderedStartup", 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"StatefulSet sts/ordered", "podManagementPolicy: OrderedReady", "podManagementPolicy: Parallel", "1 of 3 members"} {
		if !strings.Contains(cond.Message, want) {
			t.Errorf("condition message %q does not say %q", cond.Message, want)
		}
	}
	if err := testcluster.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		evs, err := c.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == gang.Name && e.Reason == "OrderedStartup" && e.Type == v1.EventTypeWarning && strings.Contains(e.Note, "Parallel") {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("no Warning event OrderedStartup on PodGroup %s: %v", gang.Name, err)
	}
	// The controller still waits for pod 0, which phalanx holds: one pod, unbound.
	got, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=ordered"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Items) != 1 || got.Items[0].Spec.NodeName != "" || got.Items[0].Name != "ordered-0" {
		t.Fatalf("OrderedReady StatefulSet: %d pods, want its pod ordered-0 alone and unbound", len(got.Items))
	}

	// The fix the condition names: Parallel creates all 3, and they bind together.
	if _, err := c.Client.AppsV1().StatefulSets(ns).Create(ctx, gangStatefulSet(ns, "parallel", 3, appsv1.ParallelPodManagement), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := testcluster.Eventually(ctx, 90*time.Second, func(ctx context.Context) (bool, error) {
		bound, err := c.BoundPods(ctx, ns, "app=parallel")
		return len(bound) == 3, err
	}); err != nil {
		t.Fatalf("Parallel StatefulSet gang not bound whole: %v", err)
	}
}
