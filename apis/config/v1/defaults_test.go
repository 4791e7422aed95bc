package v1_test

import (
	"k8s.io/utils/ptr"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	kubeschedulerscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"

	"github.com/phalanx-sched/phalanx/apis/config"
	_ "github.com/phalanx-sched/phalanx/apis/config/scheme"
	configv1 "github.com/phalanx-sched/phalanx/apis/config/v1"
	"github.com/phalanx-sched/phalanx/manifests"
)

// decode runs data through kube-scheduler's own codecs (with the phalanx args
// registered by the blank import above), exactly as the scheduler reads --config.
func decode(t *testing.T, data []byte) *schedconfig.KubeSchedulerConfiguration {
	t.Helper()
	obj, gvk, err := kubeschedulerscheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	cfg, ok := obj.(*schedconfig.KubeSchedulerConfiguration)
	if !ok {
		t.Fatalf("decoded %v into %T, want *config.KubeSchedulerConfiguration", gvk, obj)
	}
	return cfg
}

func profile(t *testing.T, cfg *schedconfig.KubeSchedulerConfiguration, name string) *schedconfig.KubeSchedulerProfile {
	t.Helper()
	for i := range cfg.Profiles {
		if cfg.Profiles[i].SchedulerName == name {
			return &cfg.Profiles[i]
		}
	}
	t.Fatalf("no profile %q in %d profiles", name, len(cfg.Profiles))
	return nil
}

// pluginArgs returns the args of the named plugin, failing if there is no entry
// or more than one (a duplicate would make the scheduler refuse the config).
func pluginArgs(t *testing.T, prof *schedconfig.KubeSchedulerProfile, name string) runtime.Object {
	t.Helper()
	var found []runtime.Object
	for _, pc := range prof.PluginConfig {
		if pc.Name == name {
			found = append(found, pc.Args)
		}
	}
	if len(found) != 1 {
		t.Fatalf("profile %q has %d pluginConfig entries for %s, want 1", prof.SchedulerName, len(found), name)
	}
	return found[0]
}

// wantArgs is the internal args every phalanx plugin should end up with.
type wantArgs struct {
	coscheduling    *config.CoschedulingArgs
	capacityQueue   *config.CapacityQueueArgs
	networkTopology *config.NetworkTopologyArgs
	numaTopology    *config.NUMATopologyArgs
}

var defaultArgs = wantArgs{
	coscheduling:    &config.CoschedulingArgs{DefaultScheduleTimeoutSeconds: 60, ReservationAfterSeconds: 30, FragmentationHalfLifeSeconds: 3600, ScheduledEvents: "PerGang", ConsolidationMinRuntimeSeconds: 600, ConsolidationsPerHour: 2, ConsolidationEvictionGraceSeconds: 300},
	capacityQueue:   &config.CapacityQueueArgs{DefaultQueue: "default", EnableReclaim: true, MinRuntimeSeconds: 15},
	networkTopology: &config.NetworkTopologyArgs{TopologyName: "default", UseHyperNodes: true},
	numaTopology:    &config.NUMATopologyArgs{ScoringStrategy: "LeastNUMANodes", NodesWithoutTopology: "AdmitAll"},
}

func checkArgs(t *testing.T, prof *schedconfig.KubeSchedulerProfile, want wantArgs) {
	t.Helper()
	cases := []struct {
		plugin string
		want   runtime.Object
	}{
		{"Coscheduling", want.coscheduling},
		{"CapacityQueue", want.capacityQueue},
		{"NetworkTopology", want.networkTopology},
		{"NUMATopology", want.numaTopology},
	}
	for _, c := range cases {
		got := pluginArgs(t, prof, c.plugin)
		if reflect.TypeOf(got) != reflect.TypeOf(c.want) {
			t.Errorf("%s args: got %T, want %T", c.plugin, got, c.want)
			continue
		}
		// TypeMeta is not part of the contract (internal objects carry none).
		gotCopy := got.DeepCopyObject()
		gotCopy.GetObjectKind().SetGroupVersionKind(c.want.GetObjectKind().GroupVersionKind())
		if !reflect.DeepEqual(gotCopy, c.want) {
			t.Errorf("%s args: got %+v, want %+v", c.plugin, gotCopy, c.want)
		}
	}
}

const header = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: phalanx-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: CapacityQueue
      - name: NetworkTopology
      - name: NUMATopology
      - name: Coscheduling
`

func TestDefaultsThroughSchedulerScheme(t *testing.T) {
	tests := []struct {
		name         string
		pluginConfig string
		want         wantArgs
	}{
		{
			name: "no pluginConfig: every enabled plugin gets defaulted args",
			want: defaultArgs,
		},
		{
			name: "empty args objects are defaulted field by field",
			pluginConfig: `  pluginConfig:
  - name: Coscheduling
    args: {}
  - name: CapacityQueue
    args: {}
  - name: NetworkTopology
    args: {}
  - name: NUMATopology
    args: {}
