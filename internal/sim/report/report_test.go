package report

import (
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/sim"
	"github.com/phalanx-sched/phalanx/internal/sim/scenario"
)

// checkResult is a run of two IB clusters and two queues to check against.
func checkResult() *sim.Result {
	sc := &scenario.Scenario{
		Name:           "check",
		Network:        []phalanxv1alpha1.TopologyLevel{{Name: "ib-cluster", NodeLabel: "ib"}},
		Queues:         []scenario.Queue{{Name: "a", ExpectShare: ptr.To(1.0 / 3)}, {Name: "b", ExpectShare: ptr.To(2.0 / 3)}},
		ShareTolerance: 0.1,
	}
	return &sim.Result{
		Scenario: sc,
		Elapsed:  10 * time.Second,
		Nodes: []sim.NodeResult{
			{Name: "n0", Labels: map[string]string{"ib": "ib-a"}},
			{Name: "n1", Labels: map[string]string{"ib": "ib-a"}},
			{Name: "n2", Labels: map[string]string{"ib": "ib-b"}},
		},
	}
}

func sample(at time.Duration, a, b int64, waitA, waitB int) sim.Sample {
	return sim.Sample{At: at, QueueUsed: map[string]int64{"a": a, "b": b}, QueueWaiting: map[string]int{"a": waitA, "b": waitB}}
}

func TestCheck(t *testing.T) {
	required := map[string]string{phalanxv1alpha1.TopologyRequiredAnnotation: "ib-cluster"}
	tests := []struct {
		name    string
		jobs    []*sim.JobResult
		samples []sim.Sample
		want    []string // substrings of the errors, in order; none: passes
	}{
		{
			name:    "fair shares, gang in one domain",
			jobs:    []*sim.JobResult{{Job: scenario.Job{Name: "g", MinMember: 2, Replicas: 2, Annotations: required, Expect: scenario.ExpectRun}, QuorumAt: time.Second, MaxBound: 2, Nodes: map[string]int{"n0": 1, "n1": 1}}},
			samples: []sim.Sample{sample(time.Second, 4, 8, 1, 1), sample(2*time.Second, 3, 9, 1, 1), sample(3*time.Second, 12, 0, 1, 0)},
		},
		{
			name: "partial gang and a split domain",
			jobs: []*sim.JobResult{
				{Job: scenario.Job{Name: "partial", MinMember: 4, Replicas: 4}, MaxBound: 2, Nodes: map[string]int{"n0": 2}},
				{Job: scenario.Job{Name: "split", MinMember: 2, Replicas: 2, Annotations: required}, QuorumAt: time.Second, MaxBound: 2, Nodes: map[string]int{"n0": 1, "n2": 1}},
			},
			samples: []sim.Sample{sample(time.Second, 4, 8, 1, 1)},
			want:    []string{"default/partial: 2 members bound but minMember 4 never reached", "default/split: required one ib-cluster, ran in 2: ib-a, ib-b"},
		},
		{
			name: "expectations",
			jobs: []*sim.JobResult{
				{Job: scenario.Job{Name: "should-run", Replicas: 1, Expect: scenario.ExpectRun}, Reason: "Unschedulable: full"},
				{Job: scenario.Job{Name: "should-wait", Replicas: 1, Expect: scenario.ExpectPending}, QuorumAt: time.Second, MaxBound: 1},
			},
			samples: []sim.Sample{sample(time.Second, 4, 8, 1, 1)},
			want:    []string{"should-run: expected to run, did not (Unschedulable: full)", "should-wait: expected to stay pending, 1 members were bound"},
		},
		{
			name:    "unfair shares",
			samples: []sim.Sample{sample(time.Second, 6, 6, 1, 1)},
			want:    []string{"queue a: share 0.50, expected 0.33", "queue b: share 0.50, expected 0.67"},
		},
		{
			name:    "queues never waited together",
			samples: []sim.Sample{sample(time.Second, 6, 6, 1, 0)},
			want:    []string{"queue a: no moment with every queue waiting", "queue b: no moment"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := checkResult()
			r.Jobs, r.Samples = tt.jobs, tt.samples
			errs := Check(r)
			if len(errs) != len(tt.want) {
				t.Fatalf("errors %v, want %d", errs, len(tt.want))
			}
			for i, e := range errs {
				if !strings.Contains(e.Error(), tt.want[i]) {
					t.Errorf("error %d: %q, want it to contain %q", i, e, tt.want[i])
				}
			}
		})
	}
}

func TestQueueSharesCountOnlyContendedSamples(t *testing.T) {
	r := checkResult()
	// b alone at first (a has nothing waiting), then 1:2 while both wait.
	r.Samples = []sim.Sample{sample(0, 0, 12, 0, 4), sample(time.Second, 4, 8, 2, 4), sample(2*time.Second, 4, 8, 2, 4)}
	shares := QueueShares(r)
	if shares[0].Samples != 2 || shares[0].Share != 1.0/3 || shares[1].Share != 2.0/3 {
		t.Fatalf("shares %+v, want a 1/3 and b 2/3 over 2 samples", shares)
	}
}

func TestShareSparkline(t *testing.T) {
	r := checkResult()
	for i := 0; i < 100; i++ {
		at := time.Duration(i) * 100 * time.Millisecond
		if i < 50 {
			r.Samples = append(r.Samples, sample(at, 0, 12, 1, 1)) // a has nothing
		} else {
			r.Samples = append(r.Samples, sample(at, 12, 0, 1, 1)) // a has all
		}
	}
	line := []rune(shareSparkline(r, "a"))
	if len(line) != sparkWidth {
		t.Fatalf("width %d, want %d", len(line), sparkWidth)
	}
	if line[0] != '▁' || line[sparkWidth/2-1] != '▁' || line[sparkWidth/2] != '█' || line[sparkWidth-1] != '█' {
		t.Fatalf("sparkline %q: want none in the first half and all in the second", string(line))
	}
}
