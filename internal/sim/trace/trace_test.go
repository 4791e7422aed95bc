package trace

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadTraceFiles(t *testing.T) {
	dir := t.TempDir()
	nodes := writeFile(t, dir, "nodes.csv", "name,cpu_milli,memory_mib,gpus,spine,leaf\n# a comment\nn0,8000,32768,4,s0,l0\nn1,8000,32768,4,s0,l1\n")
	jobs := writeFile(t, dir, "jobs.csv", "name,arrival_s,duration_s,pods,cpu_milli,gpus,memory_mib,min_member,queue,topology\n"+
		"a,0,60,2,1000,2,1024,2,team-a,leaf\n"+
		"b,30.5,120,1,500,0,512\n")
	tr, err := ReadTraceFiles(nodes, jobs, "")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(tr.Levels, ",") != "spine,leaf" || len(tr.Nodes) != 2 || tr.Nodes[1].Domains[1] != "l1" {
		t.Fatalf("nodes: %+v levels %v", tr.Nodes, tr.Levels)
	}
	if len(tr.Jobs) != 2 || tr.Jobs[0].MinMember != 2 || tr.Jobs[0].Topology != "leaf" || tr.Jobs[1].Arrival != 30.5 || tr.Jobs[1].Queue != "" {
		t.Fatalf("jobs: %+v", tr.Jobs)
	}
	sc, err := tr.Scenario("t", 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Nodes[0].NodeName(0) != "n0" || sc.Nodes[1].Labels[NetworkLabelPrefix+"leaf"] != "l1" {
		t.Errorf("scenario nodes: %+v", sc.Nodes)
	}
	a := sc.Jobs[0]
	if a.Duration.Duration != 6*time.Second || a.Annotations[phalanxv1alpha1.TopologyRequiredAnnotation] != "leaf" || a.Queue != "team-a" {
		t.Errorf("scenario job a: %+v", a)
	}
	if sc.Jobs[1].Arrival.Duration != 3050*time.Millisecond {
		t.Errorf("job b arrives at %v, want 3.05s", sc.Jobs[1].Arrival.Duration)
	}
	if len(sc.Queues) != 1 || sc.Queues[0].Name != "team-a" || sc.Queues[0].Weight != 1 {
		t.Errorf("implicit queues: %+v", sc.Queues)
	}
}

func TestReadTraceFilesErrors(t *testing.T) {
	nodesOK := "name,cpu_milli,memory_mib,gpus,leaf\nn0,8000,32768,4,l0\n"
	jobsHead := "name,arrival_s,duration_s,pods,cpu_milli,gpus,memory_mib,min_member,queue,topology\n"
	cases := []struct {
		name, nodes, jobs, queues, want string
	}{
		{"bad node header", "name,cpu,memory_mib,gpus\nn0,1,1,1\n", jobsHead, "", `column 2 must be "cpu_milli"`},
		{"negative gpus", "name,cpu_milli,memory_mib,gpus\nn0,1,1,-1\n", jobsHead, "", "gpus"},
		{"host is not a column", "name,cpu_milli,memory_mib,gpus,host\nn0,1,1,1,h\n", jobsHead, "", "host"},
		{"min_member above pods", nodesOK, jobsHead + "a,0,1,2,1,1,1,3\n", "", "min_member 3 > pods 2"},
		{"unknown level", nodesOK, jobsHead + "a,0,1,2,1,1,1,2,,rack\n", "", `topology "rack"`},
		{"topology without a gang", nodesOK, jobsHead + "a,0,1,2,1,1,1,,,leaf\n", "", "needs a gang"},
		{"unknown queue", nodesOK, jobsHead + "a,0,1,1,1,1,1,,team-z\n", "name,weight\nteam-a,1\n", `queue "team-z"`},
		{"duplicate job", nodesOK, jobsHead + "a,0,1,1,1,1,1\na,0,1,1,1,1,1\n", "", "distinct"},
		{"short row", nodesOK, jobsHead + "a,0,1,1\n", "", "want at least 7"},
	}
	for _, c := range cases {
		dir := t.TempDir()
		queues := ""
		if c.queues != "" {
			queues = writeFile(t, dir, "queues.csv", c.queues)
		}
		_, err := ReadTraceFiles(writeFile(t, dir, "nodes.csv", c.nodes), writeFile(t, dir, "jobs.csv", c.jobs), queues)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to mention %q", c.name, err, c.want)
		}
	}
}

