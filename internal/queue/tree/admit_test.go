package tree

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
