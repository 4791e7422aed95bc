package trace

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

const (
	cliqueNodesCSV = "name,cpu_milli,memory_mib,gpus,spine,nvlink-clique\nn0,8000,32768,4,s0,c0\nn1,8000,32768,4,s0,c1\n"
	subJobsHead    = "name,arrival_s,duration_s,pods,cpu_milli,gpus,memory_mib,min_member,queue,topology,subgroup_size,subgroup_topology\n"
)

// TestReadTraceSubGroups: the optional sub-group columns are read, become
// phalanx's sub-group annotations and rank labels in the replay, and a
// trace without them reads as before.
func TestReadTraceSubGroups(t *testing.T) {
	dir := t.TempDir()
	nodes := writeFile(t, dir, "nodes.csv", cliqueNodesCSV)
	jobs := writeFile(t, dir, "jobs.csv", subJobsHead+
		"tp,0,60,8,1000,1,1024,8,,spine,4,nvlink-clique\n"+
		"flat,1,60,2,1000,1,1024,2,,nvlink-clique\n"+
		"plain,2,60,1,1000,1,1024\n")
	tr, err := ReadTraceFiles(nodes, jobs, "")
	if err != nil {
		t.Fatal(err)
	}
	tp, flat := tr.Jobs[0], tr.Jobs[1]
	if tp.SubGroupSize != 4 || tp.SubGroupTopology != "nvlink-clique" || tp.Topology != "spine" || flat.SubGroupSize != 0 || flat.SubGroupTopology != "" {
		t.Fatalf("jobs: %+v", tr.Jobs)
	}
	sc, err := tr.Scenario("t", 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	a := sc.Jobs[0].Annotations
	if a[phalanxv1alpha1.SubGroupSizeAnnotation] != "4" || a[phalanxv1alpha1.SubGroupTopologyRequiredAnnotation] != "nvlink-clique" ||
		a[phalanxv1alpha1.TopologyRequiredAnnotation] != "spine" || !sc.Jobs[0].Ranks {
		t.Errorf("tp job: %+v", sc.Jobs[0])
	}
	if size, level := sc.Jobs[0].SubGroups(); size != 4 || level != "nvlink-clique" {
		t.Errorf("subGroups() = %d, %q", size, level)
	}
	if sc.Jobs[1].Ranks || len(sc.Jobs[1].Annotations) != 1 {
		t.Errorf("flat job: %+v", sc.Jobs[1])
	}
	// Written back with the sub-group columns, and read again the same.
	out := t.TempDir()
	if err := tr.WriteFiles(out); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(filepath.Join(out, "jobs.csv"))
	if !strings.HasPrefix(string(raw), subJobsHead) || !strings.Contains(string(raw), "tp,0,60,8,1000,1,1024,8,,spine,4,nvlink-clique\n") ||
		!strings.Contains(string(raw), "plain,2,60,1,1000,1,1024,,,,,\n") {
		t.Errorf("jobs.csv:\n%s", raw)
	}
	back, err := ReadTraceFiles(filepath.Join(out, "nodes.csv"), filepath.Join(out, "jobs.csv"), "")
	if err != nil || back.Jobs[0] != tp {
		t.Errorf("read back %+v (err %v), want %+v", back.Jobs[0], err, tp)
	}
	// A trace without sub-groups keeps the 10 columns.
	tr.Jobs = tr.Jobs[1:]
	if err := tr.WriteFiles(out); err != nil {
		t.Fatal(err)
	}
	raw, _ = os.ReadFile(filepath.Join(out, "jobs.csv"))
	if head, _, _ := strings.Cut(string(raw), "\n"); head != "name,arrival_s,duration_s,pods,cpu_milli,gpus,memory_mib,min_member,queue,topology" {
		t.Errorf("header without sub-groups: %s", head)
	}
}

func TestReadTraceSubGroupErrors(t *testing.T) {
	cases := []struct{ name, jobs, want string }{
		{"size does not divide", subJobsHead + "a,0,1,6,1,1,1,6,,spine,4,nvlink-clique\n", "does not divide min_member 6"},
		{"no level", subJobsHead + "a,0,1,8,1,1,1,8,,spine,4,\n", "needs a subgroup_topology"},
		{"level without size", subJobsHead + "a,0,1,8,1,1,1,8,,spine,,nvlink-clique\n", "needs a subgroup_size"},
		{"unknown level", subJobsHead + "a,0,1,8,1,1,1,8,,spine,4,rack\n", `subgroup_topology "rack" is not a column`},
		{"level not inside the gang's", subJobsHead + "a,0,1,8,1,1,1,8,,nvlink-clique,4,spine\n", `"spine" is not inside the gang's topology "nvlink-clique"`},
		{"same level as the gang's", subJobsHead + "a,0,1,8,1,1,1,8,,spine,4,spine\n", "is not inside"},
		{"no gang", subJobsHead + "a,0,1,8,1,1,1,,,,4,nvlink-clique\n", "need a gang"},
		{"bad size", subJobsHead + "a,0,1,8,1,1,1,8,,spine,x,nvlink-clique\n", "subgroup_size"},
		{"misnamed column", "name,arrival_s,duration_s,pods,cpu_milli,gpus,memory_mib,min_member,queue,topology,comment\na,0,1,1,1,1,1\n", `column 11 must be "subgroup_size"`},
	}
	for _, c := range cases {
		dir := t.TempDir()
		_, err := ReadTraceFiles(writeFile(t, dir, "nodes.csv", cliqueNodesCSV), writeFile(t, dir, "jobs.csv", c.jobs), "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to mention %q", c.name, err, c.want)
		}
	}
	// host is a level too: sub-groups inside one node.
	dir := t.TempDir()
	if _, err := ReadTraceFiles(writeFile(t, dir, "nodes.csv", cliqueNodesCSV), writeFile(t, dir, "jobs.csv", subJobsHead+"a,0,1,8,1,1,1,8,,nvlink-clique,4,host\n"), ""); err != nil {
		t.Errorf("host sub-groups: %v", err)
	}
}

