package trace

import (
	"math"
	"strings"
	"testing"
	"time"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

func smallTrace() *Trace {
	return &Trace{
		Levels: []string{"spine", "leaf"},
		Nodes: []TraceNode{
			{Name: "n0", CPUMilli: 16000, MemoryMiB: 65536, GPUs: 8, Domains: []string{"s0", "l0"}},
			{Name: "n1", CPUMilli: 16000, MemoryMiB: 65536, GPUs: 8, Domains: []string{"s0", ""}},
			{Name: "cpu", CPUMilli: 4000, MemoryMiB: 8192, Domains: []string{"", ""}},
		},
		Queues: []TraceQueue{{Name: "team-a", Weight: 2}},
		Jobs: []TraceJob{
			{Name: "a", Arrival: 0, Duration: 100, Pods: 2, GPUs: 4, CPUMilli: 1000, MemoryMiB: 1024, MinMember: 2, Topology: "leaf", Queue: "team-a"},
			{Name: "b", Arrival: 50, Duration: 30, Pods: 1, GPUs: 2, CPUMilli: 500, MemoryMiB: 512, Queue: "team-z"},
			{Name: "c", Arrival: 200, Duration: 0.0001, Pods: 4, GPUs: 1, CPUMilli: 100, MemoryMiB: 64, MinMember: 4, Queue: "team-c",
				Topology: "spine", SubGroupSize: 2, SubGroupTopology: "leaf"},
		},
	}
}

// TestTraceTotals: horizon, GPUs and offered load from the trace's rows.
func TestTraceTotals(t *testing.T) {
	tr := smallTrace()
	var horizon, work, last float64
	var gpus int64
	for _, j := range tr.Jobs {
		horizon = math.Max(horizon, j.Arrival+j.Duration)
		work += float64(j.GPUs*int64(j.Pods)) * j.Duration
		last = math.Max(last, j.Arrival)
	}
	for _, n := range tr.Nodes {
		gpus += n.GPUs
	}
	if tr.Horizon() != horizon || tr.GPUs() != gpus {
		t.Errorf("horizon %v, GPUs %d; want %v, %d", tr.Horizon(), tr.GPUs(), horizon, gpus)
	}
	if got, want := tr.OfferedLoad(), work/(float64(gpus)*last); math.Abs(got-want) > 1e-12 {
		t.Errorf("offered load %v, want %v", got, want)
	}
	// Everything arriving at once, or no GPUs: no load to speak of.
	if (&Trace{Nodes: tr.Nodes, Jobs: []TraceJob{{Pods: 1, GPUs: 1, Duration: 5}}}).OfferedLoad() != 0 {
		t.Error("a trace whose jobs all arrive at 0 has a load")
	}
	if (&Trace{Nodes: []TraceNode{{Name: "c"}}, Jobs: tr.Jobs}).OfferedLoad() != 0 {
		t.Error("a cluster without GPUs has a GPU load")
	}
}

// TestScenarioFromTrace: times divided by speed (at least a millisecond),
// nodes under their own names with labels where they have a domain, the
// queue CSV's queues then the ones only jobs name, sorted, and the topology
// and sub-group annotations.
func TestScenarioFromTrace(t *testing.T) {
	tr := smallTrace()
	const speed = 10
	sc, err := tr.Scenario("small", speed, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Network) != 2 || sc.Network[1].NodeLabel != NetworkLabelPrefix+"leaf" {
		t.Errorf("network %+v", sc.Network)
	}
	if n := sc.Nodes[1]; n.NodeName(0) != "n1" || n.CPU != "16000m" || n.Memory != "65536Mi" || n.GPUs != 8 || len(n.Labels) != 1 || n.Labels[NetworkLabelPrefix+"spine"] != "s0" {
		t.Errorf("node n1 %+v", n)
	}
	if sc.Nodes[2].Labels != nil {
		t.Errorf("a node without domains has labels %v", sc.Nodes[2].Labels)
	}
	var queues []string
	for _, q := range sc.Queues {
		queues = append(queues, q.Name)
	}
	if strings.Join(queues, ",") != "team-a,team-c,team-z" || sc.Queues[0].Weight != 2 || sc.Queues[2].Weight != 1 {
		t.Errorf("queues %+v", sc.Queues)
	}
	for i, j := range tr.Jobs {
		job := sc.Jobs[i]
		wantArrival := time.Duration(j.Arrival / speed * float64(time.Second))
		if job.Arrival.Duration != wantArrival || job.Replicas != j.Pods || int(job.MinMember) != j.MinMember || job.GPUs != j.GPUs {
			t.Errorf("job %s: %+v", j.Name, job)
		}
	}
	if d := sc.Jobs[2].Duration.Duration; d != time.Millisecond {
		t.Errorf("a 0.1 ms run lasts %v, want the 1 ms floor", d)
	}
	if a := sc.Jobs[0].Annotations; a[phalanxv1alpha1.TopologyRequiredAnnotation] != "leaf" || sc.Jobs[0].Ranks {
		t.Errorf("job a annotations %v, ranks %v", a, sc.Jobs[0].Ranks)
	}
	if sc.Jobs[1].Annotations != nil {
		t.Errorf("a plain job has annotations %v", sc.Jobs[1].Annotations)
	}
	c := sc.Jobs[2]
	if c.Annotations[phalanxv1alpha1.SubGroupSizeAnnotation] != "2" || c.Annotations[phalanxv1alpha1.SubGroupTopologyRequiredAnnotation] != "leaf" ||
		c.Annotations[phalanxv1alpha1.TopologyRequiredAnnotation] != "spine" || !c.Ranks {
		t.Errorf("job c %+v", c)
	}
	// Timeout: twice the compressed horizon plus a minute, unless given.
	horizon := time.Duration(tr.Horizon() / speed * float64(time.Second))
	if sc.Timeout.Duration != 2*horizon+time.Minute {
		t.Errorf("timeout %v, want %v", sc.Timeout.Duration, 2*horizon+time.Minute)
	}
	if sc, err := tr.Scenario("small", speed, 5*time.Minute); err != nil || sc.Timeout.Duration != 5*time.Minute {
		t.Errorf("given timeout: %v %v", sc, err)
	}
	if !strings.Contains(sc.Description, "3 nodes, 16 GPUs, 3 jobs") {
		t.Errorf("description %q", sc.Description)
	}
}

func TestScenarioErrors(t *testing.T) {
	tr := smallTrace()
	for _, speed := range []float64{0, -1} {
		if _, err := tr.Scenario("x", speed, 0); err == nil || !strings.Contains(err.Error(), "speed must be > 0") {
			t.Errorf("speed %v: %v", speed, err)
		}
	}
	// The scenario's own checks apply: a trace named nothing fails them.
	if _, err := tr.Scenario("", 1, 0); err == nil || !strings.Contains(err.Error(), "name is required") {
		t.Errorf("unnamed: %v", err)
	}
}
