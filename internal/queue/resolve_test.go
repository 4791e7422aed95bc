package queue

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestOf: the pod's label wins over its group's, the group's over the
// namespace's, the namespace's over the default; empty values do not count;
// a gang with no member at hand (nil pod) resolves from its group.
func TestOf(t *testing.T) {
	pod := func(q string) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
		if q != "" {
			p.Labels = map[string]string{Label: q}
		}
		return p
	}
	labels := func(q string) map[string]string { return map[string]string{Label: q, "other": "x"} }
	tests := []struct {
		name      string
		pod       *v1.Pod
		group, ns map[string]string
		want      string
	}{
		{"pod label", pod("p"), labels("g"), labels("n"), "p"},
		{"group label", pod(""), labels("g"), labels("n"), "g"},
		{"upstream group (workload's label)", pod(""), map[string]string{Label: "wl"}, labels("n"), "wl"},
		{"namespace label", pod(""), nil, labels("n"), "n"},
		{"group without the label", pod(""), map[string]string{"other": "x"}, labels("n"), "n"},
		{"empty values do not count", pod(""), labels(""), labels(""), "dflt"},
		{"default", pod(""), nil, nil, "dflt"},
		{"no member at hand", nil, labels("g"), labels("n"), "g"},
		{"no member, no group", nil, nil, nil, "dflt"},
	}
	for _, tt := range tests {
		if got := Of(tt.pod, tt.group, tt.ns, "dflt"); got != tt.want {
			t.Errorf("%s: Of = %q, want %q", tt.name, got, tt.want)
		}
	}
}
