package estimatorbench

import (
	"fmt"
	"strings"
	"testing"

	"github.com/phalanx-sched/phalanx/internal/bench/profiles"
)

// TestWriteReportEdges: an empty member, a profile not kept on disk, and
// the profile tables' lengths.
func TestWriteReportEdges(t *testing.T) {
	var flatFuncs []profiles.FuncCost
	for i := range 13 {
		flatFuncs = append(flatFuncs, profiles.FuncCost{Func: fmt.Sprintf("pkg.f%02d", i), Flat: 0.05, Cum: 0.05})
	}
	own := []profiles.FuncCost{{Func: "github.com/phalanx-sched/phalanx/internal/estimator.Serve", Flat: 0.01, Cum: 0.75}}
	for _, tc := range []struct {
		name          string
		rep           Report
		want, notWant []string
	}{
		// No GPUs: a share of 0%, not NaN.
		{"empty member", Report{}, []string{"Member: 0 nodes", "0 pods bound taking 0 of 0 GPUs (0%)."}, []string{"NaN", "CPU profile"}},
		{"profile not kept", Report{Runs: 1, Cases: []Case{{Name: "sets", CPU: &profiles.Top{Total: 5e8, Note: "7 calls", Flat: flatFuncs, Own: own}}}},
			[]string{
				"CPU profile of the scheduler, case sets: 0.50 s in total (7 calls)\n",
				"5.0% 5.0% pkg.f11", // the twelfth, the last printed
				"phalanx functions by cum 1.0% 75.0% internal/estimator.Serve",
			},
			[]string{"go tool pprof", "pkg.f12"}},
	} {
		var b strings.Builder
		WriteReport(&b, tc.rep, "m", "c")
		raw := b.String()
		out := flat(raw)
		for _, want := range tc.want {
			if !strings.Contains(out, flat(want)) {
				t.Errorf("%s: report lacks %q:\n%s", tc.name, want, raw)
			}
		}
		for _, not := range tc.notWant {
			if strings.Contains(out, not) {
				t.Errorf("%s: report has %q:\n%s", tc.name, not, raw)
			}
		}
	}
}
