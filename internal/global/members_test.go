package global

import (
	"context"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/phalanx-sched/phalanx/internal/queue"
)

// recordedAsk is one member's question as the estimator got it.
type recordedAsk struct {
	job, member string
	assumed     []string
}

// recordingEstimator answers as roomEstimator and records every ask.
type recordingEstimator struct {
	room roomEstimator
	asks []recordedAsk
}

func (e *recordingEstimator) Sets(ctx context.Context, job *Job, asks []Ask) map[string]Answer {
	for _, a := range asks {
		var names []string
		for _, j := range a.Assumed {
			names = append(names, j.Name)
		}
		e.asks = append(e.asks, recordedAsk{job: job.Name, member: a.Member, assumed: names})
	}
	return e.room.Sets(ctx, job, asks)
}

func (e *recordingEstimator) assumedFor(job, member string) ([]string, bool) {
	for _, a := range e.asks {
		if a.job == job && a.member == member {
			return a.assumed, true
		}
	}
	return nil, false
}

// setsEstimator answers from a function of the job and the member.
type setsEstimator func(job *Job, member string) int32

func (f setsEstimator) Sets(_ context.Context, job *Job, asks []Ask) map[string]Answer {
	out := map[string]Answer{}
	for _, a := range asks {
		out[a.Member] = Answer{Sets: f(job, a.Member)}
	}
	return out
}

// The jobs dispatched earlier in the same pass, and those dispatched before
// that have not started, are the members' assumed workloads: two jobs never
// both take the last room of a member.
func TestPassAssumesEarlierDispatches(t *testing.T) {
	w := &World{Queues: queues(map[string]int32{"q": 1}), Members: []*Member{member("m1", 8), member("m2", 8)}}
	started := job("q", "started", 4, time.Hour)
	started.Member, started.Since, started.Started = "m2", t0.Add(-time.Hour), true
	pending := job("q", "pending", 4, time.Hour)
	pending.Member, pending.Since = "m2", t0.Add(-time.Minute)
	w.Jobs = []*Job{started, pending, job("q", "a", 4, 3*time.Minute), job("q", "b", 4, 2*time.Minute), job("q", "c", 4, time.Minute)}
	est := &recordingEstimator{room: roomEstimator{world: w}}
	vs := run(t, New(Config{}, clocktesting.NewFakePassiveClock(t0)), w, est)
	if vs["a"].Member != "m1" || vs["b"].Member != "m1" || vs["c"].Reason != NoMemberFitsNow {
		t.Fatalf("a %s to %q, b %s to %q, c %s (%s); want a and b on m1 and c waiting", vs["a"].Reason, vs["a"].Member, vs["b"].Reason, vs["b"].Member, vs["c"].Reason, vs["c"].Message)
	}
	for _, tc := range []struct{ job, member, want string }{
		{"a", "m1", ""}, {"a", "m2", "pending"},
		{"b", "m1", "a"}, {"c", "m1", "a,b"}, {"c", "m2", "pending"},
	} {
		got, ok := est.assumedFor(tc.job, tc.member)
		if !ok || strings.Join(got, ",") != tc.want {
			t.Errorf("asking %s about %s: assumed %v (asked %v), want [%s]", tc.member, tc.job, got, ok, tc.want)
		}
	}
}

// NoMemberCanHold says, member by member, why none holds the whole set.
func TestPassNoMemberCanHold(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members []*Member
		allowed func(*Member) bool
		want    []string
	}{
		{name: "not ready and too small", members: []*Member{{Name: "m1", Allocatable: gpus(4)}}, want: []string{"m1: not ready"}},
		{name: "excluded by the placement", members: []*Member{member("m1", 16), member("m2", 4)}, allowed: func(m *Member) bool { return m.Name != "m1" },
			want: []string{"m1: not allowed by the placement", "m2: allocatable nvidia.com/gpu=4"}},
		{name: "no members", want: []string{"no member cluster is registered"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &World{Queues: queues(map[string]int32{"q": 1}), Members: tc.members}
			j := job("q", "j", 8, time.Minute)
			j.Allowed = tc.allowed
			w.Jobs = []*Job{j}
			est := &recordingEstimator{room: roomEstimator{world: w}}
			v := run(t, New(Config{}, clocktesting.NewFakePassiveClock(t0)), w, est)["j"]
			if v.Reason != NoMemberCanHold || !strings.Contains(v.Message, "needs nvidia.com/gpu=8 in one member") {
				t.Fatalf("%s (%s), want NoMemberCanHold saying what it needs", v.Reason, v.Message)
			}
			for _, part := range tc.want {
				if !strings.Contains(v.Message, part) {
					t.Errorf("the message does not say %q: %s", part, v.Message)
				}
			}
			if len(est.asks) != 0 {
				t.Errorf("asked the estimators about a job no member holds: %v", est.asks)
			}
		})
	}
}