// TestGenerateCliques: -cliques makes GB200-class nodes in cliques of 18
// under spines; about SubGroupShare of the multi-node gangs get sub-groups
// (spine / nvlink-clique, a size that divides the gang and holds a node's
// GPUs); other gangs with a requirement require one clique; every job fits;
// without Cliques the trace is the one the defaults always made.
func TestGenerateCliques(t *testing.T) {
	sh, err := OpenbShapes()
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultGenOptions
	o.Cliques, o.Jobs = 8, 2000
	tr, err := Generate(sh, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Nodes) != 8*CliqueNodes || strings.Join(tr.Levels, ",") != "spine,nvlink-clique" {
		t.Fatalf("%d nodes, levels %v", len(tr.Nodes), tr.Levels)
	}
	for i, n := range []TraceNode{tr.Nodes[0], tr.Nodes[17], tr.Nodes[18], tr.Nodes[71], tr.Nodes[72], tr.Nodes[143]} {
		want := [][2]string{{"spine-0", "clique-0"}, {"spine-0", "clique-0"}, {"spine-0", "clique-1"}, {"spine-0", "clique-3"}, {"spine-1", "clique-4"}, {"spine-1", "clique-7"}}[i]
		if n.GPUs != 4 || n.Domains[0] != want[0] || n.Domains[1] != want[1] {
			t.Errorf("node %s: %d GPUs in %v, want 4 in %v", n.Name, n.GPUs, n.Domains, want)
		}
	}
	multi, sub := 0, 0
	for _, j := range tr.Jobs {
		if !tr.fits(j) {
			t.Errorf("%s does not fit the empty cluster", j.Name)
		}
		if j.MinMember > 0 && j.GPUs*int64(j.MinMember) > 4 {
			multi++
		}
		if j.SubGroupSize == 0 {
			if j.Topology != "" && j.Topology != CliqueLevel {
				t.Errorf("%s requires %s, want %s", j.Name, j.Topology, CliqueLevel)
			}
			continue
		}
		sub++
		if j.Topology != SpineLevel || j.SubGroupTopology != CliqueLevel || j.MinMember%j.SubGroupSize != 0 ||
			int64(j.SubGroupSize)*j.GPUs < 4 || j.GPUs*int64(j.MinMember) <= 4 {
			t.Errorf("sub-group job %+v", j)
		}
	}
	if share := float64(sub) / float64(multi); multi < 100 || share < 0.12 || share > 0.28 {
		t.Errorf("%d of %d multi-node gangs have sub-groups (%.2f), want about %.2f", sub, multi, share, o.SubGroupShare)
	}
	if _, err := tr.Scenario("t", 100, 0); err != nil {
		t.Errorf("scenario: %v", err)
	}
	o.SubGroupShare = 0
	if none, err := Generate(sh, o); err != nil {
		t.Fatal(err)
	} else {
		for _, j := range none.Jobs {
			if j.SubGroupSize > 0 {
				t.Fatalf("sub-group share 0 made %+v", j)
			}
		}
	}
	// Defaults: 10 job columns, the trace make trace has always replayed
	// (seed 1: its first jobs).
	def, err := Generate(sh, DefaultGenOptions)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := def.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "jobs.csv"))
	if !bytes.HasPrefix(raw, []byte("name,arrival_s,duration_s,pods,cpu_milli,gpus,memory_mib,min_member,queue,topology\njob-0000,")) || len(def.Nodes) != 16 || def.Levels[0] != "leaf" {
		t.Errorf("default trace changed: %d nodes, levels %v, jobs.csv starts %q", len(def.Nodes), def.Levels, raw[:120])
	}
}

