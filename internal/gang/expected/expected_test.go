package expected

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

func pod(deadline int64, annotation string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	if deadline > 0 {
		p.Spec.ActiveDeadlineSeconds = &deadline
	}
	if annotation != "" {
		p.Annotations = map[string]string{phalanxv1alpha1.ExpectedRuntimeAnnotation: annotation}
	}
	return p
}

func TestOf(t *testing.T) {
	group := map[string]string{phalanxv1alpha1.ExpectedRuntimeAnnotation: "2h"}
	for _, tc := range []struct {
		name  string
		pod   *v1.Pod
		group map[string]string
		want  Runtime
	}{
		{name: "nothing: unknown", pod: pod(0, "")},
		{name: "a deadline is hard and goes first", pod: pod(600, "4h"), group: group, want: Runtime{600 * time.Second, Hard}},
		{name: "the pod's annotation before the group's", pod: pod(0, "90m"), group: group, want: Runtime{90 * time.Minute, Soft}},
		{name: "the group's annotation", pod: pod(0, ""), group: group, want: Runtime{2 * time.Hour, Soft}},
		{name: "an annotation that does not parse counts as none", pod: pod(0, "soon"), group: group, want: Runtime{2 * time.Hour, Soft}},
		{name: "a negative estimate counts as none", pod: pod(0, "-1h")},
	} {
		if got := Of(tc.pod, tc.group); got != tc.want {
			t.Errorf("%s: Of = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestParseAndInvalid(t *testing.T) {
	if d, err := Parse("4h"); err != nil || d != 4*time.Hour {
		t.Errorf("Parse(4h) = %v, %v", d, err)
	}
	for _, raw := range []string{"4 hours", "0s", "-5m", ""} {
		msg := Invalid(map[string]string{phalanxv1alpha1.ExpectedRuntimeAnnotation: raw})
		if !strings.Contains(msg, phalanxv1alpha1.ExpectedRuntimeAnnotation) || !strings.Contains(msg, `"`+raw+`"`) {
			t.Errorf("Invalid(%q) = %q; want the annotation and its value named", raw, msg)
		}
	}
	if msg := Invalid(map[string]string{"other": "x"}); msg != "" {
		t.Errorf("Invalid without the annotation = %q", msg)
	}
}

func TestEnd(t *testing.T) {
	start := time.Unix(1000, 0)
	soft, hard := Runtime{time.Hour, Soft}, Runtime{time.Hour, Hard}
	if got := soft.End(start, start.Add(time.Minute)); !got.Equal(start.Add(time.Hour)) {
		t.Errorf("soft end before its estimate = %v", got)
	}
	// Past its estimate, soft work is expected any moment; a hard limit
	// is when the kubelet stopped it.
	late := start.Add(2 * time.Hour)
	if got := soft.End(start, late); !got.Equal(late) || !soft.Overran(start, late) {
		t.Errorf("soft end past its estimate = %v (overran %v), want now", got, soft.Overran(start, late))
	}
	if got := hard.End(start, late); !got.Equal(start.Add(time.Hour)) || hard.Overran(start, late) {
		t.Errorf("hard end = %v (overran %v)", got, hard.Overran(start, late))
	}
	if got := (Runtime{}).End(start, late); !got.IsZero() {
		t.Errorf("unknown end = %v, want zero", got)
	}
}