// Moves go to no member kept for a starved job.
func TestPassMovesAvoidKeptMembers(t *testing.T) {
	free := member("free", 8)
	free.InUse = gpus(4) // the member's own work, which will end
	w := &World{Queues: queues(map[string]int32{"q": 1, "big": 1}), Members: []*Member{member("full", 8), free}}
	stuck := job("q", "stuck", 4, time.Hour)
	stuck.Member, stuck.Since = "full", t0.Add(-30*time.Minute)
	large := job("big", "large", 8, time.Hour)
	w.Jobs = []*Job{stuck, large}
	// large starts nowhere now; stuck would start on free.
	est := setsEstimator(func(j *Job, m string) int32 {
		if j.Name == "stuck" && m == "free" {
			return 1
		}
		return 0
	})
	vs := run(t, New(Config{MoveAfter: 10 * time.Minute, MovesPerHour: 5}, clocktesting.NewFakePassiveClock(t0)), w, est)
	if vs["move:stuck"].Member != "free" {
		t.Fatalf("without the bounded wait stuck should move to free: %v", vs)
	}
	vs = run(t, New(Config{MoveAfter: 10 * time.Minute, MovesPerHour: 5, StarvedAfter: 20 * time.Minute}, clocktesting.NewFakePassiveClock(t0)), w, est)
	if v, moved := vs["move:stuck"]; moved {
		t.Fatalf("stuck moved to %s, which is kept for large (%s)", v.Member, vs["large"].Message)
	}
}

// Only jobs that have not started and are not done move, oldest dispatch
// first, at most MovesPerHour over the last hour (a sliding hour, not a
// clock hour).
func TestPassMovesBudgetAndEligibility(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(t0)
	w := &World{Queues: queues(map[string]int32{"q": 1}), Members: []*Member{member("slow", 64), member("fast", 64)}}
	dispatched := func(name string, since time.Time) *Job {
		j := job("q", name, 4, 2*time.Hour)
		j.Member, j.Since = "slow", since
		return j
	}
	running := dispatched("running", t0.Add(-time.Hour))
	running.Started = true
	done := dispatched("done", t0.Add(-time.Hour))
	done.Done = true
	first := dispatched("first", t0.Add(-20*time.Minute))
	w.Jobs = []*Job{running, done, first}
	est := setsEstimator(func(_ *Job, m string) int32 {
		if m == "fast" {
			return 1
		}
		return 0
	})
	tier := New(Config{MoveAfter: 10 * time.Minute, MovesPerHour: 2}, clk)
	moved := func() []string {
		var out []string
		for _, v := range tier.Pass(context.Background(), *w, est) {
			if v.Move {
				out = append(out, v.Job.Name)
				v.Job.Member, v.Job.Since, v.Job.Started = v.Member, clk.Now(), true
			}
		}
		return out
	}
	for _, step := range []struct {
		at    time.Duration
		stuck []string
		want  string
	}{
		{at: 0, want: "first"},
		{at: 30 * time.Minute, stuck: []string{"second"}, want: "second"},
		// Two moves in the last hour: none now.
		{at: 50 * time.Minute, stuck: []string{"third"}, want: ""},
		// The move at t0 is an hour old; the one at 30m still counts.
		{at: 61 * time.Minute, stuck: []string{"fourth"}, want: "third"},
	} {
		clk.SetTime(t0.Add(step.at))
		for _, name := range step.stuck {
			w.Jobs = append(w.Jobs, dispatched(name, clk.Now().Add(-15*time.Minute+time.Duration(len(w.Jobs))*time.Second)))
		}
		if got := strings.Join(moved(), ","); got != step.want {
			t.Fatalf("at +%v moved [%s], want [%s]", step.at, got, step.want)
		}
	}
}

