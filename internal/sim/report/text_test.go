package report

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/sim"
	"github.com/phalanx-sched/phalanx/internal/sim/scenario"
)

// meanPeak is the mean and the largest of the samples' used/capacity.
func meanPeak(samples []sim.Sample, used func(sim.Sample) int64, capacity int64) (mean, peak float64) {
	for _, s := range samples {
		v := float64(used(s)) / float64(capacity)
		mean += v / float64(len(samples))
		peak = max(peak, v)
	}
	return mean, peak
}

// TestWriteTextSections: the header's counts, a row per job, why the
// unstarted did not start, queue shares with their expectations and a
// sparkline each, NUMA, utilization from the samples, and the verdict.
func TestWriteTextSections(t *testing.T) {
	r := syntheticResult()
	var b bytes.Buffer
	WriteText(&b, r)
	out := b.String()
	gpuMean, gpuPeak := meanPeak(r.Samples, func(s sim.Sample) int64 { return s.GPUUsed }, r.GPUs)
	cpuMean, cpuPeak := meanPeak(r.Samples, func(s sim.Sample) int64 { return s.CPUUsed }, r.CPU)
	for _, want := range []string{
		fmt.Sprintf("phalanx-sim: fair-share — %d nodes, %d GPUs, %d jobs, 8.0s\n", len(r.Nodes), r.GPUs, len(r.Jobs)),
		"Two teams share four GPU nodes.\n\nThe blocked gang fits in no ib-cluster.\n",
		"Not started, and why:\n  default/blocked-b: Unschedulable: <b>no</b> ib-cluster has 4 free nodes\n",
		"Queue shares while every queue had work waiting (GPUs):",
		", expected 75% ± 10\n", ", expected 25% ± 10\n",
		fmt.Sprintf("on %d NUMA nodes, every running pod fit its zones", 1),
		fmt.Sprintf("GPU utilization: average %.0f%%, peak %.0f%%\n", gpuMean*100, gpuPeak*100),
		fmt.Sprintf("CPU utilization: average %.0f%%, peak %.0f%%\n", cpuMean*100, cpuPeak*100),
		"All expectations met",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	for _, j := range r.Jobs {
		row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(j.Job.Key()) + `\s+` + regexp.QuoteMeta(orDash(j.Job.Queue)) + `\s+` + fmt.Sprint(j.Job.Replicas) + `\s`)
		if !row.MatchString(out) {
			t.Errorf("no row for %s", j.Job.Key())
		}
	}
	for _, q := range r.Scenario.Queues {
		line := regexp.MustCompile(`(?m)^  ` + fmt.Sprintf("%-12s ", q.Name) + `([▁▂▃▄▅▆▇█ ]+)$`).FindStringSubmatch(out)
		if line == nil || len([]rune(line[1])) != sparkWidth {
			t.Errorf("queue %s: no sparkline of %d marks (%q)", q.Name, sparkWidth, line)
		}
	}
}

// TestWriteTextVariants: sections come and go with what the run had.
func TestWriteTextVariants(t *testing.T) {
	text := func(edit func(r *sim.Result)) string {
		r := syntheticResult()
		edit(r)
		var b bytes.Buffer
		WriteText(&b, r)
		return b.String()
	}
	for _, tc := range []struct {
		name           string
		edit           func(r *sim.Result)
		want, unwanted []string
	}{
		{"no queues", func(r *sim.Result) { r.Scenario.Queues = nil }, nil, []string{"Queue shares"}},
		{"CPU only", func(r *sim.Result) { r.GPUs = 0 }, []string{"CPU utilization"}, []string{"GPU utilization"}},
		{"no NUMA nodes", func(r *sim.Result) { r.Nodes[2].Zones = 0 }, nil, []string{"NUMA"}},
		{"NUMA violations", func(r *sim.Result) { r.NUMAViolations = []string{"pod x on gpu-2 at 3s"} },
			[]string{"NUMA: pods the kubelet would reject:\n  pod x on gpu-2 at 3s\n", "Expectations NOT met:\n", "  - NUMA: the kubelet would reject pod x on gpu-2 at 3s\n"}, []string{"All expectations met"}},
		{"all started", func(r *sim.Result) { r.Jobs = r.Jobs[:2] }, nil, []string{"Not started"}},
		{"no description", func(r *sim.Result) { r.Scenario.Description = "" }, []string{"4 nodes, 24 GPUs, 3 jobs, 8.0s\n\nJOB"}, nil},
	} {
		out := text(tc.edit)
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: text lacks %q:\n%s", tc.name, w, out)
			}
		}
		for _, u := range tc.unwanted {
			if strings.Contains(out, u) {
				t.Errorf("%s: text has %q", tc.name, u)
			}
		}
	}
}

