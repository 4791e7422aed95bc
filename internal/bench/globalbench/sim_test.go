package globalbench

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/phalanx-sched/phalanx/internal/global"
)

// small is a configuration that runs in well under a second.
func small() Options {
	o := Defaults()
	o.Members, o.Runs, o.Window, o.Waiting, o.CostTime = []int{3}, 2, 40*time.Minute, []int{20}, time.Millisecond
	return o
}

// peakPerMember replays the jobs' intervals on their members and returns
// the most GPUs each member ran at once.
func peakPerMember(jobs []*simJob) map[string]int64 {
	type edge struct {
		at     time.Duration
		member string
		delta  int64
	}
	var edges []edge
	for _, j := range jobs {
		edges = append(edges, edge{j.Start, j.Member, j.GPUs}, edge{j.End, j.Member, -j.GPUs})
	}
	// At the same instant an end frees room before a start takes it.
	sort.Slice(edges, func(a, b int) bool {
		if edges[a].at != edges[b].at {
			return edges[a].at < edges[b].at
		}
		return edges[a].delta < edges[b].delta
	})
	used, peak := map[string]int64{}, map[string]int64{}
	for _, e := range edges {
		used[e.member] += e.delta
		peak[e.member] = max(peak[e.member], used[e.member])
	}
	return peak
}

// The invariants the figures rely on, for the tier and the baseline: the
// run ends with every job done, each job was dispatched once, whole, to a
// real member, started Delay after its dispatch and ran its run time, and
// no member ever ran more GPUs than it has.
func TestSimulateKeepsInvariants(t *testing.T) {
	o := small()
	for _, mk := range dispatchers {
		for seed := uint64(1); seed <= 3; seed++ {
			r, err := simulate(context.Background(), o, 3, seed, mk)
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			if r.Jobs == 0 || len(r.jobs) != r.Jobs {
				t.Fatalf("%s seed %d: %d jobs in the result, %d kept", r.Dispatcher, seed, r.Jobs, len(r.jobs))
			}
			if r.Dispatched != r.Jobs {
				t.Errorf("%s seed %d: %d dispatches for %d jobs, want one each", r.Dispatcher, seed, r.Dispatched, r.Jobs)
			}
			names := map[string]bool{"member-01": true, "member-02": true, "member-03": true}
			for _, j := range r.jobs {
				switch {
				case !names[j.Member]:
					t.Errorf("%s: job %s ended on %q, not a member", r.Dispatcher, j.Name, j.Member)
				case !j.Started || !j.Done:
					t.Errorf("%s: job %s started %v done %v at the end of the run", r.Dispatcher, j.Name, j.Started, j.Done)
				case j.Dispatched < j.Submit:
					t.Errorf("%s: job %s dispatched at %v before its submission at %v", r.Dispatcher, j.Name, j.Dispatched, j.Submit)
				case j.Start != j.Dispatched+o.Delay || j.End != j.Start+j.Run:
					t.Errorf("%s: job %s dispatched %v started %v ended %v, run %v", r.Dispatcher, j.Name, j.Dispatched, j.Start, j.End, j.Run)
				}
			}
			for m, peak := range peakPerMember(r.jobs) {
				if peak > o.GPUs {
					t.Errorf("%s seed %d: member %s ran %d GPUs at once, it has %d", r.Dispatcher, seed, m, peak, o.GPUs)
				}
			}
			if r.Passes == 0 || r.PassWall <= 0 || r.Decisions < r.Dispatched {
				t.Errorf("%s: %d passes in %v with %d decisions for %d dispatches", r.Dispatcher, r.Passes, r.PassWall, r.Decisions, r.Dispatched)
			}
		}
	}
}

// The run is deterministic per seed: the same seed makes the same
// dispatches, another seed other jobs.
func TestSimulateIsDeterministicPerSeed(t *testing.T) {
	o := small()
	place := func(seed uint64) []string {
		r, err := simulate(context.Background(), o, 3, seed, dispatchers[0])
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, j := range r.jobs {
			out = append(out, j.Name+"@"+j.Member+"@"+j.Dispatched.String())
		}
		return out
	}
	a, b, c := place(4), place(4), place(5)
	if strings.Join(a, ",") != strings.Join(b, ",") {
		t.Fatalf("seed 4 twice placed differently:\n%v\n%v", a, b)
	}
	if strings.Join(a, ",") == strings.Join(c, ",") {
		t.Fatalf("seeds 4 and 5 placed the same jobs the same way: %v", a)
	}
}

// brokenDispatcher breaks one invariant on purpose.
type brokenDispatcher struct {
	name string
	pass func(w global.World) []global.Verdict
}

func (b brokenDispatcher) Name() string { return b.name }

func (b brokenDispatcher) Pass(_ context.Context, w global.World, _ global.Estimator) []global.Verdict {
	return b.pass(w)
}

func waitingJobs(w global.World) []*global.Job {
	var out []*global.Job
	for _, j := range w.Jobs {
		if j.Member == "" {
			out = append(out, j)
		}
	}
	return out
}