// A job that finished holds nothing: not its member's room, not its
// queue's capability. A dependency that succeeded releases its dependents.
func TestPassDoneJobs(t *testing.T) {
	w := &World{Queues: []queue.Queue{{Name: "q", Weight: 1, Reclaimable: true, Open: true, Capability: gpus(8)}}, Members: []*Member{member("m1", 8)}}
	pretrain := job("q", "pretrain", 8, time.Hour)
	pretrain.Member, pretrain.Since, pretrain.Started, pretrain.Done = "m1", t0.Add(-time.Hour), true, true
	finetune := job("q", "finetune", 8, time.Minute)
	finetune.DependsOn = []string{"pretrain"}
	w.Jobs = []*Job{pretrain, finetune}
	if v := run(t, New(Config{}, clocktesting.NewFakePassiveClock(t0)), w, &roomEstimator{world: w})["finetune"]; v.Reason != Dispatched || v.Member != "m1" {
		t.Fatalf("finetune after pretrain finished: %s (%s), want dispatched to m1", v.Reason, v.Message)
	}
}

// A dependency that failed (done without starting) keeps its dependents
// waiting, and the message says it failed rather than that it may still
// start.
func TestPassFailedDependency(t *testing.T) {
	w := &World{Queues: queues(map[string]int32{"q": 1}), Members: []*Member{member("m1", 8)}}
	pretrain := job("q", "pretrain", 8, time.Hour)
	pretrain.Member, pretrain.Since, pretrain.Done = "m1", t0.Add(-time.Hour), true
	finetune := job("q", "finetune", 8, time.Minute)
	finetune.DependsOn = []string{"pretrain"}
	w.Jobs = []*Job{pretrain, finetune}
	v := run(t, New(Config{}, clocktesting.NewFakePassiveClock(t0)), w, &roomEstimator{world: w})["finetune"]
	if v.Reason != DependencyWaiting || !strings.Contains(v.Message, "finished in member m1 without starting") {
		t.Fatalf("finetune after pretrain failed: %s (%s), want DependencyWaiting saying pretrain finished without starting", v.Reason, v.Message)
	}
}

// A member out of reach (lost, or evicted the job by failover) that would
// hold the set makes the job wait, not be refused for good; an evicted job
// goes whole to another member, never back to the one it was evicted from
// while the eviction lasts, even when that one is cheaper.
func TestPassFailover(t *testing.T) {
	lost := func(name string, n int64) *Member { m := member(name, n); m.Ready = false; return m }
	cheap := func(m *Member) *Member { m.Cost = 0; return m }
	dear := func(m *Member) *Member { m.Cost = 5; return m }
	for _, tc := range []struct {
		name       string
		members    []*Member
		evicted    []string
		reason     Reason
		member     string
		says       []string
		askedAbout []string
	}{
		{name: "the only holder is lost", members: []*Member{lost("m1", 16), member("m2", 4)}, reason: NoMemberFitsNow,
			says: []string{"no member in reach", "m1: not ready", "m2: allocatable nvidia.com/gpu=4"}},
		{name: "evicted, another member holds it", members: []*Member{cheap(member("m1", 16)), dear(member("m2", 16))}, evicted: []string{"m1"},
			reason: Dispatched, member: "m2", says: []string{"placed again after its eviction from m1"}, askedAbout: []string{"m2"}},
		{name: "evicted from the only holder", members: []*Member{member("m1", 16), member("m2", 4)}, evicted: []string{"m1"}, reason: NoMemberFitsNow,
			says: []string{"m1: evicted it (failover), until the eviction ends"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &World{Queues: queues(map[string]int32{"q": 1}), Members: tc.members}
			j := job("q", "j", 8, time.Minute)
			j.Evicted = tc.evicted
			w.Jobs = []*Job{j}
			est := &recordingEstimator{room: roomEstimator{world: w}}
			v := run(t, New(Config{}, clocktesting.NewFakePassiveClock(t0)), w, est)["j"]
			if v.Reason != tc.reason || v.Member != tc.member {
				t.Fatalf("%s to %q (%s), want %s to %q", v.Reason, v.Member, v.Message, tc.reason, tc.member)
			}
			for _, part := range tc.says {
				if !strings.Contains(v.Message, part) {
					t.Errorf("the message does not say %q: %s", part, v.Message)
				}
			}
			var asked []string
			for _, a := range est.asks {
				asked = append(asked, a.member)
			}
			if strings.Join(asked, ",") != strings.Join(tc.askedAbout, ",") {
				t.Errorf("asked the estimators of %v, want %v", asked, tc.askedAbout)
			}
		})
	}
}

