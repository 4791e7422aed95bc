package global

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/phalanx-sched/phalanx/internal/queue"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

const gpu = v1.ResourceName("nvidia.com/gpu")

var t0 = time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)

// roomEstimator answers as a member's planner would on plain resources:
// whole sets that fit in the member's allocatable less the jobs started
// there and the assumed ones. down members fail.
type roomEstimator struct {
	world *World
	down  map[string]error
	calls int
}

func (e *roomEstimator) Sets(_ context.Context, job *Job, asks []Ask) map[string]Answer {
	e.calls++
	out := map[string]Answer{}
	for _, a := range asks {
		if err := e.down[a.Member]; err != nil {
			out[a.Member] = Answer{Err: err}
			continue
		}
		var m *Member
		for _, mm := range e.world.Members {
			if mm.Name == a.Member {
				m = mm
			}
		}
		free := m.Allocatable.Clone()
		for _, j := range e.world.Jobs {
			if j.Member == a.Member && j.Started && !j.Done {
				free.Sub(j.Request)
			}
		}
		for _, j := range a.Assumed {
			free.Sub(j.Request)
		}
		out[a.Member] = Answer{Sets: int32(free.Copies(job.Request, 100))}
	}
	return out
}

func gpus(n int64) resources.List { return resources.List{gpu: n} }

func member(name string, n int64) *Member {
	return &Member{Name: name, Ready: true, Allocatable: gpus(n)}
}

func job(q, name string, n int64, age time.Duration) *Job {
	return &Job{Key: "ns/" + name, UID: types.UID(name), Namespace: "ns", Kind: "Job", Name: name, Queue: q,
		Created: t0.Add(-age), Request: gpus(n)}
}

func queues(weights map[string]int32) []queue.Queue {
	var out []queue.Queue
	for n, w := range weights {
		out = append(out, queue.Queue{Name: n, Weight: w, Reclaimable: true, Open: true})
	}
	return out
}

func run(t *testing.T, tier *Tier, w *World, est Estimator) map[string]Verdict {
	t.Helper()
	out := map[string]Verdict{}
	for _, v := range tier.Pass(context.Background(), *w, est) {
		key := v.Job.Name
		if v.Move {
			key = "move:" + key
		}
		out[key] = v
	}
	return out
}

func dispatchedTo(vs map[string]Verdict) map[string]string {
	out := map[string]string{}
	for k, v := range vs {
		if v.Reason == Dispatched {
			out[k] = v.Member
		}
	}
	return out
}

// Team A (weight 2) and team B (weight 1) each submit ten 4-GPU jobs to
// three 8-GPU members: A gets two thirds of the 24 GPUs, B one third, and
// no member gets more than it holds.
func TestPassHoldsGlobalSharesAcrossMembers(t *testing.T) {
	w := &World{Queues: queues(map[string]int32{"team-a": 2, "team-b": 1}),
		Members: []*Member{member("m1", 8), member("m2", 8), member("m3", 8)}}
	for i := range 10 {
		w.Jobs = append(w.Jobs, job("team-a", fmt.Sprintf("a%d", i), 4, time.Duration(20-i)*time.Minute))
		w.Jobs = append(w.Jobs, job("team-b", fmt.Sprintf("b%d", i), 4, time.Duration(20-i)*time.Minute-time.Second))
	}
	vs := run(t, New(Config{}, clocktesting.NewFakePassiveClock(t0)), w, &roomEstimator{world: w})
	perQueue, perMember := map[string]int64{}, map[string]int64{}
	for name, m := range dispatchedTo(vs) {
		perQueue[vs[name].Job.Queue] += 4
		perMember[m] += 4
	}
	if perQueue["team-a"] != 16 || perQueue["team-b"] != 8 {
		t.Fatalf("GPUs dispatched per queue %v, want team-a 16 and team-b 8 (weights 2:1 over 24)", perQueue)
	}
	for m, n := range perMember {
		if n > 8 {
			t.Fatalf("member %s got %d GPUs, it holds 8", m, n)
		}
	}
	if v := vs["a9"]; v.Reason != NoMemberFitsNow || v.Position != 6 || !strings.Contains(v.Message, "position 6 in queue team-a") {
		t.Fatalf("a9: %+v, want NoMemberFitsNow at position 6 of team-a", v)
	}
}

