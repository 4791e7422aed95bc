package replay

import (
	"context"
	"math"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/phalanx-sched/phalanx/internal/bench"
	"github.com/phalanx-sched/phalanx/internal/sim/trace"
)

// TestTraceScheduler: the phalanx variants run in process (nil spec); stock
// and upstream-gang run the given binary under their own profile name, the
// gang one with the Workload API gates (CompositePodGroup too) on both the
// scheduler and the API server.
func TestTraceScheduler(t *testing.T) {
	for _, name := range []string{TracePhalanx, TracePhalanxNoFGD, TracePhalanxConsolidate} {
		if spec, err := TraceScheduler(name, "/bin/ks"); spec != nil || err != nil {
			t.Errorf("%s: spec %+v, error %v; want in process", name, spec, err)
		}
	}
	stock, err := TraceScheduler(TraceStock, "/bin/ks")
	if err != nil {
		t.Fatal(err)
	}
	if stock.Binary != "/bin/ks" || stock.SchedulerName != bench.Stock.SchedulerName() || stock.UpstreamGang || len(stock.Args) != 0 ||
		!strings.Contains(string(stock.Config), "schedulerName: "+bench.Stock.SchedulerName()) {
		t.Errorf("stock %+v", stock)
	}
	gang, err := TraceScheduler(TraceUpstreamGang, "/bin/ks")
	if err != nil {
		t.Fatal(err)
	}
	if !gang.UpstreamGang || gang.SchedulerName != bench.UpstreamGang.SchedulerName() || !strings.Contains(string(gang.Config), "schedulerName: "+bench.UpstreamGang.SchedulerName()) {
		t.Errorf("upstream-gang %+v", gang)
	}
	for _, gate := range append(append([]string(nil), bench.UpstreamGates...), bench.CompositeGate) {
		if len(gang.Args) != 1 || !strings.Contains(gang.Args[0], gate+"=true") || !strings.Contains(strings.Join(gang.APIServerFlags, " "), gate+"=true") {
			t.Errorf("gate %s not on: args %v, API server %v", gate, gang.Args, gang.APIServerFlags)
		}
	}
	if _, err := TraceScheduler("volcano", ""); err == nil || !strings.Contains(err.Error(), `no scheduler "volcano"`) {
		t.Errorf("unknown scheduler: %v", err)
	}
}

// TestReplayTraceRefusesEarly: an unknown scheduler or an unusable speed
// fails before any cluster starts.
func TestReplayTraceRefusesEarly(t *testing.T) {
	tr := &trace.Trace{Nodes: []trace.TraceNode{{Name: "n", CPUMilli: 1000, MemoryMiB: 1024, GPUs: 1}},
		Jobs: []trace.TraceJob{{Name: "j", Pods: 1, GPUs: 1, Duration: 1}}}
	if runs, err := ReplayTrace(context.Background(), tr, []string{"nope"}, ReplayOptions{Speed: 1}); err == nil || len(runs) != 0 {
		t.Errorf("unknown scheduler: runs %v, error %v", runs, err)
	}
	if _, err := ReplayTrace(context.Background(), tr, []string{TracePhalanx}, ReplayOptions{Speed: 0}); err == nil || !strings.Contains(err.Error(), "speed") {
		t.Errorf("speed 0: %v", err)
	}
}

// timersConfig is a profile with each timer once, spread over two plugins'
// args, and a half-life that is off.
const timersConfig = `profiles:
- schedulerName: p
  pluginConfig:
  - name: Coscheduling
    args:
      reservationAfterSeconds: 30
      fragmentationHalfLifeSeconds: 3600
      consolidationAfterSeconds: 0
      consolidationMinRuntimeSeconds: 600
      other: 7
  - name: CapacityQueue
    args:
      minRuntimeSeconds: 15
      usageHalfLifeSeconds: 0
`

func pluginArgs(t *testing.T, config []byte) map[string]float64 {
	t.Helper()
	var doc struct {
		Profiles []struct {
			PluginConfig []struct {
				Args map[string]float64 `json:"args"`
			} `json:"pluginConfig"`
		} `json:"profiles"`
	}
	if err := yaml.Unmarshal(config, &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, p := range doc.Profiles {
		for _, c := range p.PluginConfig {
			for k, v := range c.Args {
				out[k] = v
			}
		}
	}
	return out
}

// TestScaleTimers: each timer divided by speed and rounded, never below
// its floor; a timer that is 0 stays off; other settings are kept.
func TestScaleTimers(t *testing.T) {
	before := pluginArgs(t, []byte(timersConfig))
	for _, speed := range []float64{1, 4, 50, 1000} {
		out, err := ScaleTimers([]byte(timersConfig), speed)
		if err != nil {
			t.Fatalf("speed %v: %v", speed, err)
		}
		after := pluginArgs(t, out)
		for key, v := range before {
			want := v
			if floor, ok := scaledTimers[key]; ok && v != 0 {
				want = math.Max(floor, math.Round(v/speed))
			}
			if after[key] != want {
				t.Errorf("speed %v: %s = %v, want %v", speed, key, after[key], want)
			}
		}
	}
	missing := strings.Replace(timersConfig, "      minRuntimeSeconds: 15\n", "", 1)
	if _, err := ScaleTimers([]byte(missing), 2); err == nil || !strings.Contains(err.Error(), "changed 2 settings, want 3") {
		t.Errorf("a missing timer: %v", err)
	}
	if _, err := ScaleTimers([]byte("profiles: ["), 2); err == nil {
		t.Error("bad YAML scaled")
	}
}

func TestConfigSwitches(t *testing.T) {
	off, err := WithoutFragmentation([]byte(timersConfig))
	if err != nil {
		t.Fatal(err)
	}
	if a := pluginArgs(t, off); a["fragmentationHalfLifeSeconds"] != 0 || a["reservationAfterSeconds"] != 30 {
		t.Errorf("without fragmentation: %v", a)
	}
	on, err := WithConsolidation([]byte(timersConfig), 42)
	if err != nil {
		t.Fatal(err)
	}
	if a := pluginArgs(t, on); a["consolidationAfterSeconds"] != 42 || a["consolidationMinRuntimeSeconds"] != 600 {
		t.Errorf("with consolidation: %v", a)
	}
	bare := "profiles:\n- pluginConfig:\n  - args:\n      x: 1\n"
	if _, err := WithoutFragmentation([]byte(bare)); err == nil {
		t.Error("a profile without the half-life lost it")
	}
	if _, err := WithConsolidation([]byte(bare), 1); err == nil {
		t.Error("consolidation went on in a profile without Coscheduling's args")
	}
	// The canonical profile scales at any speed.
	if _, err := ScaledSchedulerConfig(3); err != nil {
		t.Errorf("canonical profile: %v", err)
	}
}
