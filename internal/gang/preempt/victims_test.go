package preempt

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

func victim(key string, prio int32, members int, gpus int64, node string) Victim {
	use := resources.List{"nvidia.com/gpu": gpus}
	return Victim{Key: key, Priority: prio, Members: members, Started: time.Unix(100, 0),
		OnNode: map[string]Usage{node: {Request: use, Pods: int64(members)}}, Total: use.Clone()}
}

// needGPUs is a planner stand-in: the gang fits when the victims free at
// least n GPUs in all.
func needGPUs(n int64) func([]Victim) bool {
	return func(vs []Victim) bool {
		var freed int64
		for _, u := range Freed(vs) {
			freed += u.Request["nvidia.com/gpu"]
		}
		return freed >= n
	}
}

// needOnOneNode: the gang fits when some node gets n GPUs back.
func needOnOneNode(n int64) func([]Victim) bool {
	return func(vs []Victim) bool {
		for _, u := range Freed(vs) {
			if u.Request["nvidia.com/gpu"] >= n {
				return true
			}
		}
		return false
	}
}

func keysOf(vs []Victim) []string {
	out := []string{}
	for _, v := range vs {
		out = append(out, v.Key)
	}
	return out
}

func TestChooseVictims(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cands []Victim
		fits  func([]Victim) bool
		want  []string // nil: no set of victims lets the gang fit
	}{
		{
			name:  "lowest priority first",
			cands: []Victim{victim("p2", 2, 4, 4, "a"), victim("p1", 1, 4, 4, "b")},
			fits:  needGPUs(4),
			want:  []string{"p1"},
		},
		{
			name:  "one 4-gang rather than two 2-gangs",
			cands: []Victim{victim("two-a", 1, 2, 2, "a"), victim("two-b", 1, 2, 2, "a"), victim("four", 1, 4, 4, "b")},
			fits:  needGPUs(4),
			want:  []string{"four"},
		},
		{
			name:  "the smallest single victim that suffices",
			cands: []Victim{victim("eight", 1, 8, 8, "a"), victim("four", 1, 4, 4, "b")},
			fits:  needGPUs(3),
			want:  []string{"four"},
		},
		{
			name:  "several when no single one suffices",
			cands: []Victim{victim("x", 1, 2, 2, "a"), victim("y", 1, 2, 2, "b"), victim("z", 1, 2, 2, "c")},
			fits:  needGPUs(5),
			want:  []string{"x", "y", "z"},
		},
		{
			name:  "an unneeded lower-priority victim is dropped",
			cands: []Victim{victim("low", 1, 1, 1, "a"), victim("mid", 2, 4, 4, "b")},
			fits:  needGPUs(4),
			want:  []string{"mid"},
		},
		{
			name:  "capacity freed on the wrong nodes does not count",
			cands: []Victim{victim("a1", 1, 2, 2, "a"), victim("b1", 1, 2, 2, "b"), victim("c4", 2, 4, 4, "c")},
			fits:  needOnOneNode(4),
			want:  []string{"c4"},
		},
		{
			name:  "nothing lets it fit",
			cands: []Victim{victim("x", 1, 2, 2, "a")},
			fits:  needGPUs(4),
		},
		{name: "no candidates", fits: needGPUs(1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ChooseVictims(tc.cands, tc.fits)
			if tc.want == nil {
				if got != nil {
					t.Fatalf("victims %v, want none", keysOf(got))
				}
				return
			}
			if !reflect.DeepEqual(keysOf(got), tc.want) {
				t.Fatalf("victims %v, want %v", keysOf(got), tc.want)
			}
			if !tc.fits(got) {
				t.Fatal("the chosen victims do not let the gang fit")
			}
		})
	}
}

func TestFreedSumsPerNode(t *testing.T) {
	got := Freed([]Victim{victim("x", 1, 2, 2, "a"), victim("y", 1, 1, 1, "a"), victim("z", 1, 1, 1, "b")})
	if fmt.Sprint(got["a"].Request) != "nvidia.com/gpu=3" || got["a"].Pods != 3 || got["b"].Pods != 1 {
		t.Fatalf("Freed = %v", got)
	}
}

// TestSingleMembersOfAChosenGang: a member evicted alone (disruptionMode
// single) is dropped when its whole gang is a victim too: the gang frees it
// already, and it is not counted twice.
func TestSingleMembersOfAChosenGang(t *testing.T) {
	whole := victim("ns/g", 1, 4, 4, "n1")
	member := victim("ns/g/member:p3", 1, 1, 1, "n1")
	member.Of = whole.Key
	plain := victim("ns/pod:x", 0, 1, 1, "n2")

	freed := Freed([]Victim{whole, member, plain})
	if got := freed["n1"].Request["nvidia.com/gpu"]; got != 4 || freed["n1"].Pods != 4 {
		t.Errorf("freed on n1 = %v, want the whole gang's 4 GPUs and 4 pods, its member not again", freed["n1"])
	}
	if got := freed["n2"].Request["nvidia.com/gpu"]; got != 1 {
		t.Errorf("freed on n2 = %v, want the plain pod's GPU", freed["n2"])
	}

	// One member suffices for 1 GPU: evicting it alone is the smaller cost.
	if got := keysOf(ChooseVictims([]Victim{whole, member}, needOnOneNode(1))); !reflect.DeepEqual(got, []string{member.Key}) {
		t.Errorf("need 1 GPU: victims %v, want the single member", got)
	}
	// Four GPUs take the whole gang, which covers its member.
	if got := keysOf(ChooseVictims([]Victim{member, whole}, needOnOneNode(4))); !reflect.DeepEqual(got, []string{whole.Key}) {
		t.Errorf("need 4 GPUs: victims %v, want the whole gang only", got)
	}
	if got := ChooseVictims(nil, needGPUs(0)); got != nil {
		t.Errorf("no candidates: victims %v, want none", got)
	}
}
