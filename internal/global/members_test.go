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
		{name: "not ready", members: []*Member{{Name: "m1", Allocatable: gpus(16)}}, want: []string{"m1: not ready"}},
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
	w := &World{Queues: queues(map[string]int32{"q": 1, "big": 1}), Members: []*Member{member("full", 8), member("free", 8)}}
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
