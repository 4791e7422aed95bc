package tree

import (
	"reflect"
	"strings"
	"testing"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

func gang(key, queue string, prio int32, created int64, use resources.List) Gang {
	return Gang{Key: key, Queue: queue, Priority: prio, CreatedUnix: created, Usage: use, Members: 4, MinMember: 4}
}

// usageOfGangs sums the running gangs per queue, so tests state gangs once.
func usageOfGangs(running []Gang) map[string]resources.List {
	out := map[string]resources.List{}
	for _, g := range running {
		if out[g.Queue] == nil {
			out[g.Queue] = resources.List{}
		}
		out[g.Queue].Add(g.Usage)
	}
	return out
}

func keys(gs []Gang) []string {
	if gs == nil {
		return nil
	}
	out := []string{}
	for _, g := range gs {
		out = append(out, g.Key)
	}
	return out
}

func TestVictims(t *testing.T) {
	notReclaimable := func(qq Queue) Queue { qq.Reclaimable = false; return qq }
	withG := func(qq Queue, g resources.List) Queue { qq.Guarantee = g; return qq }
	flat := []Queue{q("s", "", 1), q("v1", "", 1), q("v2", "", 1), notReclaimable(q("nr", "", 1)), withG(q("gq", "", 1), cpu(6000))}
	cases := []struct {
		name     string
		queues   []Queue
		starved  string
		need     resources.List
		running  []Gang
		deserved map[string]resources.List
		want     []string // nil = impossible
		reason   string
	}{
		{
			name: "lowest priority first, whole gang", queues: flat, starved: "s", need: cpu(3000),
			running:  []Gang{gang("hi", "v1", 10, 5, cpu(4000)), gang("lo", "v1", 1, 1, cpu(4000)), gang("mid", "v1", 5, 9, cpu(4000))},
			deserved: map[string]resources.List{"s": cpu(8000), "v1": cpu(4000)},
			want:     []string{"lo"},
		},
		{
			name: "newest first within a priority", queues: flat, starved: "s", need: cpu(4000),
			running:  []Gang{gang("old", "v1", 0, 1, cpu(4000)), gang("new", "v1", 0, 9, cpu(4000)), gang("mid", "v1", 0, 5, cpu(4000))},
			deserved: map[string]resources.List{"s": cpu(8000), "v1": cpu(4000)},
			want:     []string{"new"},
		},
		{
			name: "one covering gang over several newer small ones", queues: flat, starved: "s", need: cpu(4000),
			running: []Gang{
				gang("small1", "v1", 0, 9, cpu(2000)), gang("small2", "v1", 0, 8, cpu(2000)), gang("big", "v1", 0, 1, cpu(4000)),
				gang("base", "v1", 9, 0, cpu(8000)),
			},
			deserved: map[string]resources.List{"s": cpu(8000), "v1": cpu(4000)},
			want:     []string{"big"},
		},
		{
			name: "priority beats victim count", queues: flat, starved: "s", need: cpu(4000),
			running: []Gang{
				gang("small1", "v1", 0, 9, cpu(2000)), gang("small2", "v1", 0, 8, cpu(2000)), gang("big", "v1", 5, 1, cpu(4000)),
				gang("base", "v1", 9, 0, cpu(8000)),
			},
			deserved: map[string]resources.List{"s": cpu(8000), "v1": cpu(4000)},
			want:     []string{"small1", "small2"},
		},
		{
			name: "unneeded lower-priority victims are dropped", queues: flat, starved: "s", need: cpu(6000),
			running: []Gang{
				gang("tiny", "v1", 0, 9, cpu(1000)), gang("big", "v1", 1, 1, cpu(6000)),
				gang("base", "v1", 9, 0, cpu(8000)),
			},
			deserved: map[string]resources.List{"s": cpu(8000), "v1": cpu(4000)},
			want:     []string{"big"},
		},
		{
			name: "only reclaimable queues above deserved", queues: flat, starved: "s", need: cpu(4000),
			running: []Gang{
				gang("nr-low", "nr", 0, 9, cpu(8000)),  // not reclaimable
				gang("v2-low", "v2", 0, 9, cpu(4000)),  // v2 at its deserved
				gang("s-own", "s", 0, 9, cpu(1000)),    // the starved queue itself
				gang("v1-high", "v1", 7, 1, cpu(4000)), // the one eligible
				gang("v1-base", "v1", 9, 0, cpu(8000)),
			},
			deserved: map[string]resources.List{"s": cpu(8000), "v1": cpu(8000), "v2": cpu(4000), "nr": cpu(1000)},
			want:     []string{"v1-high"},
		},
		{
			name: "keeping queues at deserved beats priority", queues: flat, starved: "s", need: cpu(4000),
			running: []Gang{
				gang("v1-low", "v1", 0, 9, cpu(4000)), gang("v1-other", "v1", 0, 8, cpu(4000)), // v1 only 2000m above deserved
				gang("v2-high", "v2", 5, 9, cpu(4000)), gang("v2-base", "v2", 9, 1, cpu(2000)), // v2 4000m above
			},
			deserved: map[string]resources.List{"s": cpu(8000), "v1": cpu(6000), "v2": cpu(2000)},
			want:     []string{"v2-high"},
		},
		{
			name: "below deserved only when there is no other way", queues: flat, starved: "s", need: cpu(4000),
			running:  []Gang{gang("v1-a", "v1", 0, 9, cpu(4000)), gang("v1-b", "v1", 0, 8, cpu(4000))},
			deserved: map[string]resources.List{"s": cpu(8000), "v1": cpu(6000)},
			want:     []string{"v1-a"},
		},
		{
			name: "never below guarantee", queues: flat, starved: "s", need: cpu(4000),
			// gq is above its deserved (2000m) but evicting 4000m takes it to 4000m < guarantee 6000m.
			running:  []Gang{gang("g1", "gq", 0, 9, cpu(4000)), gang("g2", "gq", 0, 8, cpu(4000))},
			deserved: map[string]resources.List{"s": cpu(8000), "gq": cpu(2000)},
			want:     nil, reason: "below its guarantee",
		},
		{
			name: "nil when need cannot be covered", queues: flat, starved: "s", need: cpu(8000),
			running:  []Gang{gang("a", "v1", 0, 9, cpu(2000)), gang("b", "v1", 0, 8, cpu(2000)), gang("base", "v1", 0, 1, cpu(2000))},
			deserved: map[string]resources.List{"s": cpu(8000), "v1": cpu(0)},
			want:     nil,
		},
		{
			name: "starved queue may not reclaim beyond its deserved", queues: flat, starved: "s", need: cpu(4000),
			running:  []Gang{gang("mine", "s", 0, 1, cpu(6000)), gang("v", "v1", 0, 9, cpu(8000))},
			deserved: map[string]resources.List{"s": cpu(8000), "v1": cpu(0)},
			want:     nil, reason: "would exceed its deserved 8000m",
		},
		{
			name: "gangs that do not hold the needed resource are ignored", queues: flat, starved: "s", need: resources.List{gpu: 2},
			running:  []Gang{gang("cpu-only", "v1", 0, 9, cpu(8000)), gang("gpu", "v1", 3, 1, cpuGPU(1000, 4))},
			deserved: map[string]resources.List{"s": cpuGPU(8000, 4), "v1": cpu(0)},
			want:     []string{"gpu"},
		},
		{
			name: "sibling under a shared parent is a victim even though the parent is under deserved",
			queues: []Queue{
				q("dept", "", 1), q("s", "dept", 1), q("sib", "dept", 1),
				q("other", "", 1), q("o1", "other", 1), q("o2", "other", 1),
			},
			starved: "s", need: cpu(4000),
			running: []Gang{
				gang("o1-low", "o1", 0, 9, cpu(8000)), // o1 above deserved, but its parent "other" is not
				gang("sib-mid", "sib", 3, 9, cpu(4000)), gang("sib-base", "sib", 9, 1, cpu(4000)),
			},
			deserved: map[string]resources.List{
				"dept": cpu(8000), "s": cpu(4000), "sib": cpu(4000),
				"other": cpu(8000), "o1": cpu(4000), "o2": cpu(4000),
			},
			want: []string{"sib-mid"},
		},
		{
			name: "queue in another subtree whose parent is also above deserved",
			queues: []Queue{
				q("dept", "", 1), q("s", "dept", 1),
				q("other", "", 1), q("o1", "other", 1), notReclaimable(q("o-nr", "other", 1)),
			},
			starved: "s", need: cpu(4000),
			running:  []Gang{gang("o1-low", "o1", 0, 9, cpu(12000))},
			deserved: map[string]resources.List{"dept": cpu(8000), "s": cpu(8000), "other": cpu(8000), "o1": cpu(8000)},
			want:     []string{"o1-low"},
		},
		{
			name: "a non-reclaimable parent protects its whole subtree",
			queues: []Queue{
				q("dept", "", 1), q("s", "dept", 1),
				notReclaimable(q("other", "", 1)), q("o1", "other", 1),
			},
			starved: "s", need: cpu(4000),
			running:  []Gang{gang("o1-low", "o1", 0, 9, cpu(12000))},
			deserved: map[string]resources.List{"dept": cpu(8000), "s": cpu(8000), "other": cpu(8000), "o1": cpu(8000)},
			want:     nil, reason: "no running gang in a reclaimable queue",
		},
		{
			name: "empty need needs no victims", queues: flat, starved: "s", need: resources.List{},
			deserved: map[string]resources.List{"s": cpu(8000)},
			want:     []string{},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := mustBuild(t, tc.queues...)
			allocated := usageOfGangs(tc.running)
			got, reason := tr.PlanReclaim(tc.starved, tc.need, tc.running, allocated, tc.deserved)
			if !reflect.DeepEqual(keys(got), tc.want) {
				t.Fatalf("victims = %v (%q), want %v", keys(got), reason, tc.want)
			}
			if v := tr.Victims(tc.starved, tc.need, tc.running, allocated, tc.deserved); !reflect.DeepEqual(v, got) {
				t.Errorf("Victims = %v, PlanReclaim = %v", keys(v), keys(got))
			}
			if tc.want == nil && reason == "" {
				t.Error("no reason for an impossible reclaim")
			}
			if tc.reason != "" && !strings.Contains(reason, tc.reason) {
				t.Errorf("reason %q does not contain %q", reason, tc.reason)
			}
			for _, g := range got {
				orig := false
				for _, r := range tc.running {
					if reflect.DeepEqual(g, r) {
						orig = true
					}
				}
				if !orig {
					t.Errorf("victim %v is not a whole running gang", g)
				}
			}
		})
	}
}
