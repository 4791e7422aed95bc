package replay

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/sim"
	"github.com/phalanx-sched/phalanx/internal/sim/metrics"
	"github.com/phalanx-sched/phalanx/internal/sim/scenario"
)

func TestTraceSummary(t *testing.T) {
	s := time.Second
	gang := scenario.Job{Name: "g", Replicas: 2, MinMember: 2, GPUs: 2, Queue: "a", Annotations: map[string]string{"scheduling.phalanx.dev/topology-required": "leaf"}}
	plain := scenario.Job{Name: "p", Replicas: 1, GPUs: 1, Queue: "b"}
	never := scenario.Job{Name: "n", Replicas: 2, MinMember: 2, GPUs: 4, Queue: "b", Arrival: scenario.Duration{Duration: 2 * s}}
	sc := &scenario.Scenario{Name: "t", Jobs: []scenario.Job{gang, plain, never},
		Network: []phalanxv1alpha1.TopologyLevel{{Name: "leaf", NodeLabel: "leaf"}},
		Queues:  []scenario.Queue{{Name: "a", QueueSpec: phalanxv1alpha1.QueueSpec{Weight: 1}}, {Name: "b", QueueSpec: phalanxv1alpha1.QueueSpec{Weight: 1}}}}
	r := &sim.Result{Scenario: sc, GPUs: 8, Elapsed: 10 * s,
		Nodes: []sim.NodeResult{{Name: "n0", Labels: map[string]string{"leaf": "l0"}}, {Name: "n1", Labels: map[string]string{"leaf": "l1"}}},
		Jobs: []*sim.JobResult{
			{Job: gang, Submitted: 0, QuorumAt: 1 * s, MaxBound: 2, Nodes: map[string]int{"n0": 1, "n1": 1}, MaxLiveDomains: 2,
				// Evicted after it started, resubmitted and started again at
				// 4 s: it waited from 0 to 4 s.
				Evicted: 2, LostGPUSeconds: 3, RestartedAt: 4 * s, CompletedGPUSeconds: 8},
			{Job: plain, Submitted: 0, QuorumAt: 3 * s, MaxBound: 1, Nodes: map[string]int{"n0": 1}, CompletedGPUSeconds: 2},
			{Job: never, Submitted: 2 * s, MaxBound: 1, Nodes: map[string]int{"n1": 1}},
		},
		// From 0 to 5s jobs wait and 4 GPUs are held, 2 of them useful;
		// from 5s nothing waits (not true of the jobs above, but the
		// samples are what counts) and all 8 are held.
		Samples: []sim.Sample{
			{At: 0, GPUUsed: 4, UsefulGPU: 2, StrandedGPU: 2, FragGPU: 1, JobsWaiting: 1, QueueUsed: map[string]int64{"a": 4}, QueueWaitingGPU: map[string]int64{"b": 8},
				WaitCauses: map[string]int{metrics.WaitNoDomain: 3, metrics.WaitRoomHeld: 1}, HeldBy: map[string]int{"Unschedulable: x": 1}},
			{At: 5 * s, GPUUsed: 8, UsefulGPU: 8, QueueUsed: map[string]int64{"a": 4, "b": 4}},
		},
	}
	got := TraceRun{Scheduler: "x", Speed: 10, Result: r}.Summary()
	if got.Started != 2 || got.Jobs != 3 {
		t.Errorf("started %d of %d, want 2 of 3", got.Started, got.Jobs)
	}
	if got.Alloc != 0.75 || got.AllocWaiting != 0.5 || got.UsefulWaiting != 0.25 || got.FragWaiting != 0.125 {
		t.Errorf("allocation %v / %v, useful %v, fragmentation %v; want 0.75 / 0.5, 0.25, 0.125", got.Alloc, got.AllocWaiting, got.UsefulWaiting, got.FragWaiting)
	}
	if got.WaitingSeconds != 50 {
		t.Errorf("waiting %v trace seconds, want 50", got.WaitingSeconds)
	}
	// Waits in trace seconds: 40 (to its restart), 30, and 80 for the job
	// that never started.
	if got.WaitP50 != 40 || got.WaitP95 != 80 {
		t.Errorf("waits %v: p50 %v p95 %v, want 40 and 80", got.Waits, got.WaitP50, got.WaitP95)
	}
	if got.Goodput != 100 || got.LostGPUSeconds != 30 || got.Restarted != 1 || got.Evicted != 2 {
		t.Errorf("goodput %v, lost %v GPU·s, %d restarted, %d evicted; want 100, 30, 1, 2", got.Goodput, got.LostGPUSeconds, got.Restarted, got.Evicted)
	}
	if got.Split != 1 || got.Partial != 1 {
		t.Errorf("split %d partial %d, want 1 and 1", got.Split, got.Partial)
	}
	if got.StrandedPeak != 2 || got.StrandedMean != 1 {
		t.Errorf("stranded mean %v peak %d, want 1 and 2", got.StrandedMean, got.StrandedPeak)
	}
	// 3 jobs waited for a domain, 1 with room, the whole time jobs waited.
	if got.WaitCauses[metrics.WaitNoDomain] != 0.75 || got.WaitCauses[metrics.WaitRoomHeld] != 0.25 || got.WaitCauses[metrics.WaitNoRoom] != 0 {
		t.Errorf("wait causes %v, want no domain 0.75, room held 0.25", got.WaitCauses)
	}
	if want := []WordShare{{"Unschedulable: x", 1}}; !reflect.DeepEqual(got.HeldBy, want) {
		t.Errorf("room held by %v, want %v", got.HeldBy, want)
	}
	// While jobs waited, a held 4 of 8 and deserved 4 (b asked 8: equal
	// weights split the 8 GPUs 4/4).
	if len(got.Queues) != 2 || got.Queues[0].Share != 0.5 || got.Queues[0].Deserved != 0.5 || got.Queues[1].Share != 0 || got.Queues[1].Deserved != 0.5 {
		t.Errorf("queues %+v", got.Queues)
	}
}

