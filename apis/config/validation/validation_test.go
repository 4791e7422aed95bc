package validation

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/phalanx-sched/phalanx/apis/config"
	configv1 "github.com/phalanx-sched/phalanx/apis/config/v1"
)

// defaults are the internal args the scheduler gets for a plugin enabled
// without args: empty v1 args through the v1 defaulting and conversion, as
// kube-scheduler's config decoding runs them.
var defaults = func() (d struct {
	coscheduling    config.CoschedulingArgs
	capacityQueue   config.CapacityQueueArgs
	networkTopology config.NetworkTopologyArgs
	numaTopology    config.NUMATopologyArgs
}) {
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	cs := &configv1.CoschedulingArgs{}
	configv1.SetDefaults_CoschedulingArgs(cs)
	must(configv1.Convert_v1_CoschedulingArgs_To_config_CoschedulingArgs(cs, &d.coscheduling, nil))
	cq := &configv1.CapacityQueueArgs{}
	configv1.SetDefaults_CapacityQueueArgs(cq)
	must(configv1.Convert_v1_CapacityQueueArgs_To_config_CapacityQueueArgs(cq, &d.capacityQueue, nil))
	nt := &configv1.NetworkTopologyArgs{}
	configv1.SetDefaults_NetworkTopologyArgs(nt)
	must(configv1.Convert_v1_NetworkTopologyArgs_To_config_NetworkTopologyArgs(nt, &d.networkTopology, nil))
	nu := &configv1.NUMATopologyArgs{}
	configv1.SetDefaults_NUMATopologyArgs(nu)
	must(configv1.Convert_v1_NUMATopologyArgs_To_config_NUMATopologyArgs(nu, &d.numaTopology, nil))
	return d
}()

// TestDefaultsAreValid: the defaults pass validation, and they are what the
// docs say (NUMATopology admits all on nodes without topology by default;
// RejectAlignedPods is the opt-in).
func TestDefaultsAreValid(t *testing.T) {
	path := field.NewPath("pluginConfig")
	checkErr(t, ValidateCoschedulingArgs(path, &defaults.coscheduling), nil, nil)
	checkErr(t, ValidateCapacityQueueArgs(path, &defaults.capacityQueue), nil, nil)
	checkErr(t, ValidateNetworkTopologyArgs(path, &defaults.networkTopology), nil, nil)
	checkErr(t, ValidateNUMATopologyArgs(path, &defaults.numaTopology), nil, nil)
	if got := defaults.numaTopology.NodesWithoutTopology; got != config.AdmitAll {
		t.Errorf("default nodesWithoutTopology = %q, want %q (RejectAlignedPods is the opt-in)", got, config.AdmitAll)
	}
}

func argsPath(plugin string) *field.Path {
	return field.NewPath("pluginConfig").Key(plugin).Child("args")
}

// checkErr asserts that err is nil when wantFields is empty, and otherwise that
// err names every field in wantFields (full path) and each of wantSubstrings.
func checkErr(t *testing.T, err error, wantFields []string, wantSubstrings []string) {
	t.Helper()
	if len(wantFields) == 0 {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("expected an error naming %v, got nil", wantFields)
	}
	msg := err.Error()
	for _, f := range wantFields {
		if !strings.Contains(msg, f) {
			t.Errorf("error %q does not contain field path %q", msg, f)
		}
	}
	for _, s := range wantSubstrings {
		if !strings.Contains(msg, s) {
			t.Errorf("error %q does not contain %q", msg, s)
		}
	}
}

func TestValidateCoschedulingArgs(t *testing.T) {
	const f = "pluginConfig[Coscheduling].args.defaultScheduleTimeoutSeconds"
	tests := []struct {
		name       string
		timeout    int64
		wantFields []string
		wantSubstr []string
	}{
		{name: "defaults", timeout: defaults.coscheduling.DefaultScheduleTimeoutSeconds},
		{name: "lower bound 1", timeout: 1},
		{name: "upper bound 86400", timeout: 86400},
		{name: "zero", timeout: 0, wantFields: []string{f}, wantSubstr: []string{"must be between 1 and 86400"}},
		{name: "negative", timeout: -5, wantFields: []string{f}, wantSubstr: []string{"-5"}},
		{name: "one past a day", timeout: 86401, wantFields: []string{f}, wantSubstr: []string{"86401", "must be between 1 and 86400"}},
		{name: "huge", timeout: 1 << 40, wantFields: []string{f}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateCoschedulingArgs(argsPath("Coscheduling"), &config.CoschedulingArgs{DefaultScheduleTimeoutSeconds: tc.timeout, ReservationAfterSeconds: defaults.coscheduling.ReservationAfterSeconds, ScheduledEvents: defaults.coscheduling.ScheduledEvents, ConsolidationsPerHour: defaults.coscheduling.ConsolidationsPerHour})
			checkErr(t, err, tc.wantFields, tc.wantSubstr)
		})
	}
}