`,
			want: defaultArgs,
		},
		{
			name: "explicit values are kept, including false booleans",
			pluginConfig: `  pluginConfig:
  - name: Coscheduling
    args:
      defaultScheduleTimeoutSeconds: 300
      reservationAfterSeconds: 120
      fragmentationHalfLifeSeconds: 0
      scheduledEvents: PerMember
      consolidationAfterSeconds: 120
      consolidationMinRuntimeSeconds: 0
      consolidationsPerHour: 6
  - name: CapacityQueue
    args:
      defaultQueue: batch
      enableReclaim: false
      minRuntimeSeconds: 0
      usageHalfLifeSeconds: 3600
  - name: NetworkTopology
    args:
      topologyName: fabric
      useHyperNodes: false
  - name: NUMATopology
    args:
      scoringStrategy: MostAllocated
      nodesWithoutTopology: RejectAlignedPods
`,
			want: wantArgs{
				coscheduling:    &config.CoschedulingArgs{DefaultScheduleTimeoutSeconds: 300, ReservationAfterSeconds: 120, FragmentationHalfLifeSeconds: 0, ScheduledEvents: "PerMember", ConsolidationAfterSeconds: 120, ConsolidationsPerHour: 6, ConsolidationEvictionGraceSeconds: 300},
				capacityQueue:   &config.CapacityQueueArgs{DefaultQueue: "batch", EnableReclaim: false, UsageHalfLifeSeconds: 3600},
				networkTopology: &config.NetworkTopologyArgs{TopologyName: "fabric", UseHyperNodes: false},
				numaTopology:    &config.NUMATopologyArgs{ScoringStrategy: "MostAllocated", NodesWithoutTopology: "RejectAlignedPods"},
			},
		},
		{
			name: "partially set args: set fields kept, unset fields defaulted",
			pluginConfig: `  pluginConfig:
  - name: CapacityQueue
    args:
      enableReclaim: false
  - name: NetworkTopology
    args:
      topologyName: fabric
  - name: NUMATopology
    args:
      nodesWithoutTopology: RejectAlignedPods
`,
			want: wantArgs{
				coscheduling:    defaultArgs.coscheduling,
				capacityQueue:   &config.CapacityQueueArgs{DefaultQueue: "default", EnableReclaim: false, MinRuntimeSeconds: 15},
				networkTopology: &config.NetworkTopologyArgs{TopologyName: "fabric", UseHyperNodes: true},
				numaTopology:    &config.NUMATopologyArgs{ScoringStrategy: "LeastNUMANodes", NodesWithoutTopology: "RejectAlignedPods"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := decode(t, []byte(header+tc.pluginConfig))
			checkArgs(t, profile(t, cfg, "phalanx-scheduler"), tc.want)
		})
	}
}

// TestDefaultsOnlyForEnabledPlugins checks that upstream defaulting adds args
// only for plugins the profile enables.
func TestDefaultsOnlyForEnabledPlugins(t *testing.T) {
	cfg := decode(t, []byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: phalanx-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: Coscheduling
`))
	prof := profile(t, cfg, "phalanx-scheduler")
	if got := pluginArgs(t, prof, "Coscheduling"); !reflect.DeepEqual(got, defaultArgs.coscheduling) {
		t.Errorf("Coscheduling args = %+v, want %+v", got, defaultArgs.coscheduling)
	}
	for _, pc := range prof.PluginConfig {
		switch pc.Name {
		case "CapacityQueue", "NetworkTopology", "NUMATopology":
			t.Errorf("pluginConfig has %s args although the plugin is not enabled", pc.Name)
		}
	}
}

func TestDecodeRejectsUnknownArgsField(t *testing.T) {
	_, _, err := kubeschedulerscheme.Codecs.UniversalDecoder().Decode([]byte(header+`  pluginConfig:
  - name: Coscheduling
    args:
      defaultScheduleTimeoutSecond: 30
`), nil, nil)
	if err == nil {
		t.Fatal("decode accepted a misspelt args field; strict decoding should reject it")
	}
	if !strings.Contains(err.Error(), "defaultScheduleTimeoutSecond") {
		t.Errorf("error %q does not name the unknown field", err)
	}
}

func TestCanonicalSchedulerConfig(t *testing.T) {
	if len(manifests.SchedulerConfig) == 0 {
		t.Fatal("manifests.SchedulerConfig is empty")
	}
	cfg := decode(t, manifests.SchedulerConfig)
	prof := profile(t, cfg, "phalanx-scheduler")
	// The file sets every field except enableReclaim and useHyperNodes, which
	// come from the defaults, to the defaults.
	checkArgs(t, prof, defaultArgs)
}

