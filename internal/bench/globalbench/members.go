package globalbench

import (
	"context"
	"fmt"

	"github.com/phalanx-sched/phalanx/internal/global"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// standIns are the members: each answers as a member planner on plain
// resources would, whole sets that fit in its allocatable less the jobs
// running there and the assumed ones of the ask. The simulation starts and
// ends jobs on them in simulated time.
type standIns struct {
	members []*global.Member
	byName  map[string]*global.Member
	used    map[string]resources.List
	// calls counts estimator calls (one per job asked about).
	calls int
}

func newStandIns(n int, gpusEach int64) *standIns {
	s := &standIns{byName: map[string]*global.Member{}, used: map[string]resources.List{}}
	for i := range n {
		name := fmt.Sprintf("member-%02d", i+1)
		m := &global.Member{Name: name, Ready: true, Allocatable: gpus(gpusEach)}
		s.members = append(s.members, m)
		s.byName[name] = m
		s.used[name] = resources.List{}
	}
	return s
}

func (s *standIns) member(name string) *global.Member { return s.byName[name] }

// free is a member's room after the jobs running there and assumed.
func (s *standIns) free(name string, assumed []*global.Job) resources.List {
	m := s.member(name)
	if m == nil {
		return resources.List{}
	}
	free := m.Allocatable.Clone()
	free.Sub(s.used[name])
	for _, j := range assumed {
		free.Sub(j.Request)
	}
	return free
}

// Sets implements global.Estimator.
func (s *standIns) Sets(_ context.Context, job *global.Job, asks []global.Ask) map[string]global.Answer {
	s.calls++
	out := make(map[string]global.Answer, len(asks))
	for _, a := range asks {
		m := s.member(a.Member)
		if m == nil {
			out[a.Member] = global.Answer{Err: fmt.Errorf("member %s is not one of the stand-ins", a.Member)}
			continue
		}
		out[a.Member] = global.Answer{Sets: s.copies(m, job.Request, a.Assumed)}
	}
	return out
}

// copies is free(...).Copies(req) without building the free list: the
// estimator is asked once per waiting job and member in every pass.
func (s *standIns) copies(m *global.Member, req resources.List, assumed []*global.Job) int32 {
	n := int64(1 << 20)
	for r, want := range req {
		if want <= 0 {
			continue
		}
		room := m.Allocatable[r] - s.used[m.Name][r]
		for _, j := range assumed {
			room -= j.Request[r]
		}
		n = min(n, max(room, 0)/want)
	}
	return int32(n)
}

// start takes a job's room on its member; it fails when the room is not
// there (a dispatcher sent more than the member holds).
func (s *standIns) start(j *simJob) error {
	room := s.free(j.Member, nil)
	if !room.Fits(j.Request) {
		return fmt.Errorf("job %s (%s) starts on member %s with only %s free", j.Name, j.Request, j.Member, room)
	}
	s.used[j.Member].Add(j.Request)
	return nil
}

func (s *standIns) finish(j *simJob) { s.used[j.Member].Sub(j.Request) }

// usedGPUs is the GPUs running on every member.
func (s *standIns) usedGPUs() int64 {
	var n int64
	for _, u := range s.used {
		n += u[gpu]
	}
	return n
}