// TestUsefulSettled: only the time when a job has waited SettleSeconds or
// more counts for the settled useful allocation.
func TestUsefulSettled(t *testing.T) {
	const s = time.Second
	r := &sim.Result{Scenario: &scenario.Scenario{Name: "t"}, GPUs: 8, Elapsed: 10 * s, SubmitLag: 2 * s,
		Samples: []sim.Sample{
			// At 10x: a job waiting 10 trace seconds, then 70.
			{At: 0, UsefulGPU: 2, JobsWaiting: 1, LongestWait: 1 * s},
			{At: 5 * s, UsefulGPU: 6, JobsWaiting: 1, LongestWait: 7 * s},
		},
	}
	got := TraceRun{Scheduler: "x", Speed: 10, Result: r}.Summary()
	if got.UsefulWaiting != 0.5 || got.UsefulSettled != 0.75 || got.SettledSeconds != 50 {
		t.Errorf("useful while waiting %v, settled %v over %v s; want 0.5, 0.75 over 50 s", got.UsefulWaiting, got.UsefulSettled, got.SettledSeconds)
	}
	// The replay's own lags, in trace seconds.
	if got.SubmitLag != 20 || got.SampleGap != 50 {
		t.Errorf("submission lag %v s, sample gap %v s; want 20 and 50", got.SubmitLag, got.SampleGap)
	}
}

// TestSummarySubGroups: the summary counts jobs with a split sub-group, and
// the report's row about them shows only when a replay had sub-groups.
func TestSummarySubGroups(t *testing.T) {
	tp := scenario.Job{Name: "tp", Replicas: 4, MinMember: 4, GPUs: 1, Annotations: map[string]string{
		phalanxv1alpha1.SubGroupSizeAnnotation: "2", phalanxv1alpha1.SubGroupTopologyRequiredAnnotation: "nvlink-clique"}, Ranks: true}
	r := &sim.Result{Scenario: &scenario.Scenario{Name: "t", Jobs: []scenario.Job{tp}}, GPUs: 8, Elapsed: 1,
		Jobs: []*sim.JobResult{{Job: tp, MaxBound: 4, QuorumAt: 1, MaxSplitSubGroups: 1}}}
	got := TraceRun{Scheduler: "x", Speed: 1, Result: r}.Summary()
	if got.SubGroupJobs != 1 || got.SplitSubGroupJobs != 1 {
		t.Errorf("sub-group jobs %d, split %d; want 1 and 1", got.SubGroupJobs, got.SplitSubGroupJobs)
	}
	var text bytes.Buffer
	WriteTraceText(&text, []TraceRun{{Scheduler: "x", Speed: 1, Result: r}})
	if !strings.Contains(text.String(), "jobs with split sub-groups") {
		t.Errorf("report lacks the sub-group row:\n%s", text.String())
	}
	for _, row := range summaryRows([]TraceSummary{{}}) {
		if strings.Contains(row.label, "sub-groups") {
			t.Errorf("a replay without sub-groups has the row %q", row.label)
		}
	}
}
