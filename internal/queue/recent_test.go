package queue

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

// TestRecentUsageHalvesEveryHalfLife: the recent usage of a queue is its
// allocation averaged with weights that halve every half-life, on the
// injected clock: 16 GPUs held for one half-life average 8, and once given
// back the average halves each half-life until it is forgotten.
func TestRecentUsageHalvesEveryHalfLife(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1_000_000, 0))
	c := NewCache()
	c.DecayUsage(time.Hour, clk)
	c.SetQueue(q("a", "", 1))
	c.SetNode("n", cpuGPU(64000, 16), true)
	c.SetPod("run", Charge{Queue: "a", Request: cpuGPU(16000, 16), Placed: true})
	for _, step := range []struct {
		after   time.Duration
		release bool
		want    int64
	}{
		{0, false, 0},
		{time.Hour, false, 8},
		{time.Hour, false, 12},
		{0, true, 12},
		{time.Hour, false, 6},
		{2 * time.Hour, false, 2}, // 1.5, rounded
	} {
		clk.Step(step.after)
		if step.release {
			c.DeletePod("run")
		}
		got := c.Snapshot(nil).Recent["a"][gpu]
		if got != step.want {
			t.Fatalf("after %v more (released %v): recent GPUs %d, want %d", step.after, step.release, got, step.want)
		}
	}
	clk.Step(20 * time.Hour)
	if r := c.Snapshot(nil).Recent; len(r) != 0 {
		t.Errorf("usage decayed to nothing is still kept: %v", r)
	}
}

// TestDecayedFairShareOrder: two queues of equal weight ask for the whole
// cluster at once. Without decay their shares tie (Compare is 0: the gangs'
// own order decides, here a's gang, submitted first); with a
// half-life, queue a, which held the cluster for the last hour, yields to
// b, which waited: b goes first and deserves most of the room.
func TestDecayedFairShareOrder(t *testing.T) {
	for _, tc := range []struct {
		name      string
		halfLife  time.Duration
		wantFirst string
	}{
		{"off: shares tie", 0, "a"},
		{"half-life 30m: the queue that ran hot yields", 30 * time.Minute, "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(time.Unix(1_000_000, 0))
			c := NewCache()
			c.DecayUsage(tc.halfLife, clk)
			c.SetQueue(q("a", "", 1))
			c.SetQueue(q("b", "", 1))
			c.SetNode("n", cpuGPU(64000, 16), true)
			c.SetPod("hot", Charge{Queue: "a", Request: cpuGPU(16000, 16), Placed: true})
			clk.Step(time.Hour)
			c.DeletePod("hot")
			c.SetPod("a-wait", Charge{Queue: "a", Request: cpuGPU(16000, 16)})
			c.SetPod("b-wait", Charge{Queue: "b", Request: cpuGPU(16000, 16)})
			snap := c.Snapshot(nil)
			cmp := snap.Compare("a", "b")
			if want := map[string]int{"a": -1, "b": 1}[tc.wantFirst]; tc.halfLife > 0 && cmp != want {
				t.Errorf("Compare(a, b) = %d, want %d (recent %v, deserved %v)", cmp, want, snap.Recent, snap.Deserved)
			}
			if tc.halfLife == 0 && cmp != 0 {
				t.Errorf("off: Compare(a, b) = %d, want a tie (0)", cmp)
			}
			// The gangs' order: the queues' when it decides, else a's gang
			// (submitted first).
			aheadOf := func(q string) func(string) bool {
				return func(other string) bool {
					if cmp != 0 {
						return snap.Compare(other, q) < 0
					}
					return other == "a"
				}
			}
			a, b := snap.Deserved["a"][gpu], snap.Deserved["b"][gpu]
			if a+b != 16 {
				t.Errorf("deserved %d + %d GPUs, want the 16 of the cluster", a, b)
			}
			if tc.halfLife == 0 && a != b {
				t.Errorf("off: deserved a %d, b %d, want equal", a, b)
			}
			if tc.halfLife > 0 && b <= 2*a {
				t.Errorf("on: deserved a %d, b %d: want b well above a", a, b)
			}
			// Each gang exceeds its queue's share: the one first in order
			// starts once the other was refused.
			whole := cpuGPU(16000, 16)
			other := map[string]string{"a": "b", "b": "a"}[tc.wantFirst]
			snap.Blocked = map[string]resources.List{other: whole}
			if ok, reason := snap.AdmitInOrder(tc.wantFirst, whole, aheadOf(tc.wantFirst)); !ok {
				t.Errorf("%s refused with %s's gang refused: %s", tc.wantFirst, other, reason)
			}
			snap.Blocked = map[string]resources.List{tc.wantFirst: whole}
			if ok, _ := snap.AdmitInOrder(other, whole, aheadOf(other)); ok {
				t.Errorf("%s admitted ahead of %s", other, tc.wantFirst)
			}
		})
	}
}

