package workload

import (
	"testing"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// TestUpstreamQueue: an upstream PodGroup's queue label, else the one of the
// Workload it references (only that one), whatever its scheduling policy.
func TestUpstreamQueue(t *testing.T) {
	pg := func(queue, workload string, basic bool) *schedulingv1beta1.PodGroup {
		p := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pg"}}
		if queue != "" {
			p.Labels = map[string]string{phalanxv1alpha1.QueueLabel: queue}
		}
		if workload != "" {
			p.Spec.WorkloadRef = &schedulingv1beta1.WorkloadReference{
				WorkloadName: workload, TemplateName: "t"}
		}
		if basic {
			p.Spec.SchedulingPolicy.Basic = &schedulingv1beta1.BasicSchedulingPolicy{}
		} else {
			p.Spec.SchedulingPolicy.Gang = &schedulingv1beta1.GangSchedulingPolicy{MinCount: 2}
		}
		return p
	}
	wl := &schedulingv1beta1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train",
		Labels: map[string]string{phalanxv1alpha1.QueueLabel: "wl-q"}}}
	tests := []struct {
		name string
		pg   *schedulingv1beta1.PodGroup
		wl   *schedulingv1beta1.Workload
		want string
	}{
		{"PodGroup's label first", pg("pg-q", "train", false), wl, "pg-q"},
		{"Workload's label", pg("", "train", false), wl, "wl-q"},
		{"basic policy too", pg("", "train", true), wl, "wl-q"},
		{"Workload unknown", pg("", "train", false), nil, ""},
		{"another Workload", pg("", "other", false), wl, ""},
		{"no Workload reference", pg("", "", false), wl, ""},
	}
	for _, tt := range tests {
		got := UpstreamQueue(tt.pg, tt.wl)
		if got != tt.want {
			t.Errorf("%s: UpstreamQueue = %q, want %q", tt.name, got, tt.want)
		}
		labels := UpstreamGroupLabels(tt.pg, tt.wl)
		if labels[phalanxv1alpha1.QueueLabel] != tt.want || (tt.want == "") != (labels == nil) {
			t.Errorf("%s: UpstreamGroupLabels = %v, want the queue %q", tt.name, labels, tt.want)
		}
		if up, ok, _ := FromUpstream(tt.pg, tt.wl); ok && up.Queue != tt.want {
			t.Errorf("%s: FromUpstream().Queue = %q, want %q", tt.name, up.Queue, tt.want)
		}
	}
}
