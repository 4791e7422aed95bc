package report

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/sim"
	"github.com/phalanx-sched/phalanx/internal/sim/scenario"
)

// syntheticResult is a finished run built by hand: two network levels, two
// queues holding their expected shares, a tainted and a NUMA node, and a
// gang that never started.
func syntheticResult() *sim.Result {
	share := func(v float64) *float64 { return &v }
	sc := &scenario.Scenario{
		Name:        "fair-share",
		Description: "Two teams share four GPU nodes.\n\nThe blocked gang fits in no ib-cluster.",
		Network: []phalanxv1alpha1.TopologyLevel{
			{Name: "ib-cluster", NodeLabel: "example.com/ib-cluster"},
			{Name: "rack", NodeLabel: "example.com/rack"},
		},
		Queues: []scenario.Queue{
			{Name: "team-a", QueueSpec: phalanxv1alpha1.QueueSpec{Weight: 3}, ExpectShare: share(0.75)},
			{Name: "team-b", QueueSpec: phalanxv1alpha1.QueueSpec{Weight: 1}, ExpectShare: share(0.25)},
		},
		ShareTolerance: 0.1,
	}
	node := func(name, ib, rack string) sim.NodeResult {
		return sim.NodeResult{Name: name, GPUs: 8, CPU: 64000, Labels: map[string]string{
			"example.com/ib-cluster": ib, "example.com/rack": rack, "kubernetes.io/hostname": name,
		}}
	}
	zoned, tainted := node("gpu-2", "ib-b", "rack-b1"), node("gpu-3", "ib-b", "rack-b1")
	zoned.Zones, tainted.Tainted = 2, true
	train := scenario.Job{Name: "train-a", Queue: "team-a", Replicas: 3, MinMember: 3, GPUs: 4, Expect: scenario.ExpectRun,
		Annotations: map[string]string{phalanxv1alpha1.TopologyRequiredAnnotation: "ib-cluster"}}
	infer := scenario.Job{Name: "infer-b", Queue: "team-b", Replicas: 1, GPUs: 4}
	blocked := scenario.Job{Name: "blocked-b", Queue: "team-b", Replicas: 4, MinMember: 4, GPUs: 8, Expect: scenario.ExpectPending}
	r := &sim.Result{
		Scenario: sc,
		Elapsed:  8 * time.Second,
		GPUs:     24,
		CPU:      192000,
		Nodes:    []sim.NodeResult{node("gpu-0", "ib-a", "rack-a1"), node("gpu-1", "ib-a", "rack-a2"), zoned, tainted},
		Jobs: []*sim.JobResult{
			{Job: train, Submitted: 0, QuorumAt: time.Second, FinishedAt: 6 * time.Second, MaxBound: 3, Completed: 3,
				Nodes: map[string]int{"gpu-0": 2, "gpu-1": 1}},
			{Job: infer, Submitted: 500 * time.Millisecond, QuorumAt: time.Second, MaxBound: 1, Evicted: 1,
				Nodes: map[string]int{"gpu-2": 1}},
			{Job: blocked, Submitted: time.Second, Reason: "Unschedulable: <b>no</b> ib-cluster has 4 free nodes"},
		},
	}
	for at := time.Duration(0); at <= r.Elapsed; at += 500 * time.Millisecond {
		// team-a has a backlog until train-a finishes; blocked-b waits throughout.
		s := sim.Sample{At: at, QueueUsed: map[string]int64{}, QueueWaiting: map[string]int{"team-b": 4}}
		if at < 6*time.Second {
			s.QueueWaiting["team-a"] = 1
		}
		if at >= time.Second {
			s.QueueUsed["team-b"] = 4
			if at < 6*time.Second {
				s.QueueUsed["team-a"] = 12
			}
		}
		s.GPUUsed = s.QueueUsed["team-a"] + s.QueueUsed["team-b"]
		s.CPUUsed = s.GPUUsed * 4000
		r.Samples = append(r.Samples, s)
	}
	return r
}

func TestWriteHTML(t *testing.T) {
	ok := syntheticResult()
	bad := syntheticResult()
	bad.Scenario.Name = "partial-gang"
	bad.Jobs[2].MaxBound = 2 // a gang left partially bound fails the scenario
	var buf bytes.Buffer
	if err := WriteHTML(&buf, []*sim.Result{ok, bad}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()

	if n := strings.Count(out, "<html"); n != 1 || !strings.HasSuffix(strings.TrimSpace(out), "</html>") {
		t.Errorf("want one HTML document, found %d <html> tags", n)
	}
	for _, want := range []string{
		"<svg", "phalanx-sim report", `href="#s0"`, `id="s1"`,
		"default/train-a", "default/infer-b", "default/blocked-b",
		"ib-cluster ib-a", "ib-cluster ib-b", "rack rack-a1", "rack rack-b1",
		"team-a", "team-b", "75% ± 10%",
		"All expectations met", "Expectations NOT met", "PARTIAL 2", "PASS", "FAIL",
		"Unschedulable: &lt;b&gt;no&lt;/b&gt;", "never started", "tainted", "2 NUMA zones",
		"GPU: average", "Not started, and why",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	for _, unwanted := range []string{"<b>no</b>", "ZgotmplZ", "<script", "http://", "https://"} {
		if strings.Contains(strings.ReplaceAll(out, `xmlns="http://www.w3.org/2000/svg"`, ""), unwanted) {
			t.Errorf("output contains %q", unwanted)
		}
	}

	// Every chart is well-formed XML on its own.
	svgs := 0
	for rest := out; ; {
		start := strings.Index(rest, "<svg")
		if start < 0 {
			break
		}
		end := strings.Index(rest[start:], "</svg>") + start + len("</svg>")
		if err := wellFormed(rest[start:end]); err != nil {
			t.Errorf("svg %d: %v", svgs, err)
		}
		rest = rest[end:]
		svgs++
	}
	// Per scenario: timeline, utilization, queue shares and topology.
	if svgs != 8 {
		t.Errorf("want 8 charts, found %d", svgs)
	}
}

func wellFormed(doc string) error {
	d := xml.NewDecoder(strings.NewReader(doc))
	for {
		if _, err := d.Token(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}