// TestSetDefaultsFunctions covers the defaulting functions directly, for
// callers (tests, the simulator) that build v1 args in Go.
func TestSetDefaultsFunctions(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	str := func(v string) *string { return &v }
	boolp := func(v bool) *bool { return &v }
	tests := []struct {
		name string
		in   runtime.Object
		want runtime.Object
	}{
		{
			name: "Coscheduling unset",
			in:   &configv1.CoschedulingArgs{},
			want: &configv1.CoschedulingArgs{DefaultScheduleTimeoutSeconds: i64(configv1.DefaultScheduleTimeoutSeconds), ReservationAfterSeconds: i64(configv1.DefaultReservationAfterSeconds), FragmentationHalfLifeSeconds: i64(configv1.DefaultFragmentationHalfLifeSeconds), ScheduledEvents: ptr.To(configv1.DefaultScheduledEvents),
				ConsolidationAfterSeconds: i64(0), ConsolidationMinRuntimeSeconds: i64(configv1.DefaultConsolidationMinRuntimeSeconds), ConsolidationsPerHour: ptr.To(configv1.DefaultConsolidationsPerHour),
				ConsolidationEvictionGraceSeconds: i64(configv1.DefaultConsolidationEvictionGraceSeconds)},
		},
		{
			name: "Coscheduling set (even zero) is kept for validation to judge",
			in: &configv1.CoschedulingArgs{DefaultScheduleTimeoutSeconds: i64(0), ReservationAfterSeconds: i64(0), FragmentationHalfLifeSeconds: i64(0), ScheduledEvents: ptr.To(""),
				ConsolidationAfterSeconds: i64(-1), ConsolidationMinRuntimeSeconds: i64(0), ConsolidationsPerHour: ptr.To(int32(0)), ConsolidationEvictionGraceSeconds: i64(0)},
			want: &configv1.CoschedulingArgs{DefaultScheduleTimeoutSeconds: i64(0), ReservationAfterSeconds: i64(0), FragmentationHalfLifeSeconds: i64(0), ScheduledEvents: ptr.To(""),
				ConsolidationAfterSeconds: i64(-1), ConsolidationMinRuntimeSeconds: i64(0), ConsolidationsPerHour: ptr.To(int32(0)), ConsolidationEvictionGraceSeconds: i64(0)},
		},
		{
			name: "CapacityQueue unset",
			in:   &configv1.CapacityQueueArgs{},
			want: &configv1.CapacityQueueArgs{DefaultQueue: str("default"), EnableReclaim: boolp(true), MinRuntimeSeconds: i64(configv1.DefaultMinRuntimeSeconds), UsageHalfLifeSeconds: i64(0)},
		},
		{
			name: "CapacityQueue set",
			in:   &configv1.CapacityQueueArgs{DefaultQueue: str(""), EnableReclaim: boolp(false), MinRuntimeSeconds: i64(0), UsageHalfLifeSeconds: i64(600)},
			want: &configv1.CapacityQueueArgs{DefaultQueue: str(""), EnableReclaim: boolp(false), MinRuntimeSeconds: i64(0), UsageHalfLifeSeconds: i64(600)},
		},
		{
			name: "NetworkTopology unset",
			in:   &configv1.NetworkTopologyArgs{},
			want: &configv1.NetworkTopologyArgs{TopologyName: str("default"), UseHyperNodes: boolp(true)},
		},
		{
			name: "NetworkTopology set",
			in:   &configv1.NetworkTopologyArgs{TopologyName: str("x"), UseHyperNodes: boolp(false)},
			want: &configv1.NetworkTopologyArgs{TopologyName: str("x"), UseHyperNodes: boolp(false)},
		},
		{
			name: "NUMATopology unset",
			in:   &configv1.NUMATopologyArgs{},
			want: &configv1.NUMATopologyArgs{ScoringStrategy: str("LeastNUMANodes"), NodesWithoutTopology: str("AdmitAll")},
		},
		{
			name: "NUMATopology set",
			in:   &configv1.NUMATopologyArgs{ScoringStrategy: str("LeastAllocated"), NodesWithoutTopology: str("RejectAlignedPods")},
			want: &configv1.NUMATopologyArgs{ScoringStrategy: str("LeastAllocated"), NodesWithoutTopology: str("RejectAlignedPods")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			switch in := tc.in.(type) {
			case *configv1.CoschedulingArgs:
				configv1.SetDefaults_CoschedulingArgs(in)
			case *configv1.CapacityQueueArgs:
				configv1.SetDefaults_CapacityQueueArgs(in)
			case *configv1.NetworkTopologyArgs:
				configv1.SetDefaults_NetworkTopologyArgs(in)
			case *configv1.NUMATopologyArgs:
				configv1.SetDefaults_NUMATopologyArgs(in)
			default:
				t.Fatalf("unexpected type %T", in)
			}
			if !reflect.DeepEqual(tc.in, tc.want) {
				t.Errorf("got %+v, want %+v", tc.in, tc.want)
			}
		})
	}
}