func TestGenerate(t *testing.T) {
	sh, err := OpenbShapes()
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultGenOptions
	o.Jobs = 300
	a, err := Generate(sh, o)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Generate(sh, o)
	var bufA, bufB bytes.Buffer
	for _, j := range a.Jobs {
		bufA.WriteString(j.Name + ftoa(j.Arrival) + ftoa(j.Duration) + itoa(j.GPUs) + j.Topology + j.Queue + ";")
	}
	for _, j := range b.Jobs {
		bufB.WriteString(j.Name + ftoa(j.Arrival) + ftoa(j.Duration) + itoa(j.GPUs) + j.Topology + j.Queue + ";")
	}
	if bufA.String() != bufB.String() {
		t.Error("the same seed made two different traces")
	}
	if len(a.Nodes) != o.Nodes || len(a.Jobs) != o.Jobs {
		t.Fatalf("%d nodes, %d jobs", len(a.Nodes), len(a.Jobs))
	}
	if load := a.OfferedLoad(); load < 1.2 || load > 1.3 {
		t.Errorf("offered load %.3f, want about %.2f", load, o.Load)
	}
	gangs, topo := 0, 0
	for _, j := range a.Jobs {
		if !a.fits(j) {
			t.Errorf("%s does not fit the empty cluster", j.Name)
		}
		if float64(j.GPUs)*float64(j.Pods) > o.MaxJobShare*float64(a.GPUs()) {
			t.Errorf("%s asks %d GPUs, more than %.0f%% of %d", j.Name, j.GPUs*int64(j.Pods), o.MaxJobShare*100, a.GPUs())
		}
		if j.MinMember > 0 {
			gangs++
		}
		if j.Topology != "" {
			topo++
		}
	}
	if gangs < o.Jobs/4 || topo == 0 {
		t.Errorf("%d gangs (%d with a topology requirement) of %d jobs; the mix asks for about 40%% gangs", gangs, topo, o.Jobs)
	}
	// The files read back as the same trace.
	dir := t.TempDir()
	if err := a.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	back, err := ReadTraceFiles(filepath.Join(dir, "nodes.csv"), filepath.Join(dir, "jobs.csv"), filepath.Join(dir, "queues.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Jobs) != len(a.Jobs) || back.Jobs[7] != a.Jobs[7] || len(back.Queues) != 2 {
		t.Errorf("read back %d jobs (%+v vs %+v), %d queues", len(back.Jobs), back.Jobs[7], a.Jobs[7], len(back.Queues))
	}
}

func TestLargestRemainder(t *testing.T) {
	got := largestRemainder([]CountedShape{{Count: 549}, {Count: 387}, {Count: 107}, {Count: 39}}, 10)
	sum := 0
	for _, n := range got {
		sum += n
	}
	if sum != 10 || got[0] != 5 || got[1] != 4 || got[2] != 1 {
		t.Errorf("largestRemainder = %v", got)
	}
}

// TestGenerateIBClusters: -ib-leaves puts an ib-cluster level above the
// leaves (widest first), every node in the IB cluster of its leaf;
// -ib-share makes gangs require one; -node-gpus keeps 8-GPU nodes only.
func TestGenerateIBClusters(t *testing.T) {
	sh, err := OpenbShapes()
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultGenOptions
	o.Nodes, o.Jobs, o.LeafSize, o.IBLeaves, o.NodeGPUs = 64, 120, 8, 4, 8
	o.TopologyShare, o.IBShare = 1.0/3, 1.0/3
	o.Queues = []TraceQueue{{Name: "default", Weight: 1}}
	tr, err := Generate(sh, o)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(tr.Levels) != "[ib-cluster leaf]" {
		t.Fatalf("levels %v, want [ib-cluster leaf]", tr.Levels)
	}
	ibs, leaves := map[string]bool{}, map[string]string{}
	for _, n := range tr.Nodes {
		if n.GPUs != 8 {
			t.Errorf("%s has %d GPUs, want 8", n.Name, n.GPUs)
		}
		if ib, seen := leaves[n.Domains[1]]; seen && ib != n.Domains[0] {
			t.Errorf("leaf %s in IB clusters %s and %s", n.Domains[1], ib, n.Domains[0])
		}
		leaves[n.Domains[1]] = n.Domains[0]
		ibs[n.Domains[0]] = true
	}
	if len(leaves) != 8 || len(ibs) != 2 {
		t.Errorf("%d leaves in %d IB clusters, want 8 in 2", len(leaves), len(ibs))
	}
	byLevel := map[string]int{}
	gangs := 0
	for _, j := range tr.Jobs {
		if j.MinMember > 0 {
			gangs++
			byLevel[j.Topology]++
		}
		if !tr.fits(j) {
			t.Errorf("%s does not fit the empty cluster", j.Name)
		}
	}
	for _, l := range []string{"leaf", IBLevel, ""} {
		if n := byLevel[l]; n < gangs/6 || n > gangs/2 {
			t.Errorf("%d of %d gangs require %q, want about a third (%v)", n, gangs, l, byLevel)
		}
	}
	if _, err := Generate(sh, GenOptions{Seed: 1, Load: 1, Nodes: 4, Jobs: 2, LeafSize: 2, NodeGPUs: 3, GangMix: DefaultGangMix}); err == nil || !strings.Contains(err.Error(), "3 GPUs") {
		t.Errorf("an unknown node GPU count: %v", err)
	}
}