// A queue above its share does not take the room another queue waits for,
// but borrows room the waiting queue cannot use now (work-conserving).
func TestPassWorkConserving(t *testing.T) {
	w := &World{Queues: queues(map[string]int32{"team-a": 1, "team-b": 1}),
		Members: []*Member{member("m1", 8), member("m2", 8)}}
	w.Jobs = []*Job{job("team-a", "a0", 8, 3*time.Minute), job("team-a", "a1", 8, 2*time.Minute)}
	vs := run(t, New(Config{}, clocktesting.NewFakePassiveClock(t0)), w, &roomEstimator{world: w})
	if got := dispatchedTo(vs); len(got) != 2 {
		t.Fatalf("alone, team-a should take both members: %v", got)
	}

	// team-b waits below its share with a job that starts now: team-a's
	// second job, above its share, waits.
	w.Jobs = []*Job{job("team-a", "a0", 8, 3*time.Minute), job("team-a", "a1", 8, 2*time.Minute), job("team-b", "b0", 8, time.Minute)}
	vs = run(t, New(Config{}, clocktesting.NewFakePassiveClock(t0)), w, &roomEstimator{world: w})
	if vs["b0"].Reason != Dispatched || vs["a0"].Reason != Dispatched || vs["a1"].Reason != QueueAboveShare {
		t.Fatalf("verdicts a0 %s, a1 %s (%s), b0 %s; want a0 and b0 dispatched, a1 QueueAboveShare", vs["a0"].Reason, vs["a1"].Reason, vs["a1"].Message, vs["b0"].Reason)
	}

	// team-b's job fits no member now (it needs 16 in one of 8+8... held
	// by none): NoMemberCanHold is no demand, and team-a borrows.
	w.Jobs = []*Job{job("team-a", "a0", 8, 3*time.Minute), job("team-a", "a1", 8, 2*time.Minute), job("team-b", "b0", 16, time.Minute)}
	vs = run(t, New(Config{}, clocktesting.NewFakePassiveClock(t0)), w, &roomEstimator{world: w})
	if vs["a1"].Reason != Dispatched || vs["b0"].Reason != NoMemberCanHold {
		t.Fatalf("a1 %s (%s), b0 %s; want a1 dispatched and b0 NoMemberCanHold", vs["a1"].Reason, vs["a1"].Message, vs["b0"].Reason)
	}
	if !strings.Contains(vs["b0"].Message, "nvidia.com/gpu=16") {
		t.Fatalf("b0's message does not say what it needs: %s", vs["b0"].Message)
	}
}

func TestPassRefusals(t *testing.T) {
	w := &World{Queues: queues(map[string]int32{"team-a": 1}), Members: []*Member{member("m1", 8)}}
	divided := job("team-a", "divided", 2, 5*time.Minute)
	divided.Divides = "its spread constraint asks for at least 2 clusters"
	invalid := job("team-a", "invalid", 2, 4*time.Minute)
	invalid.Invalid = "spec.replicaRequirements: bad quantity"
	w.Jobs = []*Job{divided, invalid, job("nowhere", "noqueue", 2, 3*time.Minute)}
	est := &roomEstimator{world: w}
	vs := run(t, New(Config{}, clocktesting.NewFakePassiveClock(t0)), w, est)
	for name, want := range map[string]Reason{"divided": WouldDivide, "invalid": InvalidJob, "noqueue": QueueRefused} {
		if vs[name].Reason != want {
			t.Errorf("%s: %s (%s), want %s", name, vs[name].Reason, vs[name].Message, want)
		}
	}
	if !strings.Contains(vs["noqueue"].Message, "queue nowhere does not exist") {
		t.Errorf("noqueue's message does not name the queue: %s", vs["noqueue"].Message)
	}
	if est.calls != 0 {
		t.Errorf("refused jobs asked the estimators %d times", est.calls)
	}
}

