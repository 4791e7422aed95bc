package report

import (
	"reflect"
	"testing"

	"github.com/phalanx-sched/phalanx/internal/sim/chart"
)

// TestScenarioPage: the page's parts of a run: description paragraphs, the
// jobs not started, a legend entry per job that ran somewhere (and for
// tainted nodes), and each queue's verdict as Check gives it.
func TestScenarioPage(t *testing.T) {
	r := syntheticResult()
	p := scenarioPage(r, "s3")
	if want := []string{"Two teams share four GPU nodes.", "The blocked gang fits in no ib-cluster."}; !reflect.DeepEqual(p.Paragraphs, want) {
		t.Errorf("paragraphs %q, want %q", p.Paragraphs, want)
	}
	if len(p.Jobs) != len(r.Jobs) || len(p.NotStarted) != 1 || p.NotStarted[0].Key != "default/blocked-b" || p.NotStarted[0].Reason != r.Jobs[2].Reason {
		t.Errorf("jobs %d, not started %+v", len(p.Jobs), p.NotStarted)
	}
	var legend []string
	for _, l := range p.JobLegend {
		legend = append(legend, l.Label)
	}
	if want := []string{"default/train-a", "default/infer-b", "tainted node (no job may use it)"}; !reflect.DeepEqual(legend, want) {
		t.Errorf("legend %q, want %q", legend, want)
	}
	for i, row := range p.Jobs {
		if row.Color != chart.Color(i) {
			t.Errorf("job %s has colour %s, want the palette's %d", row.Key, row.Color, i)
		}
	}
	if len(p.Errors) != len(Check(r)) || p.NUMANodes != 1 || p.ShareUnit != "GPUs" {
		t.Errorf("errors %v, NUMA nodes %d, unit %s", p.Errors, p.NUMANodes, p.ShareUnit)
	}
	for _, row := range p.ShareRows {
		if row.Verdict != "pass" || row.Expect == "-" || row.Share == "-" {
			t.Errorf("share row %+v, want a measured pass", row)
		}
	}
	// No sample with every queue waiting: nothing measured, a failed verdict.
	r.Samples = nil
	for _, row := range scenarioPage(r, "s3").ShareRows {
		if row.Verdict != "fail" || row.Share != "-" {
			t.Errorf("share row %+v, want an unmeasured fail", row)
		}
	}
	// A queue without an expectation has no verdict.
	r.Scenario.Queues[1].ExpectShare = nil
	if rows := scenarioPage(r, "s3").ShareRows; rows[1].Verdict != "" || rows[1].Expect != "-" {
		t.Errorf("share row %+v, want no verdict", rows[1])
	}
	r.Jobs = nil
	if p := scenarioPage(r, "s3"); p.Timeline != "" {
		t.Error("a timeline without jobs")
	}
}
