package globalbench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/phalanx-sched/phalanx/internal/global"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

func TestStandInsAnswerWholeSetsInTheFreeRoom(t *testing.T) {
	assumed := func(sizes ...int64) []*global.Job {
		var out []*global.Job
		for i, n := range sizes {
			out = append(out, newJob(100+i, 0, n, 0, time.Minute).Job)
		}
		return out
	}
	cases := []struct {
		name    string
		used    int64
		request resources.List
		assumed []*global.Job
		want    int32
	}{
		{"empty member, 8-GPU sets", 0, gpus(8), nil, 8},
		{"running jobs take room", 40, gpus(8), nil, 3},
		{"assumed jobs take room too", 40, gpus(8), assumed(8, 4), 1},
		{"a set larger than the room", 40, gpus(32), nil, 0},
		{"over-assumed room is none, not negative", 60, gpus(4), assumed(16), 0},
		{"a resource the member lacks", 0, resources.List{"example.com/fpga": 1}, nil, 0},
		{"a request of nothing is capped", 0, resources.List{}, nil, 1 << 20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newStandIns(2, 64)
			s.used["member-01"][gpu] = c.used
			job := &global.Job{Request: c.request}
			got := s.Sets(context.Background(), job, []global.Ask{{Member: "member-01", Assumed: c.assumed}, {Member: "member-02"}})
			if got["member-01"].Err != nil || got["member-01"].Sets != c.want {
				t.Fatalf("member-01 answered %+v, want %d sets", got["member-01"], c.want)
			}
			// The other member is untouched by member-01's jobs.
			if want := int32(resources.List{gpu: 64}.Copies(c.request, 1<<20)); got["member-02"].Sets != want {
				t.Fatalf("member-02 answered %+v, want %d sets", got["member-02"], want)
			}
			if s.calls != 1 {
				t.Fatalf("%d calls counted, want 1", s.calls)
			}
		})
	}
}

func TestStandInsFailAnUnknownMember(t *testing.T) {
	s := newStandIns(1, 64)
	got := s.Sets(context.Background(), &global.Job{Request: gpus(4)}, []global.Ask{{Member: "member-09"}})
	if err := got["member-09"].Err; err == nil || !strings.Contains(err.Error(), "member-09") {
		t.Fatalf("answer %+v, want an error naming member-09", got["member-09"])
	}
	if room := s.free("member-09", nil); !room.IsZero() {
		t.Fatalf("an unknown member's room is %v, want none", room)
	}
}

func TestStandInsStartOnlyWithinTheRoom(t *testing.T) {
	s := newStandIns(1, 64)
	a, b, c := newJob(0, 0, 32, 0, time.Minute), newJob(1, 0, 32, 0, time.Minute), newJob(2, 0, 4, 0, time.Minute)
	for _, j := range []*simJob{a, b, c} {
		j.Member = "member-01"
	}
	if err := s.start(a); err != nil {
		t.Fatal(err)
	}
	if err := s.start(b); err != nil {
		t.Fatal(err)
	}
	err := s.start(c)
	if err == nil || !strings.Contains(err.Error(), "job-00002") || !strings.Contains(err.Error(), "member-01") {
		t.Fatalf("a third job on a full member: %v, want an error naming the job and the member", err)
	}
	if s.usedGPUs() != 64 {
		t.Fatalf("used %d GPUs after the refused start, want 64", s.usedGPUs())
	}
	s.finish(a)
	if err := s.start(c); err != nil || s.usedGPUs() != 36 {
		t.Fatalf("after a job finished: start %v, used %d, want 36", err, s.usedGPUs())
	}
}

func TestNewStandInsNamesMembersInOrder(t *testing.T) {
	s := newStandIns(12, 64)
	if len(s.members) != 12 || s.members[0].Name != "member-01" || s.members[11].Name != "member-12" {
		t.Fatalf("members %v", s.members)
	}
	for _, m := range s.members {
		if !m.Ready || m.Allocatable[gpu] != 64 || s.member(m.Name) != m {
			t.Fatalf("member %+v", m)
		}
	}
}