// Among members where the whole set starts now: the tightest fit, then the
// lowest cost, then the name; a member whose estimator fails is skipped and
// named.
func TestPassChoosesMember(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members []*Member
		down    map[string]error
		want    string
	}{
		{name: "tightest fit", members: []*Member{member("big", 32), member("snug", 8)}, want: "snug"},
		{name: "cost breaks a tie", members: []*Member{{Name: "a", Ready: true, Allocatable: gpus(8), Cost: 5}, {Name: "b", Ready: true, Allocatable: gpus(8), Cost: 1}}, want: "b"},
		{name: "name breaks a tie", members: []*Member{member("b", 8), member("a", 8)}, want: "a"},
		{name: "failed estimator skipped", members: []*Member{member("snug", 8), member("big", 32)}, down: map[string]error{"snug": errors.New("connection refused")}, want: "big"},
		{name: "not ready skipped", members: []*Member{{Name: "snug", Allocatable: gpus(8)}, member("big", 32)}, want: "big"},
		{name: "placement affinity", members: []*Member{member("snug", 8), member("big", 32)}, want: "big"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &World{Queues: queues(map[string]int32{"q": 1}), Members: tc.members}
			j := job("q", "j", 8, time.Minute)
			if tc.name == "placement affinity" {
				j.Allowed = func(m *Member) bool { return m.Name == "big" }
			}
			w.Jobs = []*Job{j}
			v := run(t, New(Config{}, clocktesting.NewFakePassiveClock(t0)), w, &roomEstimator{world: w, down: tc.down})["j"]
			if v.Reason != Dispatched || v.Member != tc.want {
				t.Fatalf("%s to %q (%s), want dispatched to %s", v.Reason, v.Member, v.Message, tc.want)
			}
			if tc.down != nil && !strings.Contains(v.Message, "connection refused") {
				t.Fatalf("the message does not say the estimator failed: %s", v.Message)
			}
		})
	}
}

func TestPassDependencies(t *testing.T) {
	w := &World{Queues: queues(map[string]int32{"q": 1}), Members: []*Member{member("m1", 8), member("m2", 8)}}
	pretrain := job("q", "pretrain", 8, 10*time.Minute)
	pretrain.Member, pretrain.Since = "m1", t0.Add(-9*time.Minute)
	finetune := job("q", "finetune", 2, 5*time.Minute)
	finetune.DependsOn = []string{"pretrain"}
	orphan := job("q", "orphan", 2, 4*time.Minute)
	orphan.DependsOn = []string{"missing"}
	w.Jobs = []*Job{pretrain, finetune, orphan}
	tier := New(Config{}, clocktesting.NewFakePassiveClock(t0))
	vs := run(t, tier, w, &roomEstimator{world: w})
	if v := vs["finetune"]; v.Reason != DependencyWaiting || !strings.Contains(v.Message, "member m1") {
		t.Fatalf("finetune before pretrain started: %s (%s), want DependencyWaiting naming m1", v.Reason, v.Message)
	}
	if v := vs["orphan"]; v.Reason != DependencyMissing || !strings.Contains(v.Message, "ns/missing") {
		t.Fatalf("orphan: %s (%s), want DependencyMissing naming ns/missing", v.Reason, v.Message)
	}
	pretrain.Started = true
	if v := run(t, tier, w, &roomEstimator{world: w})["finetune"]; v.Reason != Dispatched || v.Member != "m2" {
		t.Fatalf("finetune after pretrain started in m1: %s to %q (%s), want dispatched to m2", v.Reason, v.Member, v.Message)
	}
}

// A job sent to a member where it did not start moves whole to one where
// it starts now, once past MoveAfter, at most MovesPerHour an hour.
func TestPassMoves(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(t0)
	w := &World{Queues: queues(map[string]int32{"q": 1}), Members: []*Member{member("full", 8), member("free", 8)}}
	blocker := job("q", "blocker", 8, time.Hour)
	blocker.Member, blocker.Since, blocker.Started = "full", t0.Add(-time.Hour), true
	stuck1 := job("q", "stuck1", 4, 20*time.Minute)
	stuck1.Member, stuck1.Since = "full", t0.Add(-15*time.Minute)
	stuck2 := job("q", "stuck2", 4, 19*time.Minute)
	stuck2.Member, stuck2.Since = "full", t0.Add(-14*time.Minute)
	fresh := job("q", "fresh", 4, 2*time.Minute)
	fresh.Member, fresh.Since = "full", t0.Add(-time.Minute)
	w.Jobs = []*Job{blocker, stuck1, stuck2, fresh}

	if vs := run(t, New(Config{}, clk), w, &roomEstimator{world: w}); len(vs) != 0 {
		t.Fatalf("moves are off by default, got %v", vs)
	}
	tier := New(Config{MoveAfter: 10 * time.Minute, MovesPerHour: 1}, clk)
	vs := run(t, tier, w, &roomEstimator{world: w})
	if v, ok := vs["move:stuck1"]; !ok || v.Member != "free" {
		t.Fatalf("stuck1 should move to free: %v", vs)
	}
	if len(vs) != 1 {
		t.Fatalf("one move an hour, got %d: %v", len(vs), vs)
	}
	stuck1.Member, stuck1.Since = "free", t0
	if vs := run(t, tier, w, &roomEstimator{world: w}); len(vs) != 0 {
		t.Fatalf("the hour's move is spent, got %v", vs)
	}
	clk.SetTime(t0.Add(61 * time.Minute))
	if vs := run(t, tier, w, &roomEstimator{world: w}); vs["move:stuck2"].Member != "free" {
		t.Fatalf("an hour later stuck2 moves to free: %v", vs)
	}
}

