package global

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/global/plane"
)

func bindingWith(clusters []any, aggregated []any) *unstructured.Unstructured {
	spec := map[string]any{"resource": map[string]any{"apiVersion": "batch/v1", "kind": "Job", "name": "train"}, "replicas": int64(2), "schedulerName": "phalanx-global"}
	if clusters != nil {
		spec["clusters"] = clusters
	}
	obj := map[string]any{"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
		"metadata": map[string]any{"name": "train-job", "namespace": "ml"}, "spec": spec}
	if aggregated != nil {
		obj["status"] = map[string]any{"aggregatedStatus": aggregated}
	}
	return &unstructured.Unstructured{Object: obj}
}

func memberStatus(cluster string, status map[string]any) any {
	return map[string]any{"clusterName": cluster, "applied": true, "status": status}
}

// StateOf reads the binding as the tier does: waiting without a member,
// dispatched until its quorum runs in the member it went to (another
// member's status does not count), then running, then done.
func TestStateOf(t *testing.T) {
	on := []any{map[string]any{"name": "m1", "replicas": int64(2)}}
	running := map[string]any{"conditions": []any{map[string]any{"type": "Running", "status": "True"}}}
	for _, tc := range []struct {
		name       string
		clusters   []any
		aggregated []any
		want       string
	}{
		{"no member", nil, nil, Waiting},
		{"no status yet", on, nil, Dispatched},
		{"one of two ready", on, []any{memberStatus("m1", map[string]any{"ready": int64(1)})}, Dispatched},
		{"quorum ready", on, []any{memberStatus("m1", map[string]any{"ready": int64(2)})}, Running},
		{"running condition", on, []any{memberStatus("m1", running)}, Running},
		{"running in another member", on, []any{memberStatus("m2", running)}, Dispatched},
		{"succeeded", on, []any{memberStatus("m1", map[string]any{"succeeded": int64(2)})}, Done},
		{"failed", on, []any{memberStatus("m1", map[string]any{"conditions": []any{map[string]any{"type": "Failed", "status": "True"}}})}, Done},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := plane.ViewOf(bindingWith(tc.clusters, tc.aggregated))
			if err != nil {
				t.Fatal(err)
			}
			if got := StateOf(v); got != tc.want {
				t.Errorf("StateOf = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestFirstClause(t *testing.T) {
	for _, tc := range []struct{ reason, message, want string }{
		{"NoMemberFitsNow", "no member can start the whole set now: m1: 0 whole sets fit now; m2: estimator failed: timeout (position 2 in queue team-a)",
			"NoMemberFitsNow: no member can start the whole set now: m1: 0 whole sets fit now"},
		{"DependencyWaiting", "depends on ml/prep: it waits on the plane (position 1 in queue q)", "DependencyWaiting: depends on ml/prep: it waits on the plane"},
		{"Success", "dispatched whole to member m1 (m1: 1 whole sets fit now)", "Success: dispatched whole to member m1 (m1: 1 whole sets fit now)"},
		{"Success", "dispatched whole to member m2 (m1: 0 whole sets fit now; m2: 2 whole sets fit now); placed again after its eviction from m3",
			"Success: dispatched whole to member m2 (m1: 0 whole sets fit now; m2: 2 whole sets fit now)"},
		{"QueueRefused", "", "QueueRefused"},
		{"", "", "-"},
		{"X", strings.Repeat("a", 120), "X: " + strings.Repeat("a", 97) + "..."},
	} {
		if got := FirstClause(tc.reason, tc.message); got != tc.want {
			t.Errorf("FirstClause(%q, %q) = %q, want %q", tc.reason, tc.message, got, tc.want)
		}
	}
}

func TestListTable(t *testing.T) {
	l := &List{Jobs: []Row{
		{Namespace: "ml", Binding: "next-job", Kind: "Job", Name: "next", Queue: "team-a", State: Waiting, Reason: "NoMemberFitsNow",
			Message:  "no member can start the whole set now: m1: 0 whole sets fit now (position 1 in queue team-a)",
			Position: &phalanxv1alpha1.GangPosition{Queue: "team-a", PositionInQueue: 1, QueueLength: 2, PositionInCluster: 3}},
		{Namespace: "ml", Binding: "big-job", Kind: "PyTorchJob", Name: "big", Queue: "team-a", Member: "m1", State: Running, Reason: "Success", Message: "dispatched whole to member m1"},
		{Namespace: "ml", Binding: "new-job", Kind: "Job", Name: "new", State: Waiting},
	}, Note: "positions not shown: permission denied"}
	var b strings.Builder
	if err := l.Table(&b); err != nil {
		t.Fatal(err)
	}
	want := `NAMESPACE  NAME            QUEUE   POSITION                         MEMBER  STATE    WHY
ml         Job/next        team-a  1/2 in team-a (#3 on the plane)  -       Waiting  NoMemberFitsNow: no member can start the whole set now: m1: 0 whole sets fit now
ml         PyTorchJob/big  team-a  -                                m1      Running  Success: dispatched whole to member m1
ml         Job/new         -       -                                -       Waiting  -
Note: positions not shown: permission denied
`
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := (&List{}).Table(&b); err != nil || b.String() != "No bindings of phalanx-global.\n" {
		t.Errorf("empty table %q (%v)", b.String(), err)
	}
}

// find takes a binding's name, its template's name, or either with a kind.
func TestFind(t *testing.T) {
	rows := []Row{{Binding: "train-job", Kind: "PyTorchJob", Name: "train"}, {Binding: "train", Kind: "Job", Name: "other"}}
	for target, want := range map[string]string{
		"train-job": "train-job", "train": "train", "rb/train": "train", "resourcebinding/train-job": "train-job",
		"pytorchjob/train": "train-job", "pytorchjobs/train": "train-job", "job/other": "train", "job/train": "", "rb/other": "",
	} {
		got := find(rows, target)
		switch {
		case want == "" && got != nil:
			t.Errorf("find(%q) = %s, want none", target, got.Binding)
		case want != "" && (got == nil || got.Binding != want):
			t.Errorf("find(%q) = %+v, want %s", target, got, want)
		}
	}
}

func TestWhyTable(t *testing.T) {
	r := &Row{Namespace: "ml", Binding: "eval-job", Kind: "Job", Name: "eval", Queue: "team-a", State: Waiting, Reason: "DependencyWaiting", Message: "depends on ml/next: it waits on the plane (position 2 in queue team-a)",
		Position: &phalanxv1alpha1.GangPosition{Queue: "team-a", PositionInQueue: 2, QueueLength: 2, PositionInCluster: 2,
			Ahead: &phalanxv1alpha1.GangAhead{Reason: "higher priority (10 > 5)"}}}
	w := &Why{Target: "ml/eval", Binding: r, WaitsFor: waitsFor(r), Events: []Event{{Age: "3s", Type: "Normal", Reason: "DependencyWaiting", Message: "depends on ml/next"}}}
	var b strings.Builder
	if err := w.Table(&b); err != nil {
		t.Fatal(err)
	}
	want := `Target:     ml/eval
Binding:    ResourceBinding ml/eval-job (template Job eval)
State:      Waiting
Queue:      team-a
Member:     -
Position:   2 of 2 in queue team-a, 2 on the plane
Ahead:      a binding of another namespace, because of higher priority (10 > 5)
Waits for:  DependencyWaiting: depends on ml/next: it waits on the plane (position 2 in queue team-a)
Recent events:
  3s ago  Normal  DependencyWaiting: depends on ml/next
`
	if b.String() != want {
		t.Errorf("why:\n%s\nwant:\n%s", b.String(), want)
	}
	for state, want := range map[string]string{Running: "nothing: it runs in member m1", Done: "nothing: it finished in member m1", Dispatched: "nothing on the plane: dispatched whole to member m1"} {
		if got := waitsFor(&Row{State: state, Member: "m1"}); !strings.HasPrefix(got, want) {
			t.Errorf("%s: %q, want %q", state, got, want)
		}
	}
	if got := waitsFor(&Row{State: Waiting}); got != "phalanx-global has not decided it yet" {
		t.Errorf("undecided: %q", got)
	}
}
