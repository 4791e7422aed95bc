package replay

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/phalanx-sched/phalanx/internal/sim"
	"github.com/phalanx-sched/phalanx/internal/sim/trace"
	"github.com/phalanx-sched/phalanx/manifests"
)

// TestTraceDecayedFairShare replays the shipped two-queue trace
// (examples/trace/fairshare) with phalanx on a real in-process cluster,
// with decayed fair share off and on: a-hot held the whole cluster for
// 300 s, then both queues wait with a job of the whole cluster, submitted
// at once (a-hot's first). Off, the shares tie and the gangs' order decides:
// a-hot-2, submitted first (or, in the same second, first by its own name);
// with a half-life of 300 s,
// b-cold starts first. Both start in the end.
func TestTraceDecayedFairShare(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	dir := "../../../examples/trace/fairshare/"
	tr, err := trace.ReadTraceFiles(dir+"nodes.csv", dir+"jobs.csv", dir+"queues.csv")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		halfLife string
		first    string
	}{
		{"0", "a-hot-2"},
		{"300", "b-cold-1"},
	} {
		t.Run("usageHalfLifeSeconds "+tc.halfLife, func(t *testing.T) {
			// The gangs wait 20 s for a-hot's to end. At 50x that is 0.4 s,
			// close to the 30 s (0.6 s) after which a waiting gang reserves
			// nodes, and a reservation, not the queues' order, takes the
			// room: on a loaded machine a gang could reserve first. Reservation
			// and the schedule timeout are kept out of the wait.
			config := string(manifests.SchedulerConfig)
			for _, r := range [][2]string{
				{"usageHalfLifeSeconds: 0\n", "usageHalfLifeSeconds: " + tc.halfLife + "\n"},
				{"reservationAfterSeconds: 30\n", "reservationAfterSeconds: 600\n"},
				{"defaultScheduleTimeoutSeconds: 60\n", "defaultScheduleTimeoutSeconds: 600\n"},
			} {
				if !strings.Contains(config, r[0]) {
					t.Fatalf("the canonical config has no %q to replace", r[0])
				}
				config = strings.Replace(config, r[0], r[1], 1)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			runs, err := ReplayTrace(ctx, tr, []string{TracePhalanx}, ReplayOptions{
				Options: sim.Options{Log: io.Discard, SchedulerConfig: []byte(config)},
				Speed:   50, Timeout: 2 * time.Minute, ScaleTimers: true,
			})
			if err != nil {
				t.Fatal(err)
			}
			at := map[string]time.Duration{}
			for _, j := range runs[0].Result.Jobs {
				if !j.Ran() {
					t.Fatalf("job %s did not start: %s", j.Job.Name, j.Reason)
				}
				at[j.Job.Name] = j.QuorumAt
			}
			second := map[string]string{"a-hot-2": "b-cold-1", "b-cold-1": "a-hot-2"}[tc.first]
			if at[tc.first] >= at[second] {
				t.Errorf("%s started at %v, after %s at %v; want %s first (quorum times %v)", tc.first, at[tc.first], second, at[second], tc.first, at)
			}
			s := runs[0].Summary()
			if s.Partial != 0 || s.Split != 0 {
				t.Errorf("%d partial and %d split gangs", s.Partial, s.Split)
			}
			// Goodput is the work of the three jobs, 16 GPUs × (300 + 200 +
			// 200) s, to the sampling's resolution (0.1 s × 50 a pod); nothing
			// was evicted.
			if want := 16.0 * 700; s.Goodput < 0.97*want || s.Goodput > 1.05*want || s.LostGPUSeconds != 0 {
				t.Errorf("goodput %.0f GPU·s, lost %.0f; want about %.0f and 0", s.Goodput, s.LostGPUSeconds, want)
			}
		})
	}
}