type secondsCase struct {
	name    string
	seconds int64
	ok      bool
}

// TestValidateCoschedulingSeconds: each seconds field is judged on its own
// range, the others at their defaults.
func TestValidateCoschedulingSeconds(t *testing.T) {
	reservation := func(a *config.CoschedulingArgs, v int64) { a.ReservationAfterSeconds = v }
	halfLife := func(a *config.CoschedulingArgs, v int64) { a.FragmentationHalfLifeSeconds = v }
	for _, field := range []struct {
		name   string
		set    func(*config.CoschedulingArgs, int64)
		rng    string
		values []secondsCase
	}{
		{"reservationAfterSeconds", reservation, "must be between 1 and 86400", []secondsCase{{"defaults", defaults.coscheduling.ReservationAfterSeconds, true}, {"one second", 1, true}, {"zero", 0, false}, {"negative", -1, false}, {"over a day", 86401, false}}},
		{"fragmentationHalfLifeSeconds", halfLife, "must be between 0 and 86400", []secondsCase{{"defaults", defaults.coscheduling.FragmentationHalfLifeSeconds, true}, {"zero turns it off", 0, true}, {"negative", -1, false}, {"over a day", 86401, false}}},
	} {
		for _, tc := range field.values {
			t.Run(field.name+"/"+tc.name, func(t *testing.T) {
				args := defaults.coscheduling
				field.set(&args, tc.seconds)
				err := ValidateCoschedulingArgs(argsPath("Coscheduling"), &args)
				if tc.ok {
					checkErr(t, err, nil, nil)
				} else {
					checkErr(t, err, []string{"pluginConfig[Coscheduling].args." + field.name}, []string{field.rng})
				}
			})
		}
	}
}

func TestValidateCapacityQueueArgs(t *testing.T) {
	const f = "pluginConfig[CapacityQueue].args.defaultQueue"
	tests := []struct {
		name       string
		args       config.CapacityQueueArgs
		wantFields []string
		wantSubstr []string
	}{
		{name: "defaults", args: defaults.capacityQueue},
		{name: "reclaim off", args: config.CapacityQueueArgs{DefaultQueue: "default"}},
		{name: "dotted subdomain", args: config.CapacityQueueArgs{DefaultQueue: "team-a.batch"}},
		{name: "253 characters", args: config.CapacityQueueArgs{DefaultQueue: strings.Repeat("a", 253)}},
		{name: "empty", args: config.CapacityQueueArgs{DefaultQueue: ""}, wantFields: []string{f}},
		{name: "upper case", args: config.CapacityQueueArgs{DefaultQueue: "Default"}, wantFields: []string{f}, wantSubstr: []string{`"Default"`}},
		{name: "underscore", args: config.CapacityQueueArgs{DefaultQueue: "my_queue"}, wantFields: []string{f}},
		{name: "negative min runtime", args: config.CapacityQueueArgs{DefaultQueue: "default", MinRuntimeSeconds: -1},
			wantFields: []string{"pluginConfig[CapacityQueue].args.minRuntimeSeconds"}, wantSubstr: []string{"must be between 0 and 86400"}},
		{name: "negative usage half-life", args: config.CapacityQueueArgs{DefaultQueue: "default", UsageHalfLifeSeconds: -1},
			wantFields: []string{"pluginConfig[CapacityQueue].args.usageHalfLifeSeconds"}, wantSubstr: []string{"between 0 (off) and 2592000"}},
		{name: "usage half-life above 30 days", args: config.CapacityQueueArgs{DefaultQueue: "default", UsageHalfLifeSeconds: 2592001},
			wantFields: []string{"pluginConfig[CapacityQueue].args.usageHalfLifeSeconds"}, wantSubstr: []string{"(30 days)"}},
		{name: "leading dash", args: config.CapacityQueueArgs{DefaultQueue: "-q"}, wantFields: []string{f}},
		{name: "space", args: config.CapacityQueueArgs{DefaultQueue: "a b"}, wantFields: []string{f}},
		{name: "254 characters", args: config.CapacityQueueArgs{DefaultQueue: strings.Repeat("a", 254)}, wantFields: []string{f}, wantSubstr: []string{"253"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateCapacityQueueArgs(argsPath("CapacityQueue"), &tc.args)
			checkErr(t, err, tc.wantFields, tc.wantSubstr)
		})
	}
}

