package globalbench

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/phalanx-sched/phalanx/internal/global"
)

func baselineWorld(used map[string]int64, jobs ...*simJob) (global.World, *standIns) {
	s := newStandIns(3, 64)
	for m, n := range used {
		s.used[m][gpu] = n
	}
	w := global.World{Members: s.members}
	for _, j := range jobs {
		w.Jobs = append(w.Jobs, j.Job)
	}
	return w, s
}

func dispatchedBy(vs []global.Verdict) map[string]string {
	out := map[string]string{}
	for _, v := range vs {
		if v.Reason == global.Dispatched {
			out[v.Job.Name] = v.Member
		}
	}
	return out
}

// Karmada's default: the member with the most free GPUs where the set
// fits, first come first served, counting what it sent in the same pass;
// a job that fits nowhere does not hold back a later one.
func TestKarmadaDefaultSpreadsByFreeGPUs(t *testing.T) {
	first := newJob(0, 0, 16, 0, time.Minute)
	second := newJob(1, 1, 32, time.Second, time.Minute)
	huge := newJob(2, 2, 32, 2*time.Second, time.Minute)
	small := newJob(3, 2, 4, 3*time.Second, time.Minute)
	w, est := baselineWorld(map[string]int64{"member-01": 40, "member-02": 20, "member-03": 28}, small, huge, second, first)
	got := dispatchedBy(karmadaDefault{}.Pass(context.Background(), w, est))
	// first (16) → member-02 (44 free); second (32) → member-03 (36 free,
	// member-02 has 28 left); huge (32) fits nowhere; small (4) → member-02
	// (28 free, the most left).
	want := map[string]string{"job-00000": "member-02", "job-00001": "member-03", "job-00003": "member-02"}
	if len(got) != len(want) {
		t.Fatalf("dispatched %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("dispatched %v, want %v", got, want)
		}
	}
}

// Jobs dispatched and not started count against their member; started
// ones are in the stand-in's used room; done ones are skipped.
func TestKarmadaDefaultCountsAssumedJobs(t *testing.T) {
	inflight := newJob(0, 0, 32, 0, time.Minute)
	inflight.Member = "member-01"
	done := newJob(1, 0, 32, 0, time.Minute)
	done.Member, done.Started, done.Done = "member-02", true, true
	next := newJob(2, 0, 16, time.Second, time.Minute)
	w, est := baselineWorld(map[string]int64{"member-02": 40, "member-03": 40}, inflight, done, next)
	vs := karmadaDefault{}.Pass(context.Background(), w, est)
	if len(vs) != 1 || vs[0].Job != next.Job {
		t.Fatalf("verdicts %v, want one for the waiting job", vs)
	}
	// member-01 has 32 free after the assumed job, the others 24.
	if vs[0].Member != "member-01" {
		t.Fatalf("dispatched to %q, want member-01 (32 free after its assumed job)", vs[0].Member)
	}
}

func TestKarmadaDefaultLeavesJobsThatFitNowhereWaiting(t *testing.T) {
	j := newJob(0, 0, 32, 0, time.Minute)
	w, est := baselineWorld(map[string]int64{"member-01": 40, "member-02": 40, "member-03": 40}, j)
	w.Members[0].Ready = false
	est.used["member-01"][gpu] = 0 // not ready: never asked, even when empty
	vs := karmadaDefault{}.Pass(context.Background(), w, est)
	if len(vs) != 1 || vs[0].Reason != global.NoMemberFitsNow || vs[0].Member != "" {
		t.Fatalf("verdicts %+v, want the job waiting with NoMemberFitsNow", vs)
	}
}

// The tier dispatcher is phalanx-global's Tier with the binary's default
// tuning: it honours the queues' weights where the baseline does not.
func TestTierDispatcherIsTheGlobalTier(t *testing.T) {
	d := newTier(clocktesting.NewFakePassiveClock(epoch.Add(time.Hour)))
	if d.Name() != "phalanx-global" || tierConfig.StarvedAfter != 10*time.Minute || tierConfig.MoveAfter != 0 {
		t.Fatalf("dispatcher %s with %+v", d.Name(), tierConfig)
	}
	var jobs []*simJob
	for i := range 8 {
		jobs = append(jobs, newJob(2*i, 1, 16, time.Duration(i)*time.Second, time.Minute))   // team-b first
		jobs = append(jobs, newJob(2*i+1, 0, 16, time.Duration(i)*time.Minute, time.Minute)) // team-a later
	}
	w, est := baselineWorld(nil, jobs...)
	w.Queues = teamQueues([]int32{2, 1})
	perTeam := map[string]int64{}
	for _, v := range d.Pass(context.Background(), w, est) {
		if v.Reason == global.Dispatched {
			perTeam[v.Job.Queue] += 16
		}
	}
	if perTeam["team-a"] != 128 || perTeam["team-b"] != 64 {
		t.Fatalf("GPUs dispatched per team %v, want team-a 128 and team-b 64 of 192 (weights 2:1)", perTeam)
	}
	base := map[string]int64{}
	for _, v := range (karmadaDefault{}).Pass(context.Background(), w, est) {
		if v.Reason == global.Dispatched {
			base[v.Job.Queue] += 16
		}
	}
	// Submission order: team-b's eight jobs (0–7 s) and team-a's first
	// (0 s) go before team-a's next three (1–3 min); 12 jobs fill 192 GPUs.
	if base["team-b"] != 128 || base["team-a"] != 64 {
		t.Fatalf("the baseline dispatched %v, want team-b 128 and team-a 64 (first come first served)", base)
	}
}
