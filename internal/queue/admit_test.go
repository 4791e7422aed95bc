package queue

import (
	"strings"
	"testing"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

func TestAdmit(t *testing.T) {
	closed := func(qq Queue) Queue { qq.Open = false; return qq }
	with := func(qq Queue, g, c resources.List) Queue { qq.Guarantee, qq.Capability = g, c; return qq }
	base := func(extra ...Queue) []Queue {
		return append([]Queue{
			with(q("research", "", 1), nil, cpuGPU(100000, 16)),
			with(q("team-a", "research", 1), nil, cpu(64000)),
			q("team-b", "research", 1),
		}, extra...)
	}
	total := cpuGPU(200000, 32)
	cases := []struct {
		name      string
		queues    []Queue
		leaf      string
		min       resources.List
		total     resources.List
		allocated map[string]resources.List
		wantOK    bool
		want      []string // substrings of the reason
	}{
		{
			name: "fits", queues: base(), leaf: "team-a", min: cpuGPU(8000, 4), total: total,
			allocated: map[string]resources.List{"team-a": cpu(8000)}, wantOK: true,
		},
		{
			name: "unknown queue", queues: base(), leaf: "nope", min: cpu(1), total: total,
			want: []string{"queue nope does not exist"},
		},
		{
			name: "inner queue takes no pods", queues: base(), leaf: "research", min: cpu(1), total: total,
			want: []string{"queue research has child queues"},
		},
		{
			name: "closed leaf", queues: base(closed(q("frozen", "", 1))), leaf: "frozen", min: cpu(1), total: total,
			want: []string{"queue frozen is closed"},
		},
		{
			name:   "closed parent",
			queues: []Queue{closed(q("dept", "", 1)), q("t", "dept", 1)}, leaf: "t", min: cpu(1), total: total,
			want: []string{"queue t: parent queue dept is closed"},
		},
		{
			name: "leaf capability", queues: base(), leaf: "team-a", min: cpu(10000), total: total,
			allocated: map[string]resources.List{"team-a": cpu(60000)},
			want:      []string{"queue team-a: cpu 70000m of capability 64000m", "allocated 60000m", "gang minimum 10000m"},
		},
		{
			name: "leaf capability exactly reached is fine", queues: base(), leaf: "team-a", min: cpu(4000), total: total,
			allocated: map[string]resources.List{"team-a": cpu(60000)}, wantOK: true,
		},
		{
			name: "ancestor capability counts siblings", queues: base(), leaf: "team-b", min: resources.List{gpu: 8}, total: total,
			allocated: map[string]resources.List{"team-a": {gpu: 6}, "team-b": {gpu: 4}},
			want:      []string{"queue research: nvidia.com/gpu 18 of capability 16", "ancestor of queue team-b"},
		},
		{
			name: "resource not in capability is unbounded", queues: base(), leaf: "team-a", min: resources.List{"memory": 1 << 40}, total: resources.List{"memory": 1 << 41},
			wantOK: true,
		},
		{
			name:   "other queue's unmet guarantee is protected",
			queues: base(with(q("prod", "", 1), cpu(150000), nil)), leaf: "team-a", min: cpu(40000), total: total,
			allocated: map[string]resources.List{"prod": cpu(100000), "team-b": cpu(20000)},
			// free 80000m, prod still holds 50000m: 30000m left.
			want: []string{"queue team-a: gang minimum cpu 40000m exceeds the 30000m left of 80000m free", "prod 50000m"},
		},
		{
			name:   "met guarantee holds nothing",
			queues: base(with(q("prod", "", 1), cpu(150000), nil)), leaf: "team-a", min: cpu(40000), total: total,
			allocated: map[string]resources.List{"prod": cpu(150000)}, wantOK: true,
		},
		{
			name:   "own queue's guarantee is usable by it",
			queues: base(with(q("prod", "", 1), cpu(150000), nil)), leaf: "prod", min: cpu(150000), total: total,
			wantOK: true,
		},
		{
			name: "ancestor guarantee is usable by its children, sibling guarantee is not",
			queues: []Queue{
				with(q("dept", "", 1), cpu(100000), nil),
				q("t1", "dept", 1), with(q("t2", "dept", 1), cpu(30000), nil),
			},
			leaf: "t1", min: cpu(80000), total: cpu(100000),
			want: []string{"exceeds the 70000m left of 100000m free", "t2 30000m"},
		},
		{
			name: "nested guarantees are not counted twice",
			queues: []Queue{
				with(q("dept", "", 1), cpu(50000), nil), with(q("t", "dept", 1), cpu(50000), nil),
				q("other", "", 1),
			},
			leaf: "other", min: cpu(50000), total: cpu(100000), wantOK: true,
		},
		{
			// No room is the planner's verdict (and reclaim's cue), not the queue's.
			name: "a full cluster does not refuse admission", queues: base(), leaf: "team-b", min: cpu(50000), total: cpu(100000),
			allocated: map[string]resources.List{"team-a": cpu(30000), "elsewhere": cpu(30000)},
			wantOK:    true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := mustBuild(t, tc.queues...)
			ok, reason := tr.Admit(tc.leaf, tc.min, tc.total, tc.allocated)
			if ok != tc.wantOK {
				t.Fatalf("Admit = %v (%q), want %v", ok, reason, tc.wantOK)
			}
			if ok && reason != "" {
				t.Errorf("admitted with reason %q", reason)
			}
			for _, w := range tc.want {
				if !strings.Contains(reason, w) {
					t.Errorf("reason %q does not contain %q", reason, w)
				}
			}
		})
	}
}

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