// TestDecayedFairShareKeepsGuarantees: recent usage moves only the room
// above guarantees: a hot queue keeps its guarantee.
func TestDecayedFairShareKeepsGuarantees(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1_000_000, 0))
	c := NewCache()
	c.DecayUsage(10*time.Minute, clk)
	hot := q("a", "", 1)
	hot.Guarantee = resources.List{gpu: 6}
	c.SetQueue(hot)
	c.SetQueue(q("b", "", 1))
	c.SetNode("n", cpuGPU(64000, 16), true)
	c.SetPod("hot", Charge{Queue: "a", Request: cpuGPU(16000, 16), Placed: true})
	clk.Step(3 * time.Hour)
	c.DeletePod("hot")
	c.SetPod("a-wait", Charge{Queue: "a", Request: cpuGPU(16000, 16)})
	c.SetPod("b-wait", Charge{Queue: "b", Request: cpuGPU(16000, 16)})
	d := c.Snapshot(nil).Deserved
	if d["a"][gpu] < 6 {
		t.Errorf("hot queue deserves %d GPUs, below its guarantee of 6", d["a"][gpu])
	}
	if d["b"][gpu] < 9 {
		t.Errorf("b deserves %d GPUs, want at least 9 of the 10 above a's guarantee", d["b"][gpu])
	}
}

// TestDecayedUsageSeed: after a restart the average the controller wrote
// is the starting point, and it decays from there; a queue the cache
// already follows is not reset by it.
func TestDecayedUsageSeed(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1_000_000, 0))
	c := NewCache()
	c.DecayUsage(time.Hour, clk)
	c.SetQueue(q("a", "", 1))
	c.SetQueue(q("b", "", 1))
	c.SetNode("n", cpuGPU(64000, 16), true)
	c.SetPod("b-run", Charge{Queue: "b", Request: cpuGPU(4000, 4), Placed: true})
	c.SeedRecent("a", resources.List{gpu: 12})
	c.SeedRecent("b", resources.List{gpu: 12})
	clk.Step(time.Hour)
	r := c.Snapshot(nil).Recent
	if r["a"][gpu] != 6 {
		t.Errorf("seeded queue: %d GPUs after a half-life, want 6", r["a"][gpu])
	}
	if r["b"][gpu] != 2 {
		t.Errorf("followed queue: %d GPUs after a half-life, want 2 (the seed must not override it)", r["b"][gpu])
	}
}

// TestReservedBeforeTheInformer: the scheduler may reserve a pod before the
// informer's add event charges it. The reservation counts at once (a queue's
// capability holds for the next admission), the late pending charge does
// not undo it, and unreserving gives it back.
func TestReservedBeforeTheInformer(t *testing.T) {
	c := NewCache()
	capped := q("capped", "", 1)
	capped.Capability = resources.List{gpu: 2}
	c.SetQueue(capped)
	c.SetNode("n", cpuGPU(64000, 16), true)
	one := cpuGPU(100, 1)
	for _, uid := range []string{"a", "b"} {
		c.MarkPlaced(types.UID(uid), true, Charge{Queue: "capped", Request: one})
	}
	c.SetPod("a", Charge{Queue: "capped", Request: one}) // the late add event: pending
	if ok, _ := c.Snapshot(nil).Admit("capped", one); ok {
		t.Fatalf("a third GPU admitted in a queue capped at 2 with two reserved (allocated %v)", c.Snapshot(nil).Allocated)
	}
	c.MarkPlaced("b", false)
	if ok, reason := c.Snapshot(nil).Admit("capped", one); !ok {
		t.Errorf("refused after an unreserve: %s", reason)
	}
}
