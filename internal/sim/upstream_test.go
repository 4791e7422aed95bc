package sim

import (
	"slices"
	"testing"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/sim/trace"
	"os"
	"path/filepath"
)

// TestUpstreamSubGroups: a replayed trace job with sub-groups is, for
// upstream-gang, a CompositePodGroup over one PodGroup per sub-group, and
// its pods carry their rank.
func TestUpstreamSubGroups(t *testing.T) {
	dir := t.TempDir()
	nodes := writeFile(t, dir, "nodes.csv", "name,cpu_milli,memory_mib,gpus,spine,nvlink-clique\nn0,8000,32768,4,s0,c0\nn1,8000,32768,4,s0,c1\n")
	jobs := writeFile(t, dir, "jobs.csv", "name,arrival_s,duration_s,pods,cpu_milli,gpus,memory_mib,min_member,queue,topology,subgroup_size,subgroup_topology\n"+
		"tp,0,60,8,1000,1,1024,8,,spine,4,nvlink-clique\n"+
		"flat,1,60,2,1000,1,1024,2,,nvlink-clique\n")
	tr, err := trace.ReadTraceFiles(nodes, jobs, "")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := tr.Scenario("t", 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	// For upstream-gang, tp is a CompositePodGroup of 2 PodGroups of 4
	// (ranks 0-3, 4-7); flat is one PodGroup.
	d := &driver{sc: sc}
	if got := []string{d.upstreamGang(sc.Jobs[0]).GroupOf(3), d.upstreamGang(sc.Jobs[0]).GroupOf(4), d.upstreamGang(sc.Jobs[1]).GroupOf(1)}; !slices.Equal(got, []string{"tp-tp-0", "tp-tp-1", "flat"}) {
		t.Errorf("upstream PodGroups of tp ranks 3 and 4, flat rank 1: %v", got)
	}
	if spec := podSpec(sc.Jobs[0], 5); spec.Labels[phalanxv1alpha1.RankLabel] != "5" {
		t.Errorf("pod 5 of tp labels %v, want rank 5", spec.Labels)
	}
	if spec := podSpec(sc.Jobs[1], 1); spec.Labels[phalanxv1alpha1.RankLabel] != "" {
		t.Errorf("pod of a job without sub-groups has a rank label: %v", spec.Labels)
	}
}

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