func TestCells(t *testing.T) {
	job := scenario.Job{Name: "g", Replicas: 4, MinMember: 4}
	s := time.Second
	for _, tc := range []struct {
		name string
		j    sim.JobResult
		want jobCells
	}{
		{"waiting gang", sim.JobResult{Job: job}, jobCells{Min: "4", Started: "no", Whole: "-", Wait: "-", Done: "0/4"}},
		{"partial gang", sim.JobResult{Job: job, MaxBound: 3}, jobCells{Min: "4", Started: "no", Whole: "PARTIAL 3", Wait: "-", Done: "0/4"}},
		{"whole gang", sim.JobResult{Job: job, Submitted: s, QuorumAt: 3*s + 1234*time.Microsecond, Completed: 4},
			jobCells{Min: "4", Started: "yes", Whole: "yes", Wait: "2s", Done: "4/4"}},
		{"slow binds", sim.JobResult{Job: job, QuorumAt: s, Spread: 1500 * time.Millisecond, Evicted: 2},
			jobCells{Min: "4", Started: "yes", Whole: "spread 1.5s", Wait: "1s", Done: "0/4 (2 evicted)"}},
		{"plain pods", sim.JobResult{Job: scenario.Job{Name: "p", Replicas: 2}, QuorumAt: 250 * time.Millisecond, Completed: 1},
			jobCells{Min: "-", Started: "yes", Whole: "-", Wait: "250ms", Done: "1/2"}},
		{"restarted", sim.JobResult{Job: job, QuorumAt: s, RestartedAt: 5 * s},
			jobCells{Min: "4", Started: "yes", Whole: "yes", Wait: "5s", Done: "0/4"}},
	} {
		if got := cells(&tc.j); got != tc.want {
			t.Errorf("%s: cells %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if why(&sim.JobResult{}) != "no condition written" || why(&sim.JobResult{Reason: "r"}) != "r" {
		t.Error("why")
	}
}

func TestNodeList(t *testing.T) {
	for _, tc := range []struct {
		nodes map[string]int
		want  string
	}{
		{nil, "-"},
		{map[string]int{"b": 1, "a": 2}, "a,b"},
		{map[string]int{"d": 1, "c": 1, "b": 1, "a": 1}, "a,b,c,d"},
		{map[string]int{"e": 1, "d": 1, "c": 1, "b": 1, "a": 1}, "a,b,c… (5 nodes)"},
	} {
		if got := nodeList(tc.nodes); got != tc.want {
			t.Errorf("nodeList(%v) = %q, want %q", tc.nodes, got, tc.want)
		}
	}
}

// TestDomain: the domain of the required level, else the widest level's
// domains; unlabelled nodes say so.
func TestDomain(t *testing.T) {
	r := syntheticResult()
	r.Nodes = append(r.Nodes, sim.NodeResult{Name: "bare", Labels: map[string]string{}})
	required := func(level string) map[string]string {
		return map[string]string{phalanxv1alpha1.TopologyRequiredAnnotation: level}
	}
	for _, tc := range []struct {
		name  string
		job   scenario.Job
		nodes map[string]int
		want  string
	}{
		{"not run", scenario.Job{}, nil, ""},
		{"widest level", scenario.Job{}, map[string]int{"gpu-0": 1, "gpu-2": 1}, "ib-a+ib-b"},
		{"required rack", scenario.Job{Annotations: required("rack")}, map[string]int{"gpu-0": 1, "gpu-1": 1}, "rack-a1+rack-a2"},
		{"required host", scenario.Job{Annotations: required("host")}, map[string]int{"gpu-3": 2}, "gpu-3"},
		{"unlabelled", scenario.Job{}, map[string]int{"bare": 1, "gpu-0": 1}, unlabelled + "+ib-a"},
		{"unknown level", scenario.Job{Annotations: required("row")}, map[string]int{"gpu-0": 1}, ""},
	} {
		if got := Domain(r, &sim.JobResult{Job: tc.job, Nodes: tc.nodes}); got != tc.want {
			t.Errorf("%s: Domain = %q, want %q", tc.name, got, tc.want)
		}
	}
	r.Scenario.Network = nil
	if got := Domain(r, &sim.JobResult{Nodes: map[string]int{"gpu-0": 1}}); got != "" {
		t.Errorf("without a network: %q", got)
	}
}

func TestUtilization(t *testing.T) {
	if avg, peak := utilization(&sim.Result{}, func(sim.Sample) float64 { return 1 }); avg != 0 || peak != 0 {
		t.Errorf("no samples: %v %v", avg, peak)
	}
	r := &sim.Result{Samples: []sim.Sample{{GPUUsed: 1}, {GPUUsed: 4}, {GPUUsed: 1}}}
	avg, peak := utilization(r, func(s sim.Sample) float64 { return float64(s.GPUUsed) })
	if avg != 2 || peak != 4 {
		t.Errorf("utilization %v / %v, want 2 / 4", avg, peak)
	}
}

// TestQueueSharesWithoutExpectations: with no expected share, a sample
// counts only when every scenario queue has work waiting.
func TestQueueSharesWithoutExpectations(t *testing.T) {
	r := checkResult()
	for i := range r.Scenario.Queues {
		r.Scenario.Queues[i].ExpectShare = nil
	}
	r.Samples = []sim.Sample{sample(0, 9, 3, 1, 0), sample(time.Second, 1, 3, 1, 1), sample(2*time.Second, 0, 0, 1, 1)}
	got := QueueShares(r)
	// Only the second sample: both wait and something is in use.
	if got[0].Samples != 1 || got[0].Share != 0.25 || got[1].Share != 0.75 {
		t.Errorf("shares %+v, want a 1/4 and b 3/4 over 1 sample", got)
	}
	if _, ok := share(sim.Sample{}, "a"); ok {
		t.Error("a share of nothing in use")
	}
	r.Scenario.Queues = nil
	if QueueShares(r) != nil {
		t.Error("shares without queues")
	}
}

// TestSummaryLine: the page's one-line summary of the cluster.
func TestSummaryLine(t *testing.T) {
	r := syntheticResult()
	got := summary(r)
	for _, want := range []string{
		"4 nodes (1 tainted, not counted in GPUs and cores)", "24 GPUs", "192 CPU cores", "3 jobs", "8.0 s elapsed",
		"network levels: ib-cluster › rack › host", "queues: team-a, team-b",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary %q lacks %q", got, want)
		}
	}
	r.Scenario.Queues, r.Scenario.Network, r.CPU = nil, nil, 1500
	r.Nodes[3].Tainted = false
	got = summary(r)
	for _, want := range []string{"4 nodes ·", "1.5 CPU cores", "network levels: host", "queues: default only"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary %q lacks %q", got, want)
		}
	}
	if shareUnit(r) != "GPUs" || shareUnit(&sim.Result{}) != "CPU" {
		t.Error("shareUnit")
	}
}
