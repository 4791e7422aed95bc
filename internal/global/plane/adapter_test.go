package plane

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/component-base/metrics/testutil"

	"github.com/phalanx-sched/phalanx/internal/estimator/karmadapb"
	"github.com/phalanx-sched/phalanx/internal/global"
	"github.com/phalanx-sched/phalanx/internal/global/estimators"
)

// When it was dispatched is status.lastScheduledTime, which every dispatch
// rewrites: a move keeps Scheduled True, so the condition's transition time
// stays the first dispatch's. Without it, the transition time.
func TestJobOfSince(t *testing.T) {
	sched := `,"clusters":[{"name":"m2","replicas":4}]`
	first := `"conditions":[{"type":"Scheduled","status":"True","reason":"Success","message":"","lastTransitionTime":"2026-12-07T12:00:00Z"}]`
	for _, tc := range []struct {
		name, status string
		want         time.Time
	}{
		{name: "moved", status: `{` + first + `,"lastScheduledTime":"2026-12-07T12:40:00Z"}`, want: time.Date(2026, 12, 7, 12, 40, 0, 0, time.UTC)},
		{name: "condition only", status: `{` + first + `}`, want: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)},
		{name: "condition not true", status: `{"conditions":[{"type":"Scheduled","status":"False","reason":"NoMemberFitsNow","message":"","lastTransitionTime":"2026-12-07T12:00:00Z"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := jobOf(decode(t, withStatus(`"status":`+tc.status, sched)), nil, nil, "default")
			if j.Member != "m2" || !j.Since.Equal(tc.want) {
				t.Fatalf("member %q since %v, want m2 since %v", j.Member, j.Since, tc.want)
			}
		})
	}
}

// recordingAsker records the questions and answers from a table.
type recordingAsker struct {
	questions map[string]estimators.Question
	answers   map[string]estimators.Result
}

func (a *recordingAsker) SetsEach(_ context.Context, q map[string]estimators.Question) map[string]estimators.Result {
	a.questions = q
	return a.answers
}

// The adapter asks each member about the job's components, with the jobs
// dispatched there that have not started as assumed workloads, and passes
// each member's answer or failure back.
func TestEstimatorAsksEachMember(t *testing.T) {
	comps := func(n int32) []*karmadapb.Component { return []*karmadapb.Component{{Name: "worker", Replicas: n}} }
	job := &global.Job{Namespace: "ml", Kind: "PyTorchJob", Name: "train", Components: comps(4)}
	pending := &global.Job{Namespace: "other", Name: "pending", Components: comps(2)}
	a := &recordingAsker{answers: map[string]estimators.Result{"m1": {Sets: 2}, "m2": {Err: errors.New("unavailable")}}}
	got := Estimator(a).Sets(context.Background(), job, []global.Ask{{Member: "m1"}, {Member: "m2", Assumed: []*global.Job{pending}}})
	if got["m1"].Sets != 2 || got["m1"].Err != nil || got["m2"].Err == nil || got["m2"].Err.Error() != "unavailable" {
		t.Fatalf("answers %+v, want m1 2 sets and m2's failure", got)
	}
	q1, q2 := a.questions["m1"], a.questions["m2"]
	if q1.Namespace != "ml" || q1.Kind != "PyTorchJob" || q1.Name != "train" || len(q1.Components) != 1 || q1.Components[0].Replicas != 4 || len(q1.Assumed) != 0 {
		t.Fatalf("m1 asked %+v, want train's 4 workers and nothing assumed", q1)
	}
	if len(q2.Assumed) != 1 || q2.Assumed[0].Namespace != "other" || q2.Assumed[0].Components[0].Replicas != 2 {
		t.Fatalf("m2 asked with assumed %v, want pending's 2 workers", q2.Assumed)
	}
}

// A pass's waiting jobs are counted by queue, replacing the last pass's.
func TestObservePass(t *testing.T) {
	RegisterMetrics()
	v := func(q string, member string, reason global.Reason) global.Verdict {
		return global.Verdict{Job: &global.Job{Queue: q}, Member: member, Reason: reason}
	}
	observePass(time.Millisecond, []global.Verdict{v("a", "", global.NoMemberFitsNow), v("a", "", global.QueueAboveShare), v("b", "", global.InvalidJob), v("b", "m1", global.Dispatched)})
	for q, want := range map[string]float64{"a": 2, "b": 1} {
		if got, err := testutil.GetGaugeMetricValue(waitingJobs.WithLabelValues(q)); err != nil || got != want {
			t.Fatalf("waiting jobs of %s: %v (%v), want %v", q, got, err, want)
		}
	}
	before, _ := testutil.GetCounterMetricValue(verdictsTotal.WithLabelValues(string(global.Dispatched), "true"))
	move := v("a", "m2", global.Dispatched)
	move.Move = true
	observePass(time.Millisecond, []global.Verdict{move})
	if after, _ := testutil.GetCounterMetricValue(verdictsTotal.WithLabelValues(string(global.Dispatched), "true")); after != before+1 {
		t.Fatalf("moves counted %v → %v, want one more", before, after)
	}
	if got, _ := testutil.GetGaugeMetricValue(waitingJobs.WithLabelValues("b")); got != 0 {
		t.Fatalf("queue b still counts %v waiting jobs after a pass where none waits", got)
	}
}