// A member with none of the job's GPUs in use whose estimator still says
// no whole set starts there cannot start it by waiting (topology, node
// shapes): it is not kept for the job under the bounded wait, and when
// every member is so the job's message says so. The job still waits (the
// members' resource summaries lag the estimators, so "idle" can be wrong
// for a pass).
func TestPassIdleMemberThatRefuses(t *testing.T) {
	busy := func(name string, inUse int64) *Member { m := member(name, 8); m.InUse = gpus(inUse); return m }
	cfg := Config{StarvedAfter: 10 * time.Minute}
	for _, tc := range []struct {
		name    string
		members []*Member
		reason  Reason
		says    string
		kept    string // the member kept for the starved job, "" for none
	}{
		{name: "every member idle and refusing", members: []*Member{busy("m1", 0), busy("m2", 0)}, reason: NoMemberFitsNow,
			says: "even with none of its nvidia.com/gpu in use"},
		{name: "one member busy", members: []*Member{busy("m1", 0), busy("m2", 2)}, reason: NoMemberFitsNow, kept: "m2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &World{Queues: queues(map[string]int32{"q": 1}), Members: tc.members}
			wide := job("q", "wide", 8, time.Hour) // waited past StarvedAfter
			later := job("q", "later", 2, time.Minute)
			w.Jobs = []*Job{wide, later}
			est := setsEstimator(func(j *Job, m string) int32 {
				if j.Name == "wide" {
					return 0
				}
				return 1
			})
			vs := run(t, New(cfg, clocktesting.NewFakePassiveClock(t0)), w, est)
			if v := vs["wide"]; v.Reason != tc.reason || !strings.Contains(v.Message, tc.says) {
				t.Fatalf("wide: %s (%s), want %s saying %q", v.Reason, v.Message, tc.reason, tc.says)
			}
			v := vs["later"]
			switch {
			case tc.kept == "" && v.Reason != Dispatched:
				t.Fatalf("later: %s (%s); no member is worth keeping for wide", v.Reason, v.Message)
			case tc.kept != "" && v.Member == tc.kept:
				t.Fatalf("later went to %s, which is kept for wide", tc.kept)
			}
		})
	}
}

// A job in a member that is not ready is never moved by the tier, however
// long it has not started there: its status there is unknown (it may run
// unseen); Karmada's failover evicts it, and the tier then places it.
func TestPassNoMoveFromALostMember(t *testing.T) {
	lost := member("lost", 8)
	lost.Ready = false
	w := &World{Queues: queues(map[string]int32{"q": 1}), Members: []*Member{lost, member("up", 8)}}
	j := job("q", "j", 4, time.Hour)
	j.Member, j.Since = "lost", t0.Add(-30*time.Minute)
	w.Jobs = []*Job{j}
	vs := run(t, New(Config{MoveAfter: 10 * time.Minute, MovesPerHour: 5}, clocktesting.NewFakePassiveClock(t0)), w, &roomEstimator{world: w})
	if v, moved := vs["move:j"]; moved {
		t.Fatalf("j moved from the lost member to %s", v.Member)
	}
	lost.Ready = true
	if vs := run(t, New(Config{MoveAfter: 10 * time.Minute, MovesPerHour: 5}, clocktesting.NewFakePassiveClock(t0)), w, &roomEstimator{world: w}); vs["move:j"].Member != "up" {
		t.Fatalf("j did not move from a ready member where it has not started: %v", vs)
	}
}
