package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

func TestExplain(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want []string
	}{
		{"forbidden names the resource and the role",
			apierrors.NewForbidden(schema.GroupResource{Group: "scheduling.phalanx.dev", Resource: "queues"}, "", errors.New("no")),
			[]string{"permission denied: you may not read queues.scheduling.phalanx.dev here", "phalanx-cluster-viewer"}},
		{"a kind not served names the CRDs",
			&meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "scheduling.phalanx.dev", Kind: "QueuePositions"}},
			[]string{"the API server does not serve", "manifests/crds"}},
		{"other errors pass through", errors.New("connection refused"), []string{"connection refused"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := explain(tc.err).Error()
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("explain = %q, want it to contain %q", got, w)
				}
			}
		})
	}
}

func TestRunRefusesBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--output", "xml", "jobs"}, 2, `--output "xml": use table, json or yaml`},
		{[]string{"--no-such-flag"}, 2, "unknown flag: --no-such-flag"},
		{[]string{"--kubeconfig", "/nonexistent/kubeconfig", "jobs"}, 1, "reading the kubeconfig"},
	} {
		var stdout, stderr bytes.Buffer
		if code := Run(tc.args, &stdout, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("Run(%v) = %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := Run([]string{"--help"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "why <target>") {
		t.Errorf("--help: %d %q", code, stdout.String())
	}
}

func TestResourcesGPUsFirst(t *testing.T) {
	names := []string{"memory", "cpu", "example.com/fpga", "nvidia.com/gpu", "pods"}
	resourceOrder(names)
	if got := strings.Join(names, ","); got != "nvidia.com/gpu,example.com/fpga,cpu,memory,pods" {
		t.Errorf("order %s", got)
	}
	used := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("12"), corev1.ResourceCPU: resource.MustParse("4")}
	guarantee := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8"), corev1.ResourceCPU: resource.MustParse("8")}
	if got := list(above(used, guarantee)); got != "nvidia.com/gpu=4" {
		t.Errorf("borrowing %s, want nvidia.com/gpu=4", got)
	}
	if got := ofDeserved(quantities(used), quantities(guarantee)); got != "nvidia.com/gpu=12/8,cpu=4/8" {
		t.Errorf("allocated/deserved %s", got)
	}
}

func TestFirstClause(t *testing.T) {
	msg := "no placement for 4 more members (minMember 4, 0 placed): at most 2 fit. nothing is reserved"
	if got := firstClause("Unschedulable", msg); got != "Unschedulable: no placement for 4 more members (minMember 4, 0 placed): at most 2 fit" {
		t.Errorf("firstClause = %q", got)
	}
	if got := firstClause("", ""); got != "-" {
		t.Errorf("empty: %q", got)
	}
}

func TestMembersFitting(t *testing.T) {
	q := resource.MustParse
	alloc := corev1.ResourceList{"nvidia.com/gpu": q("8"), corev1.ResourceCPU: q("64")}
	used := corev1.ResourceList{"nvidia.com/gpu": q("3"), corev1.ResourceCPU: q("60")}
	for _, tc := range []struct {
		req  corev1.ResourceList
		want int
	}{
		{corev1.ResourceList{"nvidia.com/gpu": q("2")}, 2},
		{corev1.ResourceList{"nvidia.com/gpu": q("2"), corev1.ResourceCPU: q("3")}, 1},
		{corev1.ResourceList{"example.com/fpga": q("1")}, 0},
	} {
		if got := membersFitting(alloc, used, tc.req); got != tc.want {
			t.Errorf("membersFitting(%v) = %d, want %d", tc.req, got, tc.want)
		}
	}
}

// TestQueueTableRecent: the RECENT column shows only where decayed fair
// share is on, with each queue's recent usage.
func TestQueueTableRecent(t *testing.T) {
	rows := []QueueRow{{Name: "a", Weight: 1, State: "Open"}, {Name: "b", Weight: 1, State: "Open"}}
	var off strings.Builder
	if err := (&QueueTree{Queues: rows}).table(&off); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(off.String(), "RECENT") {
		t.Errorf("RECENT shown while decayed fair share is off:\n%s", off.String())
	}
	rows[0].RecentUsage = map[string]string{"nvidia.com/gpu": "3.5"}
	var on strings.Builder
	if err := (&QueueTree{Queues: rows}).table(&on); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(on.String()), "\n")
	if len(lines) != 3 || !strings.HasSuffix(lines[0], "RECENT") || !strings.HasSuffix(lines[1], "nvidia.com/gpu=3.5") || !strings.HasSuffix(lines[2], "-") {
		t.Errorf("table:\n%s", on.String())
	}
}

// TestJobTableStart: START shows the scheduler's expected start of a gang
// that has one, "-" for the others.
func TestJobTableStart(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	jobs := []JobRow{
		{Namespace: "ns", Gang: "big", Source: "Job big", Queue: "a", State: "Pending", Position: &phalanxv1alpha1.GangPosition{Queue: "a", PositionInQueue: 1, QueueLength: 2, PositionInCluster: 1, ExpectedStart: &at}},
		{Namespace: "ns", Gang: "next", Source: "Job next", Queue: "a", State: "Pending", Position: &phalanxv1alpha1.GangPosition{Queue: "a", PositionInQueue: 2, QueueLength: 2, PositionInCluster: 2}},
	}
	var out strings.Builder
	if err := (&JobList{Jobs: jobs}).table(&out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	col := strings.Index(lines[0], "START")
	if len(lines) != 3 || col < 0 || !strings.HasPrefix(lines[1][col:], "2026-12-01T10:00:00Z ") || !strings.HasPrefix(lines[2][col:], "- ") {
		t.Errorf("table:\n%s", out.String())
	}
}