// The simulation refuses the runs its figures could not be trusted on.
func TestSimulateReportsBrokenInvariants(t *testing.T) {
	o := small()
	o.Window = 2 * time.Hour
	sendAll := func(member string) func(global.World) []global.Verdict {
		return func(w global.World) []global.Verdict {
			var out []global.Verdict
			for _, j := range waitingJobs(w) {
				out = append(out, global.Verdict{Job: j, Member: member, Reason: global.Dispatched})
			}
			return out
		}
	}
	cases := []struct {
		name string
		pass func(global.World) []global.Verdict
		want string
	}{
		{"above a member's room", sendAll("member-01"), "starts on member member-01 with only"},
		{"unknown member", sendAll("elsewhere"), `dispatched to "elsewhere", which is no member`},
		{"twice", func(w global.World) []global.Verdict {
			var out []global.Verdict
			for _, j := range w.Jobs {
				out = append(out, global.Verdict{Job: j, Member: "member-02", Reason: global.Dispatched})
			}
			return out
		}, "was dispatched to member-02 already"},
		{"move", func(w global.World) []global.Verdict {
			if js := waitingJobs(w); len(js) > 0 {
				return []global.Verdict{{Job: js[0], Member: "member-01", Reason: global.Dispatched, Move: true}}
			}
			return nil
		}, "moves are off"},
		{"never dispatched: the run does not end", func(global.World) []global.Verdict { return nil }, "not done 168h0m0s after the window"},
		{"a job never submitted", func(global.World) []global.Verdict {
			return []global.Verdict{{Job: newJob(99999, 0, 4, 0, time.Minute).Job, Member: "member-01", Reason: global.Dispatched}}
		}, "which was never submitted"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mk := func(*clocktesting.FakePassiveClock) dispatcher { return brokenDispatcher{name: "broken", pass: c.pass} }
			_, err := simulate(context.Background(), o, 3, 1, mk)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			if !strings.Contains(err.Error(), "broken on 3 members, seed 1") {
				t.Fatalf("error %v does not name the dispatcher, members and seed", err)
			}
		})
	}
}

func TestSimulateStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := simulate(ctx, small(), 3, 1, dispatchers[0]); err != context.Canceled {
		t.Fatalf("error %v, want context.Canceled", err)
	}
}

// The tick's samples: busy GPU-seconds while anything waits, team shares
// only while every team waits.
func TestSampleCountsOnlyContendedTicks(t *testing.T) {
	o := small()
	o.Weights = []int32{2, 1}
	s := &sim{o: o, members: newStandIns(1, 64), teamUsed: []int64{16, 8}, res: runResult{Capacity: 64, TeamGPUSeconds: make([]float64, 2)}}
	s.members.used["member-01"][gpu] = 24
	a, b := newJob(0, 0, 4, 0, time.Minute), newJob(1, 1, 4, 0, time.Minute)
	tick := o.Tick.Seconds()

	s.live = []*simJob{a}
	s.sample()
	if s.res.BusyUsed != 24*tick || s.res.BusyOffered != 64*tick || s.res.Contended != 0 {
		t.Fatalf("one team waiting: busy %v/%v contended %v, want %v/%v and 0", s.res.BusyUsed, s.res.BusyOffered, s.res.Contended, 24*tick, 64*tick)
	}
	s.live = []*simJob{a, b}
	s.sample()
	if s.res.Contended != o.Tick || s.res.TeamGPUSeconds[0] != 16*tick || s.res.TeamGPUSeconds[1] != 8*tick {
		t.Fatalf("both waiting: contended %v team GPU-seconds %v", s.res.Contended, s.res.TeamGPUSeconds)
	}
	a.Member, b.Member = "member-01", "member-01"
	s.sample()
	if s.res.BusyUsed != 2*24*tick || s.res.Contended != o.Tick {
		t.Fatalf("nothing waiting still counted: busy %v contended %v", s.res.BusyUsed, s.res.Contended)
	}
}

// Finished jobs stay in the world for doneRetention, then leave it.
func TestAdvanceKeepsDoneJobsForTheRetention(t *testing.T) {
	o := small()
	j := newJob(0, 0, 8, 0, time.Minute)
	s := &sim{o: o, members: newStandIns(1, 64), jobs: []*simJob{j}, teamUsed: make([]int64, 3)}
	if err := s.advance(0); err != nil || len(s.live) != 1 {
		t.Fatalf("submitted at 0: live %d err %v", len(s.live), err)
	}
	j.Member, j.Dispatched, j.Start, j.End = "member-01", 0, o.Delay, o.Delay+j.Run
	if err := s.advance(o.Delay); err != nil || !j.Started || s.members.usedGPUs() != 8 || s.teamUsed[0] != 8 {
		t.Fatalf("at its start: started %v used %d team %d err %v", j.Started, s.members.usedGPUs(), s.teamUsed[0], err)
	}
	if err := s.advance(j.End); err != nil || !j.Done || s.members.usedGPUs() != 0 || s.done != 1 || len(s.live) != 1 {
		t.Fatalf("at its end: done %v used %d live %d err %v", j.Done, s.members.usedGPUs(), len(s.live), err)
	}
	if err := s.advance(j.End + doneRetention); err != nil || len(s.live) != 0 {
		t.Fatalf("after the retention: live %d err %v", len(s.live), err)
	}
}
