package globalbench

import (
	"context"
	"fmt"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/phalanx-sched/phalanx/internal/global"
	"github.com/phalanx-sched/phalanx/internal/queue"
)

const (
	// tierStarvedAfter is phalanx-global's --starved-after default.
	tierStarvedAfter = 10 * time.Minute
	// doneRetention: a finished job's binding stays on the plane this long
	// (the tier reads it, and skips it) before it is cleaned up.
	doneRetention = 10 * time.Minute
	// drainLimit bounds the run after the window: past it the run has not
	// ended and fails.
	drainLimit = 7 * 24 * time.Hour
)

// runResult is one simulated run of one dispatcher.
type runResult struct {
	Dispatcher string
	Members    int
	Seed       uint64
	Jobs       int
	// Passes, their wall time in total and the longest one; Decisions
	// are verdicts, Dispatched the jobs sent to a member.
	Passes               int
	PassWall, LongestOne time.Duration
	Decisions            int
	Dispatched           int
	// Waits are each job's time from submission to dispatch, simulated.
	Waits []time.Duration
	// GPUSeconds ran, over Span (first submission to last end) of
	// Capacity GPUs.
	GPUSeconds float64
	Span       time.Duration
	Capacity   int64
	// BusyUsed and BusyOffered are GPU-seconds used and held while some
	// job waited.
	BusyUsed, BusyOffered float64
	// TeamGPUSeconds ran per team while every team had a job waiting
	// (Contended of simulated time).
	TeamGPUSeconds []float64
	Contended      time.Duration
	// Wall is the whole run's wall time (simulation included).
	Wall time.Duration
	// jobs are the run's jobs as they ended (for the invariants' tests).
	jobs []*simJob
}

// sim is one run's state.
type sim struct {
	o       Options
	members *standIns
	jobs    []*simJob
	byUID   map[string]*simJob
	live    []*simJob
	next    int
	done    int
	// teamUsed are the GPUs running per team.
	teamUsed []int64
	res      runResult
}

// simulate runs the job stream of seed on members stand-ins with the
// dispatcher mk returns, tick after tick, until every job is done. An
// error says which invariant broke: a job dispatched twice or to an
// unknown member, a member sent more than it holds, or a run that does not
// end.
func simulate(ctx context.Context, o Options, members int, seed uint64, mk func(*clocktesting.FakePassiveClock) dispatcher) (runResult, error) {
	wallStart := time.Now()
	clk := clocktesting.NewFakePassiveClock(epoch)
	s := &sim{o: o, members: newStandIns(members, o.GPUs), jobs: stream(o, members, seed), byUID: map[string]*simJob{},
		teamUsed: make([]int64, len(o.Weights))}
	d := mk(clk)
	s.res = runResult{Dispatcher: d.Name(), Members: members, Seed: seed, Capacity: int64(members) * o.GPUs,
		TeamGPUSeconds: make([]float64, len(o.Weights))}
	s.res.Jobs = len(s.jobs)
	for _, j := range s.jobs {
		s.byUID[string(j.UID)] = j
	}
	for now := time.Duration(0); s.done < len(s.jobs); now += o.Tick {
		if now > o.Window+drainLimit {
			return s.res, fmt.Errorf("%s on %d members, seed %d: %d of %d jobs not done %v after the window", d.Name(), members, seed, len(s.jobs)-s.done, len(s.jobs), drainLimit)
		}
		if err := ctx.Err(); err != nil {
			return s.res, err
		}
		clk.SetTime(epoch.Add(now))
		if err := s.advance(now); err != nil {
			return s.res, fmt.Errorf("%s on %d members, seed %d: %w", d.Name(), members, seed, err)
		}
		s.sample()
		w := global.World{Queues: teamQueues(o.Weights), Members: s.members.members, Jobs: s.world()}
		t := time.Now()
		verdicts := d.Pass(ctx, w, s.members)
		took := time.Since(t)
		s.res.Passes++
		s.res.PassWall += took
		s.res.LongestOne = max(s.res.LongestOne, took)
		if err := s.apply(now, verdicts); err != nil {
			return s.res, fmt.Errorf("%s on %d members, seed %d: %w", d.Name(), members, seed, err)
		}
	}
	if u := s.members.usedGPUs(); u != 0 {
		return s.res, fmt.Errorf("%s on %d members, seed %d: every job done but %d GPUs still taken", d.Name(), members, seed, u)
	}
	s.finish()
	s.res.jobs = s.jobs
	s.res.Wall = time.Since(wallStart)
	return s.res, nil
}