// A job at the head of its queue that fits no member now keeps, past
// StarvedAfter, one member from jobs after it in order.
func TestPassBoundedWait(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(t0)
	w := &World{Queues: queues(map[string]int32{"big": 1, "small": 1}), Members: []*Member{member("m1", 8), member("m2", 8)}}
	r1 := job("small", "r1", 4, time.Hour)
	r1.Member, r1.Since, r1.Started = "m1", t0.Add(-time.Hour), true
	r2 := job("small", "r2", 8, time.Hour)
	r2.Member, r2.Since, r2.Started = "m2", t0.Add(-time.Hour), true
	large := job("big", "large", 8, 30*time.Minute)
	next := job("small", "next", 4, 10*time.Minute)
	w.Jobs = []*Job{r1, r2, large, next}

	vs := run(t, New(Config{}, clk), w, &roomEstimator{world: w})
	if vs["large"].Reason != NoMemberFitsNow || vs["next"].Member != "m1" {
		t.Fatalf("without the bound: large %s, next %s to %q; want large waiting and next dispatched to m1", vs["large"].Reason, vs["next"].Reason, vs["next"].Member)
	}
	// Past the bound m1, the member with the least dispatched, is kept for
	// large: next, which fits only there, waits.
	vs = run(t, New(Config{StarvedAfter: 20 * time.Minute}, clk), w, &roomEstimator{world: w})
	if vs["large"].Reason != NoMemberFitsNow {
		t.Fatalf("large: %s", vs["large"].Reason)
	}
	if v := vs["next"]; v.Reason != NoMemberFitsNow || !strings.Contains(v.Message, "m1 (kept for ns/large)") {
		t.Fatalf("next: %s (%s), want it waiting with m1 kept for ns/large", v.Reason, v.Message)
	}
	// Not yet past the bound: nothing is kept.
	clk.SetTime(t0.Add(-15 * time.Minute))
	if v := run(t, New(Config{StarvedAfter: 20 * time.Minute}, clk), w, &roomEstimator{world: w})["next"]; v.Member != "m1" {
		t.Fatalf("before the bound next should go to m1: %s (%s)", v.Reason, v.Message)
	}
}

// State is the bindings': the same world decides the same after a restart.
func TestPassIsAFunctionOfTheWorld(t *testing.T) {
	w := &World{Queues: queues(map[string]int32{"team-a": 2, "team-b": 1}), Members: []*Member{member("m1", 8), member("m2", 8), member("m3", 8)}}
	for i := range 6 {
		w.Jobs = append(w.Jobs, job("team-a", fmt.Sprintf("a%d", i), 4, time.Duration(20-i)*time.Minute))
		w.Jobs = append(w.Jobs, job("team-b", fmt.Sprintf("b%d", i), 4, time.Duration(20-i)*time.Minute))
	}
	first := dispatchedTo(run(t, New(Config{}, clocktesting.NewFakePassiveClock(t0)), w, &roomEstimator{world: w}))
	second := dispatchedTo(run(t, New(Config{}, clocktesting.NewFakePassiveClock(t0)), w, &roomEstimator{world: w}))
	if fmt.Sprint(first) != fmt.Sprint(second) {
		t.Fatalf("two tiers decided differently on the same world:\n%v\n%v", first, second)
	}
	// Apply the first pass's dispatches: a restarted tier dispatches
	// nothing more (the members are full) and moves nothing.
	for _, j := range w.Jobs {
		if m, ok := first[j.Name]; ok {
			j.Member, j.Since = m, t0
		}
	}
	if got := dispatchedTo(run(t, New(Config{}, clocktesting.NewFakePassiveClock(t0)), w, &roomEstimator{world: w})); len(got) != 0 {
		t.Fatalf("after the dispatches were recorded, a new tier dispatched again: %v", got)
	}
}
