package metrics

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"

	k8smetrics "k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"

	"github.com/phalanx-sched/phalanx/internal/gang"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// TestRegisterOnce: registering twice (two profiles, two plugins) neither
// panics nor duplicates a series, and every metric is in the registry.
func TestRegisterOnce(t *testing.T) {
	Register()
	Register()
	PlanOutcomes.WithLabelValues("planned").Inc()
	PlanDuration.Observe(0.01)
	GangWait.Observe(1)
	GangsPending.WithLabelValues("Unschedulable").Set(1)
	Evictions.WithLabelValues("Preempted").Inc()
	Reclaims.WithLabelValues("team-a").Inc()
	NodesWithoutTopology.Set(0)
	PodsWoken.WithLabelValues(WokenQuorum).Inc()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, f := range families {
		found[f.GetName()] = true
	}
	for _, name := range []string{"phalanx_gang_plan_outcomes_total", "phalanx_gang_plan_duration_seconds",
		"phalanx_gang_wait_seconds", "phalanx_gang_pending", "phalanx_gang_evictions_total", "phalanx_queue_reclaimed_gangs_total",
		"phalanx_numa_nodes_without_topology", "phalanx_gang_pods_woken_total"} {
		if !found[name] {
			t.Errorf("%s not registered", name)
		}
	}
}

// TestRecordQueues: the queue gauges take the snapshot's values and the
// series of a queue that is gone are removed, all four gauges alike.
func TestRecordQueues(t *testing.T) {
	Register()
	l := func(cpu int64) map[string]resources.List {
		return map[string]resources.List{"team-a": {"cpu": cpu}, "team-b": {"cpu": 2 * cpu}}
	}
	RecordQueues(l(1000), l(1500), l(500), l(250), nil)
	for _, c := range []struct {
		name string
		want float64
	}{{"allocated", 1000}, {"deserved", 1500}, {"recent_usage", 500}, {"pending", 250}} {
		got, err := testutil.GetGaugeMetricValue(gaugeOf(c.name).WithLabelValues("team-a", "cpu"))
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("%s team-a cpu = %v, want %v", c.name, got, c.want)
		}
	}
	RecordQueues(nil, nil, nil, nil, []string{"team-b"})
	for _, name := range []string{"allocated", "deserved", "recent_usage", "pending"} {
		if n := seriesOf(t, "phalanx_queue_"+name, "team-b"); n != 0 {
			t.Errorf("phalanx_queue_%s keeps %d series of a deleted queue", name, n)
		}
		if n := seriesOf(t, "phalanx_queue_"+name, "team-a"); n != 1 {
			t.Errorf("phalanx_queue_%s has %d series of team-a, want 1 (only the gone queue goes)", name, n)
		}
	}
}

func gaugeOf(name string) *k8smetrics.GaugeVec {
	return map[string]*k8smetrics.GaugeVec{"allocated": queueAllocated, "deserved": queueDeserved, "recent_usage": queueRecent, "pending": queuePending}[name]
}

func seriesOf(t *testing.T, family, queue string) int {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "queue" && lp.GetValue() == queue {
					n++
				}
			}
		}
	}
	return n
}

// TestWokenReasonsDocumented: every reason PodsWoken is labelled with (the
// Woken* constants here and the manager's gang.Wake* ones) is named in the
// metric's help and in docs/metrics.md, so an operator can read each rate.
func TestWokenReasonsDocumented(t *testing.T) {
	reasons := constants(t, ".", "Woken")
	reasons = append(reasons, gang.WakeDisplaced, gang.WakeRetryAfter)
	if len(reasons) < 10 {
		t.Fatalf("found %d reasons, the parse is wrong", len(reasons))
	}
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	help := PodsWoken.CounterOpts.Help
	for _, r := range reasons {
		if !strings.Contains(help, " "+r) {
			t.Errorf("reason %q is not in phalanx_gang_pods_woken_total's help", r)
		}
		if !strings.Contains(string(doc), "`"+r+"`") {
			t.Errorf("reason %q is not in docs/metrics.md", r)
		}
	}
}

// constants returns the string values of the package's constants whose
// names start with prefix.
func constants(t *testing.T, dir, prefix string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, dir+"/metrics.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, sp := range gd.Specs {
			vs := sp.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if strings.HasPrefix(n.Name, prefix) && i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok {
						out = append(out, strings.Trim(lit.Value, `"`))
					}
				}
			}
		}
	}
	return out
}