func TestValidateNetworkTopologyArgs(t *testing.T) {
	const f = "pluginConfig[NetworkTopology].args.topologyName"
	tests := []struct {
		name       string
		args       config.NetworkTopologyArgs
		wantFields []string
		wantSubstr []string
	}{
		{name: "defaults", args: defaults.networkTopology},
		{name: "hypernodes off", args: config.NetworkTopologyArgs{TopologyName: "fabric-1"}},
		{name: "empty", args: config.NetworkTopologyArgs{TopologyName: ""}, wantFields: []string{f}},
		{name: "upper case", args: config.NetworkTopologyArgs{TopologyName: "Fabric"}, wantFields: []string{f}, wantSubstr: []string{`"Fabric"`}},
		{name: "slash", args: config.NetworkTopologyArgs{TopologyName: "ns/fabric"}, wantFields: []string{f}},
		{name: "trailing dot", args: config.NetworkTopologyArgs{TopologyName: "fabric."}, wantFields: []string{f}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateNetworkTopologyArgs(argsPath("NetworkTopology"), &tc.args)
			checkErr(t, err, tc.wantFields, tc.wantSubstr)
		})
	}
}

func TestValidateNUMATopologyArgs(t *testing.T) {
	const (
		fs = "pluginConfig[NUMATopology].args.scoringStrategy"
		fn = "pluginConfig[NUMATopology].args.nodesWithoutTopology"
	)
	tests := []struct {
		name       string
		args       config.NUMATopologyArgs
		wantFields []string
		wantSubstr []string
		notFields  []string
	}{
		{name: "defaults", args: defaults.numaTopology},
		{name: "strict opt-in: RejectAlignedPods", args: config.NUMATopologyArgs{ScoringStrategy: config.LeastNUMANodes, NodesWithoutTopology: config.RejectAlignedPods}},
		{name: "MostAllocated, AdmitAll", args: config.NUMATopologyArgs{ScoringStrategy: config.MostAllocated, NodesWithoutTopology: config.AdmitAll}},
		{name: "LeastAllocated", args: config.NUMATopologyArgs{ScoringStrategy: config.LeastAllocated, NodesWithoutTopology: config.RejectAlignedPods}},
		{
			name:       "unsupported strategy",
			args:       config.NUMATopologyArgs{ScoringStrategy: "BestFit", NodesWithoutTopology: config.AdmitAll},
			wantFields: []string{fs},
			wantSubstr: []string{`"BestFit"`, "LeastNUMANodes", "MostAllocated", "LeastAllocated"},
			notFields:  []string{fn},
		},
		{
			name:       "enum values are case sensitive",
			args:       config.NUMATopologyArgs{ScoringStrategy: "leastnumanodes", NodesWithoutTopology: config.AdmitAll},
			wantFields: []string{fs},
			notFields:  []string{fn},
		},
		{
			name:       "empty strategy",
			args:       config.NUMATopologyArgs{NodesWithoutTopology: config.AdmitAll},
			wantFields: []string{fs},
			notFields:  []string{fn},
		},
		{
			name:       "unsupported nodesWithoutTopology",
			args:       config.NUMATopologyArgs{ScoringStrategy: config.LeastNUMANodes, NodesWithoutTopology: "RejectAll"},
			wantFields: []string{fn},
			wantSubstr: []string{`"RejectAll"`, "RejectAlignedPods", "AdmitAll"},
			notFields:  []string{fs},
		},
		{
			name:       "both invalid: both reported",
			args:       config.NUMATopologyArgs{},
			wantFields: []string{fs, fn},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateNUMATopologyArgs(argsPath("NUMATopology"), &tc.args)
			checkErr(t, err, tc.wantFields, tc.wantSubstr)
			for _, f := range tc.notFields {
				if err != nil && strings.Contains(err.Error(), f) {
					t.Errorf("error %q names valid field %q", err, f)
				}
			}
		})
	}
}

