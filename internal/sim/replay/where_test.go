package replay

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/sim"
	"github.com/phalanx-sched/phalanx/internal/sim/metrics"
	"github.com/phalanx-sched/phalanx/internal/sim/scenario"
)

// TestWhereIdleAndLongestWaits: the report says where the idle GPUs were
// while jobs waited (per domain of each level) and what the longest waits
// waited for (their own time by cause, and the word that held them).
func TestWhereIdleAndLongestWaits(t *testing.T) {
	const s = time.Second
	leafJob := scenario.Job{Name: "leafy", Replicas: 4, MinMember: 4, GPUs: 8, Annotations: map[string]string{phalanxv1alpha1.TopologyRequiredAnnotation: "leaf"}}
	small := scenario.Job{Name: "small", Replicas: 1, GPUs: 1}
	late := scenario.Job{Name: "late", Replicas: 1, GPUs: 1, Arrival: scenario.Duration{Duration: 8 * s}}
	sc := &scenario.Scenario{Name: "t", Jobs: []scenario.Job{leafJob, small, late},
		Network: []phalanxv1alpha1.TopologyLevel{{Name: "spine", NodeLabel: "spine"}, {Name: "leaf", NodeLabel: "leaf"}}}
	node := func(name, spine, leaf string, tainted bool) sim.NodeResult {
		return sim.NodeResult{Name: name, GPUs: 8, Tainted: tainted, Labels: map[string]string{"spine": spine, "leaf": leaf}}
	}
	r := &sim.Result{Scenario: sc, GPUs: 24, Elapsed: 10 * s,
		Nodes: []sim.NodeResult{node("n0", "s0", "l0", false), node("n1", "s0", "l1", false), node("n2", "s0", "l1", true)},
		Jobs: []*sim.JobResult{
			{Job: leafJob, Submitted: 0, WaitedBy: map[string]time.Duration{metrics.WaitNoDomain: 3 * s, metrics.WaitRoomHeld: s},
				HeldBy: map[string]time.Duration{"Unschedulable: b": s / 2, "Unschedulable: a": s / 2}},
			{Job: small, Submitted: 0, QuorumAt: 2 * s, WaitedBy: map[string]time.Duration{metrics.WaitRoomHeld: 2 * s},
				HeldBy: map[string]time.Duration{metrics.WordNotTried: 2 * s}},
			{Job: late, Submitted: 8 * s, QuorumAt: 8 * s},
		},
		// Jobs wait for the first 4 s: l0 has 2 free then 6, l1 4 then 0;
		// afterwards nothing waits and all is free (not counted).
		Samples: []sim.Sample{
			{At: 0, JobsWaiting: 2, IdleGPU: map[string]int{"spine=s0": 6, "leaf=l0": 2, "leaf=l1": 4}},
			{At: 2 * s, JobsWaiting: 1, IdleGPU: map[string]int{"spine=s0": 6, "leaf=l0": 6, "leaf=l1": 0}},
			{At: 4 * s, IdleGPU: map[string]int{"spine=s0": 16, "leaf=l0": 8, "leaf=l1": 8}},
		},
	}
	got := TraceRun{Scheduler: "x", Speed: 10, Result: r}.Summary()
	// The tainted node's GPUs are not the domain's.
	wantIdle := []DomainIdle{{"spine", "s0", 16, 6}, {"leaf", "l0", 8, 4}, {"leaf", "l1", 8, 2}}
	if !reflect.DeepEqual(got.IdleByDomain, wantIdle) {
		t.Errorf("idle by domain %+v, want %+v", got.IdleByDomain, wantIdle)
	}
	// Longest first, in trace seconds; the leaf gang never started and
	// waits to the end; a tie between words goes to the first by name.
	wantWaits := []JobWait{
		{Key: "default/leafy", Pods: 4, GPUsPerPod: 8, Level: "leaf", Wait: 100, Causes: map[string]float64{metrics.WaitNoDomain: 0.75, metrics.WaitRoomHeld: 0.25}, HeldBy: "Unschedulable: a"},
		{Key: "default/small", Pods: 1, GPUsPerPod: 1, Wait: 20, Causes: map[string]float64{metrics.WaitRoomHeld: 1}, HeldBy: metrics.WordNotTried, Started: true},
		{Key: "default/late", Pods: 1, GPUsPerPod: 1, Wait: 0, Started: true},
	}
	if !reflect.DeepEqual(got.LongestWaits, wantWaits) {
		t.Errorf("longest waits\n%+v\nwant\n%+v", got.LongestWaits, wantWaits)
	}
	var text bytes.Buffer
	WriteTraceText(&text, []TraceRun{{Scheduler: "x", Speed: 10, Result: r}})
	for _, want := range []string{
		"x: where the idle GPUs were while jobs waited",
		"spine        s0 6.0/16\n",
		"leaf         l0 4.0/8, l1 2.0/8\n",
		"  default/leafy  4 × 8        leaf      100, never started  0% / 75% / 25%                   Unschedulable: a\n",
		"  default/late   1 × 1        -         0                   0% / 0% / 0%                     -\n",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
}

// TestWriteIdleWraps: a level's domains go domainsPerLine to a line, the
// level named on its first.
func TestWriteIdleWraps(t *testing.T) {
	var idle []DomainIdle
	for i := range domainsPerLine + 1 {
		idle = append(idle, DomainIdle{Level: "leaf", Domain: fmt.Sprintf("l%d", i), GPUs: 8, Idle: 1})
	}
	idle = append(idle, DomainIdle{Level: "ib", Domain: "i0", GPUs: 72, Idle: 9})
	var b bytes.Buffer
	writeIdle(&b, idle)
	want := "  leaf         l0 1.0/8, l1 1.0/8, l2 1.0/8, l3 1.0/8, l4 1.0/8, l5 1.0/8, l6 1.0/8, l7 1.0/8\n" +
		"               l8 1.0/8\n" +
		"  ib           i0 9.0/72\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
