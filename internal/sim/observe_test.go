package sim

import (
	"reflect"
	"testing"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/sim/metrics"
	"github.com/phalanx-sched/phalanx/internal/sim/scenario"
)

// TestIdleByDomainSample: a sample sums the untainted nodes' free GPUs per
// domain of each level above the host; without levels it keeps nothing.
func TestIdleByDomainSample(t *testing.T) {
	sc := &scenario.Scenario{Network: []phalanxv1alpha1.TopologyLevel{{Name: "leaf", NodeLabel: "leaf"}}}
	d := &driver{sc: sc, res: &Result{Nodes: []NodeResult{
		{Name: "a", Labels: map[string]string{"leaf": "l0"}},
		{Name: "t", Tainted: true, Labels: map[string]string{"leaf": "l0"}},
		{Name: "b", Labels: map[string]string{"leaf": "l0"}},
		{Name: "c", Labels: map[string]string{"leaf": "l1"}},
	}}}
	got := d.idleByDomain(d.untainted(), []metrics.Room{{GPUs: 3}, {GPUs: 1}, {GPUs: 0}})
	if want := map[string]int{"leaf=l0": 4, "leaf=l1": 0}; !reflect.DeepEqual(got, want) {
		t.Errorf("idle %v, want %v", got, want)
	}
	d.sc = &scenario.Scenario{}
	if got := d.idleByDomain(nil, nil); got != nil {
		t.Errorf("idle without levels %v, want nil", got)
	}
}

// TestSplitSubGroups: a sub-group whose running pods span two cliques
// counts.
func TestSplitSubGroups(t *testing.T) {
	clique := map[string]string{"a": "c0", "b": "c0", "c": "c1"}
	domain := func(n string) string { return clique[n] }
	pods := []rankedPod{{0, "a"}, {1, "b"}, {2, "a"}, {3, "c"}, {4, "c"}, {5, "c"}}
	if got := splitSubGroups(pods, 2, domain); got != 1 {
		t.Errorf("sub-groups of 2: %d split, want 1 (ranks 2-3)", got)
	}
	if got := splitSubGroups(pods, 3, domain); got != 0 {
		t.Errorf("sub-groups of 3: %d split, want none (ranks 0-2 in c0, 3-5 in c1)", got)
	}
}