// advance ends and starts jobs due by now, then submits the jobs due.
func (s *sim) advance(now time.Duration) error {
	for _, j := range s.live {
		if j.Started && !j.Done && j.End <= now {
			j.Done = true
			s.members.finish(j)
			s.teamUsed[j.Team] -= j.GPUs
			s.done++
		}
	}
	for _, j := range s.live {
		if j.Member != "" && !j.Started && j.Start <= now {
			if err := s.members.start(j); err != nil {
				return err
			}
			j.Started = true
			s.teamUsed[j.Team] += j.GPUs
		}
	}
	kept := s.live[:0]
	for _, j := range s.live {
		if !j.Done || now-j.End < doneRetention {
			kept = append(kept, j)
		}
	}
	s.live = kept
	for ; s.next < len(s.jobs) && s.jobs[s.next].Submit <= now; s.next++ {
		s.live = append(s.live, s.jobs[s.next])
	}
	return nil
}

// sample counts the tick's GPU-seconds: used while some job waits, and per
// team while every team has a job waiting.
func (s *sim) sample() {
	waiting := make([]int, len(s.o.Weights))
	someWaiting := false
	for _, j := range s.live {
		if j.Member == "" {
			waiting[j.Team]++
			someWaiting = true
		}
	}
	tick := s.o.Tick.Seconds()
	if someWaiting {
		s.res.BusyUsed += tick * float64(s.members.usedGPUs())
		s.res.BusyOffered += tick * float64(s.res.Capacity)
	}
	for _, n := range waiting {
		if n == 0 {
			return
		}
	}
	s.res.Contended += s.o.Tick
	for t, used := range s.teamUsed {
		s.res.TeamGPUSeconds[t] += tick * float64(used)
	}
}

func (s *sim) world() []*global.Job {
	out := make([]*global.Job, len(s.live))
	for i, j := range s.live {
		out[i] = j.Job
	}
	return out
}

// apply dispatches the jobs the verdicts send, each whole to one member.
func (s *sim) apply(now time.Duration, verdicts []global.Verdict) error {
	s.res.Decisions += len(verdicts)
	for _, v := range verdicts {
		if v.Reason != global.Dispatched {
			continue
		}
		j := s.byUID[string(v.Job.UID)]
		switch {
		case j == nil:
			return fmt.Errorf("verdict for job %s, which was never submitted", v.Job.Key)
		case v.Move:
			return fmt.Errorf("job %s moved to %s, but moves are off", j.Name, v.Member)
		case j.Member != "":
			return fmt.Errorf("job %s dispatched to %s, but it was dispatched to %s already", j.Name, v.Member, j.Member)
		case s.members.member(v.Member) == nil:
			return fmt.Errorf("job %s dispatched to %q, which is no member", j.Name, v.Member)
		}
		j.Member, j.Since = v.Member, epoch.Add(now)
		j.Dispatched, j.Start = now, now+s.o.Delay
		j.End = j.Start + j.Run
		s.res.Dispatched++
	}
	return nil
}

// finish totals the run's figures once every job is done.
func (s *sim) finish() {
	var last time.Duration
	for _, j := range s.jobs {
		s.res.Waits = append(s.res.Waits, j.Dispatched-j.Submit)
		s.res.GPUSeconds += float64(j.GPUs) * j.Run.Seconds()
		last = max(last, j.End)
	}
	if len(s.jobs) > 0 {
		s.res.Span = last - s.jobs[0].Submit
	}
}

func teamQueues(weights []int32) []queue.Queue {
	out := make([]queue.Queue, len(weights))
	for i, w := range weights {
		out[i] = queue.Queue{Name: team(i), Weight: w, Reclaimable: true, Open: true}
	}
	return out
}
