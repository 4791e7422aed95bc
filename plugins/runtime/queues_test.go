package runtime_test

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/plugins/internal/plugintest"
)

// TestQueueOfWorkloadAPIGang is the scheduler's half of the controller's
// test of the same name: a pod whose spec.schedulingGroup names an upstream
// PodGroup made from a Workload labelled with queue "wl-queue", in a
// namespace labelled with queue "ns-queue", is in the Workload's queue; in
// the PodGroup's own when it has one.
func TestQueueOfWorkloadAPIGang(t *testing.T) {
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{phalanxv1alpha1.QueueLabel: "ns-queue"}}}
	wl := &schedulingv1beta1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train",
		Labels: map[string]string{phalanxv1alpha1.QueueLabel: "wl-queue"}}}
	group := func(name string, labels map[string]string, policy schedulingv1beta1.PodGroupSchedulingPolicy) *schedulingv1beta1.PodGroup {
		return &schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, Labels: labels},
			Spec: schedulingv1beta1.PodGroupSpec{
				WorkloadRef: &schedulingv1beta1.WorkloadReference{
					WorkloadName: "train", TemplateName: "workers"},
				SchedulingPolicy: policy,
			},
		}
	}
	gangPolicy := schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 1}}
	basicPolicy := schedulingv1beta1.PodGroupSchedulingPolicy{Basic: &schedulingv1beta1.BasicSchedulingPolicy{}}
	member := func(group string) *v1.Pod {
		p := plugintest.Pod("m-"+group, "", "1", 0)
		p.Namespace = "team-a"
		p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
		return p
	}
	_, _, queues := plugintest.BuildParts(t, plugintest.Objects{
		Namespaces: []*v1.Namespace{ns},
		Workloads:  []*schedulingv1beta1.Workload{wl},
		UpstreamPodGroups: []*schedulingv1beta1.PodGroup{
			group("workers", nil, gangPolicy),
			group("labelled", map[string]string{phalanxv1alpha1.QueueLabel: "pg-queue"}, gangPolicy),
			group("basic", nil, basicPolicy),
		},
	})
	for group, want := range map[string]string{"workers": "wl-queue", "labelled": "pg-queue", "basic": "wl-queue"} {
		if got := queues.QueueOf(member(group)); got != want {
			t.Errorf("a member of PodGroup %s is in queue %q, want %q", group, got, want)
		}
	}
}