func TestSubGroupSize(t *testing.T) {
	for _, c := range []struct {
		members    int
		gpus, node int64
		want       int
	}{
		{8, 1, 4, 4}, {4, 2, 4, 2}, {8, 2, 4, 2}, {2, 4, 4, 2}, {4, 4, 4, 2}, {6, 3, 4, 2}, {3, 2, 4, 3}, {64, 1, 4, 4},
	} {
		if got := subGroupSize(c.members, c.gpus, c.node); got != c.want {
			t.Errorf("subGroupSize(%d, %d, %d) = %d, want %d", c.members, c.gpus, c.node, got, c.want)
		}
	}
}

// TestFitsSubGroups: a gang of sub-groups fits when enough cliques of one
// spine each take a whole sub-group.
func TestFitsSubGroups(t *testing.T) {
	tr := &Trace{Levels: []string{"spine", "nvlink-clique"}}
	for i := 0; i < 8; i++ {
		// Spine s0: cliques c0 (2 nodes), c1 (2 nodes); spine s1: c2, c3.
		tr.Nodes = append(tr.Nodes, TraceNode{Name: itoa(int64(i)), CPUMilli: 8000, MemoryMiB: 8192, GPUs: 4,
			Domains: []string{"s" + itoa(int64(i/4)), "c" + itoa(int64(i/2))}})
	}
	job := func(members, size int) TraceJob {
		return TraceJob{Name: "j", Pods: members, MinMember: members, CPUMilli: 100, GPUs: 1, MemoryMiB: 1, Topology: "spine", SubGroupSize: size, SubGroupTopology: "nvlink-clique"}
	}
	for _, c := range []struct {
		j    TraceJob
		want bool
	}{
		{job(16, 8), true},   // one sub-group of 8 per clique of spine s0
		{job(16, 16), false}, // a sub-group of 16 fits no clique of 8 GPUs
		{job(24, 8), false},  // three sub-groups of 8: a spine has two cliques
		{job(12, 6), true},   // one of 6 per clique (the 2 GPUs left over do not add up)
		{job(18, 6), false},
	} {
		if got := tr.fits(c.j); got != c.want {
			t.Errorf("fits(%d members in sub-groups of %d) = %v, want %v", c.j.MinMember, c.j.SubGroupSize, got, c.want)
		}
	}
}