// TestValidateScheduledEvents: PerGang and PerMember, nothing else, and the
// error names the field and the values it takes.
func TestValidateScheduledEvents(t *testing.T) {
	for _, tc := range []struct {
		value string
		ok    bool
	}{{"PerGang", true}, {"PerMember", true}, {"", false}, {"pergang", false}, {"None", false}} {
		t.Run(tc.value, func(t *testing.T) {
			args := defaults.coscheduling
			args.ScheduledEvents = tc.value
			err := ValidateCoschedulingArgs(argsPath("Coscheduling"), &args)
			if tc.ok {
				checkErr(t, err, nil, nil)
			} else {
				checkErr(t, err, []string{"pluginConfig[Coscheduling].args.scheduledEvents"}, []string{`"PerGang"`, `"PerMember"`})
			}
		})
	}
}

// TestValidateConsolidation: seconds within a day (0 is off, or no min
// runtime), at least one and at most 60 consolidations an hour; each error
// names its field.
func TestValidateConsolidation(t *testing.T) {
	for _, tc := range []struct {
		name              string
		after, minRuntime int64
		perHour           int32
		grace             int64
		wantField         string
	}{
		{name: "defaults: off", after: 0, minRuntime: 600, perHour: 2},
		{name: "on, no min runtime", after: 300, minRuntime: 0, perHour: 60},
		{name: "off, rate unset", after: 0, minRuntime: 600, perHour: 0},
		{name: "negative after", after: -1, minRuntime: 600, perHour: 2, wantField: "consolidationAfterSeconds"},
		{name: "after past a day", after: 86401, minRuntime: 600, perHour: 2, wantField: "consolidationAfterSeconds"},
		{name: "negative min runtime", after: 300, minRuntime: -1, perHour: 2, wantField: "consolidationMinRuntimeSeconds"},
		{name: "none an hour", after: 300, minRuntime: 600, perHour: 0, wantField: "consolidationsPerHour"},
		{name: "more than one a minute", after: 300, minRuntime: 600, perHour: 61, wantField: "consolidationsPerHour"},
		{name: "eviction grace 0: delete at once", after: 300, minRuntime: 600, perHour: 2, grace: 0},
		{name: "eviction grace an hour", after: 300, minRuntime: 600, perHour: 2, grace: 3600},
		{name: "negative eviction grace", after: 300, minRuntime: 600, perHour: 2, grace: -1, wantField: "consolidationEvictionGraceSeconds"},
		{name: "eviction grace past an hour", after: 300, minRuntime: 600, perHour: 2, grace: 3601, wantField: "consolidationEvictionGraceSeconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := defaults.coscheduling
			args.ConsolidationAfterSeconds, args.ConsolidationMinRuntimeSeconds, args.ConsolidationsPerHour = tc.after, tc.minRuntime, tc.perHour
			args.ConsolidationEvictionGraceSeconds = tc.grace
			err := ValidateCoschedulingArgs(argsPath("Coscheduling"), &args)
			if tc.wantField == "" {
				checkErr(t, err, nil, nil)
				return
			}
			checkErr(t, err, []string{"pluginConfig[Coscheduling].args." + tc.wantField}, []string{"must be between"})
		})
	}
}

// TestPathIsRespected checks that errors are rooted at the caller's path, not a
// fixed one, so the scheduler can report the failing profile.
func TestPathIsRespected(t *testing.T) {
	path := field.NewPath("profiles").Index(2).Child("pluginConfig").Index(0).Child("args")
	err := ValidateCoschedulingArgs(path, &config.CoschedulingArgs{})
	checkErr(t, err, []string{"profiles[2].pluginConfig[0].args.defaultScheduleTimeoutSeconds"}, nil)
	if strings.Contains(err.Error(), "pluginConfig[Coscheduling]") {
		t.Errorf("error %q uses a fixed path instead of the caller's", err)
	}
}
