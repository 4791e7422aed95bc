package gang

import (
	"context"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/phalanx-sched/phalanx/internal/gang/consolidate"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/lifecycle"
)

// Two racks of two 2-CPU nodes; gang x runs on a1, gang y on b1, a2 and b2
// are free. A 2-member gang of 2 CPUs each, required in one rack, fits
// neither rack until one of x and y moves to the other rack's free node.
func TestManagerConsolidation(t *testing.T) {
	type runner struct {
		name       string
		node       string
		prio       int32
		started    time.Duration // before t0
		checkpoint time.Duration // before t0; 0: none
	}
	x := runner{name: "x", node: "a1", started: 3 * time.Hour}
	y := runner{name: "y", node: "b1", started: time.Hour}
	on := consolidate.Config{After: 5 * time.Minute, MinRuntime: 10 * time.Minute, PerHour: 2}
	for _, tc := range []struct {
		name    string
		c       consolidate.Config
		runners []runner
		a2Free  int64
		waited  time.Duration
		prio    int32
		// want: the pods evicted, the rack the gang reserves; nil: none.
		want     []string
		wantRack string
		wantNote string
	}{
		{name: "off", c: consolidate.Config{}, runners: []runner{x, y}, a2Free: 2000, waited: time.Hour},
		{name: "waited too little", c: on, runners: []runner{x, y}, a2Free: 2000, waited: 4 * time.Minute},
		{
			name: "the cheaper gang moves", c: on, runners: []runner{x, y}, a2Free: 2000, waited: 5 * time.Minute,
			want: []string{"y-0"}, wantRack: "r2",
		},
		{
			name: "a checkpoint makes the older gang cheaper", c: on, a2Free: 2000, waited: 5 * time.Minute,
			runners: []runner{{name: "x", node: "a1", started: 3 * time.Hour, checkpoint: time.Minute}, y},
			// x moves to b2; the gang takes rack r1.
			want: []string{"x-0"}, wantRack: "r1",
		},
		{
			name: "a gang within its min runtime stays", c: on, a2Free: 2000, waited: 5 * time.Minute,
			runners: []runner{x, {name: "y", node: "b1", started: time.Minute}},
			want:    []string{"x-0"}, wantRack: "r1",
		},
		{
			name: "a higher-priority gang stays", c: on, a2Free: 2000, waited: 5 * time.Minute,
			runners: []runner{x, {name: "y", node: "b1", prio: 5, started: time.Hour}},
			want:    []string{"x-0"}, wantRack: "r1",
		},
		{
			name: "no gang fits elsewhere", c: on, runners: []runner{x, y}, a2Free: 1000, waited: time.Hour,
			// Moving x leaves r1 with 2+1 CPUs: the gang does not fit;
			// moving y frees r2 but y fits nowhere else (a2 has 1 CPU).
			wantNote: "no consolidation: no rack can be freed by moving gangs that fit elsewhere now",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv()
			e.m.Consolidation = tc.c
			nodes := map[string]*fnode{
				"a1": {name: "a1", rack: "r1"}, "a2": {name: "a2", rack: "r1", free: tc.a2Free},
				"b1": {name: "b1", rack: "r2"}, "b2": {name: "b2", rack: "r2", free: 2000},
			}
			for _, r := range tc.runners {
				p := boundAtTime(mpod(r.name+"-0", 2000, r.prio), r.node, t0.Add(-r.started))
				spec := e.dir.gang(r.name, 1, r.prio, p)
				if r.checkpoint > 0 {
					spec.Annotations = map[string]string{consolidate.AnnotationCheckpointedAt: t0.Add(-r.checkpoint).Format(time.RFC3339)}
				}
				nodes[r.node].pods = append(nodes[r.node].pods, p)
			}
			c := &cluster{}
			for _, n := range []string{"a1", "a2", "b1", "b2"} {
				c.nodes = append(c.nodes, *nodes[n])
			}
			pods := members("w", 2, 2000, tc.prio)
			spec := e.dir.gang("w", 2, tc.prio, pods...)
			e.dir.pending[spec.Ref] = pods
			ctx := context.Background()
			attempt := func() *Attempt {
				a := e.attempt(spec, c)
				a.Topology = &Constraint{Tree: c.topology(), Required: "rack"}
				return a
			}
			if _, err := e.m.Plan(ctx, attempt()); err == nil {
				t.Fatal("planned with no rack free")
			}
			e.clk.Step(tc.waited)
			a := attempt()
			if _, err := e.m.Plan(ctx, a); err == nil {
				t.Fatal("planned with no rack free")
			}
			room, msg := e.m.MakeRoom(ctx, a)
			if tc.want == nil {
				if room != nil || len(e.fx.evictions) > 0 {
					t.Fatalf("consolidated: %q, evictions %+v", msg, e.fx.evictions)
				}
				if !strings.Contains(msg, tc.wantNote) {
					t.Errorf("note %q, want %q", msg, tc.wantNote)
				}
				return
			}
			if room == nil || len(e.fx.evictions) != len(tc.want) {
				t.Fatalf("no consolidation: %q, evictions %+v", msg, e.fx.evictions)
			}
			var evicted []string
			for _, ev := range e.fx.evictions {
				if ev.reason != ReasonConsolidated {
					t.Errorf("eviction reason %s", ev.reason)
				}
				evicted = append(evicted, ev.pods...)
			}
			if !reflect.DeepEqual(evicted, tc.want) {
				t.Fatalf("evicted %v, want %v", evicted, tc.want)
			}
			r, ok := e.m.ReservationOf(spec.Ref)
			if !ok || r.Kind != lifecycle.ReservationPreempting {
				t.Fatalf("the gang holds no reservation for the freed rack: %+v %v", r, ok)
			}
			var held []string
			for n := range r.Slots {
				held = append(held, n)
			}
			sort.Strings(held)
			wantNodes := map[string][]string{"r1": {"a1", "a2"}, "r2": {"b1", "b2"}}[tc.wantRack]
			if !reflect.DeepEqual(held, wantNodes) {
				t.Errorf("reserved %v, want %v", held, wantNodes)
			}
			if !strings.Contains(msg, "consolidating rack "+tc.wantRack) || !strings.Contains(msg, "GPU-seconds of work lost") {
				t.Errorf("message %q", msg)
			}
			if got := e.fx.evicted; len(got) != 1 || got[0] != ReasonConsolidated+"//1" {
				t.Errorf("evictions counted %v", got)
			}
			// The moved gang's new place, the other rack's free node, is
			// held for it.
			moved := ident.Ref{Namespace: "ns", Name: strings.TrimSuffix(tc.want[0], "-0")}
			mr, ok := e.m.ReservationOf(moved)
			wantNew := map[string]string{"r1": "b2", "r2": "a2"}[tc.wantRack]
			if !ok || mr.Kind != lifecycle.ReservationMoved || len(mr.Slots) != 1 || mr.Slots[wantNew] == nil {
				t.Errorf("moved gang %s holds %+v (%v), want its new place %s", moved, mr, ok, wantNew)
			}
			if got := heldCPU(e.m.Lifecycle, wantNew, ident.Ref{Name: "someone-else"}, 0); got != 2000 {
				t.Errorf("%s holds %d CPU against others, want 2000", wantNew, got)
			}
		})
	}
}
