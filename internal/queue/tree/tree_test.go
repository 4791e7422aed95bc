package tree

import (
	"math/rand"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

const gpu v1.ResourceName = "nvidia.com/gpu"

func cpu(m int64) resources.List { return resources.List{v1.ResourceCPU: m} }

func cpuGPU(m, g int64) resources.List { return resources.List{v1.ResourceCPU: m, gpu: g} }

func q(name, parent string, weight int32) Queue {
	return Queue{Name: name, Parent: parent, Weight: weight, Open: true, Reclaimable: true}
}

func mustBuild(t *testing.T, qs ...Queue) *Tree {
	t.Helper()
	tr, errs := Build(qs)
	if len(errs) > 0 {
		t.Fatalf("Build: unexpected errors %v", errs)
	}
	return tr
}

func errQueues(errs []QueueError) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Queue)
	}
	return out
}

func TestBuildErrors(t *testing.T) {
	withG := func(qq Queue, g, c resources.List) Queue { qq.Guarantee, qq.Capability = g, c; return qq }
	cases := []struct {
		name      string
		queues    []Queue
		wantNames []string
		wantErrs  map[string]string // queue -> substring of its reason
	}{
		{
			name:      "cycle a->b->a, sibling kept",
			queues:    []Queue{q("a", "b", 1), q("b", "a", 1), q("ok", "", 1), q("under-a", "a", 1)},
			wantNames: []string{"ok"},
			wantErrs:  map[string]string{"a": "cycle: a -> b -> a", "b": "cycle: b -> a -> b", "under-a": `parent "a" is invalid`},
		},
		{
			name:      "self parent",
			queues:    []Queue{q("a", "a", 1), q("ok", "", 1)},
			wantNames: []string{"ok"},
			wantErrs:  map[string]string{"a": "cycle: a -> a"},
		},
		{
			name:      "missing parent drops subtree",
			queues:    []Queue{q("a", "ghost", 1), q("a1", "a", 1), q("a11", "a1", 1), q("ok", "", 1)},
			wantNames: []string{"ok"},
			wantErrs:  map[string]string{"a": `parent "ghost" does not exist`, "a1": `parent "a" is invalid`, "a11": `parent "a1" is invalid`},
		},
		{
			name:      "guarantee above own capability",
			queues:    []Queue{withG(q("a", "", 1), cpu(8000), cpu(4000)), q("ok", "", 1)},
			wantNames: []string{"ok"},
			wantErrs:  map[string]string{"a": "guarantee cpu 8000m exceeds its own capability 4000m"},
		},
		{
			name: "child guarantee above parent capability",
			queues: []Queue{
				withG(q("p", "", 1), nil, cpu(4000)),
				withG(q("bad", "p", 1), cpu(5000), nil),
				withG(q("good", "p", 1), cpu(4000), nil),
			},
			wantNames: []string{"good", "p"},
			wantErrs:  map[string]string{"bad": `guarantee cpu 5000m exceeds the capability 4000m of parent "p"`},
		},
		{
			name: "grandchild guarantee above grandparent capability",
			queues: []Queue{
				withG(q("gp", "", 1), nil, resources.List{gpu: 8}),
				q("p", "gp", 1),
				withG(q("c", "p", 1), resources.List{gpu: 16}, nil),
			},
			wantNames: []string{"gp", "p"},
			wantErrs:  map[string]string{"c": `guarantee nvidia.com/gpu 16 exceeds the capability 8 of ancestor "gp"`},
		},
		{
			name:      "duplicate, negative weight, negative amount, empty name",
			queues:    []Queue{q("d", "", 1), q("d", "", 2), q("w", "", -1), withG(q("n", "", 1), cpu(-1), nil), q("", "", 1), q("ok", "", 0)},
			wantNames: []string{"ok"},
			wantErrs:  map[string]string{"d": "defined 2 times", "w": "weight -1", "n": "guarantee cpu -1m is negative", "": "needs a name"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr, errs := Build(tc.queues)
			if got := tr.Names(); !reflect.DeepEqual(got, tc.wantNames) {
				t.Errorf("names = %v, want %v", got, tc.wantNames)
			}
			if len(errs) != len(tc.wantErrs) {
				t.Errorf("errors = %v, want one per queue in %v", errs, tc.wantErrs)
			}
			for _, e := range errs {
				want, ok := tc.wantErrs[e.Queue]
				if !ok {
					t.Errorf("unexpected error %v", e)
					continue
				}
				if !strings.Contains(e.Reason, want) {
					t.Errorf("error for %q = %q, want it to contain %q", e.Queue, e.Reason, want)
				}
				if e.Queue != "" && !strings.Contains(e.Error(), `"`+e.Queue+`"`) {
					t.Errorf("Error() %q does not name the queue", e.Error())
				}
			}
		})
	}
}

