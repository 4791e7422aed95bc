package sim

import (
	"reflect"
	"testing"
	"time"

	"github.com/phalanx-sched/phalanx/internal/sim/metrics"
)

// TestCountWait: each sample's cause counts for the time until the next
// sample, and a job judged at no sample (it started) gains nothing.
func TestCountWait(t *testing.T) {
	const s = time.Second
	j := &JobResult{}
	j.countWait(s) // nothing judged yet
	j.lastCause = metrics.WaitNoRoom
	j.countWait(2 * s)
	j.lastCause, j.lastWord = metrics.WaitRoomHeld, "Unschedulable: x"
	j.countWait(3 * s)
	j.countWait(5 * s) // not judged at the last sample: started
	if want := map[string]time.Duration{metrics.WaitNoRoom: 2 * s, metrics.WaitRoomHeld: 3 * s}; !reflect.DeepEqual(j.WaitedBy, want) {
		t.Errorf("waited by %v, want %v", j.WaitedBy, want)
	}
	if want := map[string]time.Duration{"Unschedulable: x": 3 * s}; !reflect.DeepEqual(j.HeldBy, want) {
		t.Errorf("held by %v, want %v", j.HeldBy, want)
	}
}
