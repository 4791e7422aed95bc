package queue

import (
	"strings"
	"testing"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

// TestSnapshotAdmitBorrowsWhatStalledQueuesCannotUse: a queue above its
// deserved share is refused while another queue waits below its own, unless
// all that queue waits with is stalled (gangs that fit nowhere now): then
// refusing would only leave the room idle.
func TestSnapshotAdmitBorrowsWhatStalledQueuesCannotUse(t *testing.T) {
	c := NewCache()
	c.SetQueue(q("light", "", 1))
	c.SetQueue(q("heavy", "", 2))
	c.SetNode("n", cpuGPU(96000, 12), true)
	// light runs 6 GPUs; heavy runs 2 and waits for 8 more: heavy deserves 8,
	// light 4.
	c.SetPod("light-run", Charge{Queue: "light", Request: cpuGPU(6000, 6), Placed: true})
	c.SetPod("heavy-run", Charge{Queue: "heavy", Request: cpuGPU(2000, 2), Placed: true})
	c.SetPod("heavy-wait", Charge{Queue: "heavy", Request: cpuGPU(8000, 8)})
	two := cpuGPU(2000, 2)
	for _, tc := range []struct {
		name    string
		stalled map[string]resources.List
		wantOK  bool
	}{
		{"heavy waits with work that may start: light is refused", nil, false},
		{"part of heavy's wait is stalled: still refused", map[string]resources.List{"heavy": cpuGPU(4000, 4)}, false},
		{"all of heavy's wait is stalled: light borrows", map[string]resources.List{"heavy": cpuGPU(8000, 8)}, true},
	} {
		snap := c.Snapshot(nil, Want{Queue: "light", Need: two})
		snap.Stalled = tc.stalled
		ok, reason := snap.Admit("light", two)
		if ok != tc.wantOK {
			t.Errorf("%s: Admit = %v (%s), want %v", tc.name, ok, reason, tc.wantOK)
		}
		if !ok && !strings.Contains(reason, "while queue heavy waits below its share") {
			t.Errorf("%s: reason %q does not name the waiting queue", tc.name, reason)
		}
	}
}

// TestSnapshotAdmitRefusedQueuesYieldInOrder: two queues of equal weight
// each wait with a gang of the whole cluster, above their deserved half.
// Each refuses the other while neither was refused yet; once a queue's
// work was refused it stops holding back the queue first in order (names
// break the tie of equal shares), and the queue after it stays refused:
// one of them starts, never neither.
func TestSnapshotAdmitRefusedQueuesYieldInOrder(t *testing.T) {
	c := NewCache()
	c.SetQueue(q("a", "", 1))
	c.SetQueue(q("b", "", 1))
	c.SetNode("n", cpuGPU(64000, 16), true)
	whole := cpuGPU(16000, 16)
	c.SetPod("a-wait", Charge{Queue: "a", Request: whole})
	c.SetPod("b-wait", Charge{Queue: "b", Request: whole})
	// The queues' shares tie; a's gang was submitted first (gang.Compare),
	// so of the two refused, a's goes first.
	aFirst := map[string]func(other string) bool{
		"a": func(string) bool { return false },
		"b": func(other string) bool { return other == "a" },
	}
	for _, tc := range []struct {
		name    string
		blocked string
		admit   string
		inOrder bool
		wantOK  bool
	}{
		{"nothing refused yet: a waits for b", "", "a", true, false},
		{"nothing refused yet: b waits for a", "", "b", true, false},
		{"b refused: a, first in order, starts", "b", "a", true, true},
		{"a refused: b, after a's gang in order, still waits", "a", "b", true, false},
		{"a refused, queues alone: equal shares tie, b starts", "a", "b", false, true},
		{"b refused, queues alone: equal shares tie, a starts", "b", "a", false, true},
	} {
		snap := c.Snapshot(nil, Want{Queue: tc.admit, Need: whole})
		if tc.blocked != "" {
			snap.Blocked = map[string]resources.List{tc.blocked: whole}
		}
		var ahead func(string) bool
		if tc.inOrder {
			ahead = aFirst[tc.admit]
		}
		if ok, reason := snap.AdmitInOrder(tc.admit, whole, ahead); ok != tc.wantOK {
			t.Errorf("%s: Admit(%s) = %v (%s), want %v", tc.name, tc.admit, ok, reason, tc.wantOK)
		}
	}
}