func TestBuildDeterministic(t *testing.T) {
	qs := []Queue{
		q("root", "", 1), q("a", "root", 2), q("b", "root", 1), q("a1", "a", 1),
		q("x", "y", 1), q("y", "x", 1), q("orphan", "none", 1), q("dup", "", 1), q("dup", "root", 3),
		{Name: "g", Parent: "root", Weight: 1, Guarantee: cpu(10), Capability: cpu(5)},
	}
	want, wantErrs := Build(qs)
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 50; i++ {
		shuffled := append([]Queue(nil), qs...)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		got, gotErrs := Build(shuffled)
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotErrs, wantErrs) {
			t.Fatalf("Build depends on input order:\n%v %v\nvs\n%v %v", got.Names(), gotErrs, want.Names(), wantErrs)
		}
	}
	if got := errQueues(wantErrs); !reflect.DeepEqual(got, []string{"dup", "g", "orphan", "x", "y"}) {
		t.Errorf("error queues = %v", got)
	}
}

func TestTreeAccessors(t *testing.T) {
	tr := mustBuild(t, q("research", "", 1), q("team-a", "research", 2), q("team-b", "research", 0), q("ops", "", 1))
	if got := tr.Ancestors("team-a"); !reflect.DeepEqual(got, []string{"research"}) {
		t.Errorf("Ancestors(team-a) = %v", got)
	}
	if got := tr.Ancestors("ops"); got != nil {
		t.Errorf("Ancestors(ops) = %v", got)
	}
	if tr.IsLeaf("research") || !tr.IsLeaf("team-a") || !tr.IsLeaf("ops") || tr.IsLeaf("nope") {
		t.Error("IsLeaf wrong")
	}
	if b, ok := tr.Get("team-b"); !ok || b.Weight != 1 {
		t.Errorf("Get(team-b) = %+v, %v; want weight defaulted to 1", b, ok)
	}
	if got := tr.Children("research"); !reflect.DeepEqual(got, []string{"team-a", "team-b"}) {
		t.Errorf("Children = %v", got)
	}
	if got := tr.Roots(); !reflect.DeepEqual(got, []string{"ops", "research"}) {
		t.Errorf("Roots = %v", got)
	}
	// Lists are copied in and out.
	in := []Queue{{Name: "c", Weight: 1, Capability: cpu(10)}}
	tc := mustBuild(t, in...)
	in[0].Capability[v1.ResourceCPU] = 99
	got, _ := tc.Get("c")
	got.Capability[v1.ResourceCPU] = 77
	if again, _ := tc.Get("c"); again.Capability[v1.ResourceCPU] != 10 {
		t.Errorf("capability mutated through aliasing: %v", again.Capability)
	}
}

func TestUsage(t *testing.T) {
	tr := mustBuild(t, q("r", "", 1), q("a", "r", 1), q("b", "r", 1), q("c", "", 1))
	u := tr.Usage(map[string]resources.List{
		"a": cpuGPU(1000, 1), "b": cpu(500), "c": cpu(7), "r": cpu(100000), "ghost": cpu(5),
	})
	want := map[string]resources.List{"r": cpuGPU(1500, 1), "a": cpuGPU(1000, 1), "b": cpu(500), "c": cpu(7)}
	if !reflect.DeepEqual(u, want) {
		t.Errorf("Usage = %v, want %v", u, want)
	}
}
