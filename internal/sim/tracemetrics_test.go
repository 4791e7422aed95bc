package sim

import (
	"math"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

func TestFragmentedGPUs(t *testing.T) {
	const gi = 1 << 30
	cases := []struct {
		name    string
		rooms   []Room
		waiting []Shape
		want    int64
	}{
		{"nothing waits", []Room{{CPU: 8000, Memory: 8 * gi, GPUs: 4}}, nil, 0},
		{"only CPU pods wait", []Room{{CPU: 8000, Memory: 8 * gi, GPUs: 4}}, []Shape{{CPU: 1000}}, 0},
		{"a waiting shape fits", []Room{{CPU: 8000, Memory: 8 * gi, GPUs: 4}}, []Shape{{CPU: 1000, GPUs: 2}}, 0},
		{"too few GPUs on the node", []Room{{CPU: 8000, Memory: 8 * gi, GPUs: 1}, {CPU: 8000, Memory: 8 * gi, GPUs: 3}}, []Shape{{CPU: 1000, GPUs: 2}}, 1},
		{"GPUs free but no CPU left", []Room{{CPU: 500, Memory: 8 * gi, GPUs: 4}}, []Shape{{CPU: 1000, GPUs: 1}}, 4},
		{"no memory left", []Room{{CPU: 8000, Memory: gi, GPUs: 2}}, []Shape{{CPU: 1000, Memory: 2 * gi, GPUs: 1}}, 2},
		{"any one shape is enough", []Room{{CPU: 8000, Memory: 8 * gi, GPUs: 2}}, []Shape{{GPUs: 8}, {GPUs: 1}}, 0},
		{"full nodes are not fragmented", []Room{{CPU: 8000, GPUs: 0}}, []Shape{{GPUs: 1}}, 0},
	}
	for _, c := range cases {
		if got := FragmentedGPUs(c.rooms, c.waiting); got != c.want {
			t.Errorf("%s: FragmentedGPUs = %d, want %d", c.name, got, c.want)
		}
	}
}

func TestPercentile(t *testing.T) {
	cases := []struct {
		values []float64
		p      float64
		want   float64
	}{
		{nil, 50, 0},
		{[]float64{7}, 95, 7},
		{[]float64{5, 1, 4, 2, 3}, 50, 3},
		{[]float64{5, 1, 4, 2, 3}, 95, 5},
		{[]float64{5, 1, 4, 2, 3}, 20, 1},
		{[]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 95, 10},
		{[]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 90, 9},
	}
	for _, c := range cases {
		if got := Percentile(c.values, c.p); got != c.want {
			t.Errorf("Percentile(%v, %v) = %v, want %v", c.values, c.p, got, c.want)
		}
	}
}

func TestCDF(t *testing.T) {
	xs, ps := CDF([]float64{3, 1, 2, 2})
	wantX, wantP := []float64{1, 2, 2, 3}, []float64{0.25, 0.5, 0.75, 1}
	for i := range wantX {
		if xs[i] != wantX[i] || ps[i] != wantP[i] {
			t.Fatalf("CDF = %v %v, want %v %v", xs, ps, wantX, wantP)
		}
	}
}

func TestTimeMean(t *testing.T) {
	s := time.Second
	cases := []struct {
		name    string
		at      []time.Duration
		end     time.Duration
		value   []float64
		include []bool
		want    float64
		ok      bool
	}{
		{"even samples", []time.Duration{0, s, 2 * s}, 3 * s, []float64{1, 2, 3}, []bool{true, true, true}, 2, true},
		{"uneven samples weigh by time", []time.Duration{0, 3 * s}, 4 * s, []float64{1, 5}, []bool{true, true}, 2, true},
		{"excluded samples", []time.Duration{0, s, 2 * s}, 3 * s, []float64{1, 100, 3}, []bool{true, false, true}, 2, true},
		{"nothing included", []time.Duration{0}, s, []float64{1}, []bool{false}, 0, false},
	}
	for _, c := range cases {
		got, ok := TimeMean(c.at, c.end, c.value, c.include)
		if ok != c.ok || math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: TimeMean = %v %v, want %v %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

func TestWaterFill(t *testing.T) {
	cases := []struct {
		name     string
		capacity float64
		weight   map[string]float64
		demand   map[string]float64
		want     map[string]float64
	}{
		{"by weight", 30, map[string]float64{"a": 1, "b": 2}, map[string]float64{"a": 100, "b": 100}, map[string]float64{"a": 10, "b": 20}},
		{"a small demand leaves the rest to the other", 30, map[string]float64{"a": 1, "b": 2}, map[string]float64{"a": 100, "b": 5}, map[string]float64{"a": 25, "b": 5}},
		{"demand below capacity", 30, map[string]float64{"a": 1, "b": 1}, map[string]float64{"a": 4, "b": 6}, map[string]float64{"a": 4, "b": 6}},
		{"no demand, no share", 30, map[string]float64{"a": 1, "b": 1}, map[string]float64{"a": 0, "b": 50}, map[string]float64{"a": 0, "b": 30}},
		{"missing weight counts as 1", 40, nil, map[string]float64{"a": 100, "b": 100}, map[string]float64{"a": 20, "b": 20}},
		{"three queues, one capped", 60, map[string]float64{"a": 1, "b": 1, "c": 1}, map[string]float64{"a": 10, "b": 100, "c": 100}, map[string]float64{"a": 10, "b": 25, "c": 25}},
	}
	for _, c := range cases {
		got := WaterFill(c.capacity, c.weight, c.demand)
		for q, want := range c.want {
			if math.Abs(got[q]-want) > 1e-6 {
				t.Errorf("%s: WaterFill[%s] = %v, want %v (all: %v)", c.name, q, got[q], want, got)
			}
		}
	}
}

func TestGangCounts(t *testing.T) {
	cases := []struct {
		name           string
		gangs          []GangOutcome
		split, partial int
	}{
		{"none", nil, 0, 0},
		{"started whole in one domain", []GangOutcome{{Started: true, MaxBound: 4, Domains: 1}}, 0, 0},
		{"never bound is not partial", []GangOutcome{{}}, 0, 0},
		{"bound in part, never started", []GangOutcome{{MaxBound: 3}}, 0, 1},
		{"split", []GangOutcome{{Started: true, MaxBound: 4, Domains: 2}}, 1, 0},
		{"split and partial", []GangOutcome{{MaxBound: 2, Domains: 2}, {Started: true, MaxBound: 8, Domains: 1}}, 1, 1},
	}
	for _, c := range cases {
		split, partial := GangCounts(c.gangs)
		if split != c.split || partial != c.partial {
			t.Errorf("%s: GangCounts = %d, %d, want %d, %d", c.name, split, partial, c.split, c.partial)
		}
	}
}

func TestTraceSummary(t *testing.T) {
	s := time.Second
	gang := Job{Name: "g", Replicas: 2, MinMember: 2, GPUs: 2, Queue: "a", Annotations: map[string]string{"scheduling.phalanx.dev/topology-required": "leaf"}}
	plain := Job{Name: "p", Replicas: 1, GPUs: 1, Queue: "b"}
	never := Job{Name: "n", Replicas: 2, MinMember: 2, GPUs: 4, Queue: "b", Arrival: Duration{2 * s}}
	sc := &Scenario{Name: "t", Jobs: []Job{gang, plain, never},
		Network: []phalanxv1alpha1.TopologyLevel{{Name: "leaf", NodeLabel: "leaf"}},
		Queues:  []Queue{{Name: "a", QueueSpec: phalanxv1alpha1.QueueSpec{Weight: 1}}, {Name: "b", QueueSpec: phalanxv1alpha1.QueueSpec{Weight: 1}}}}
	r := &Result{Scenario: sc, GPUs: 8, Elapsed: 10 * s,
		Nodes: []NodeResult{{Name: "n0", Labels: map[string]string{"leaf": "l0"}}, {Name: "n1", Labels: map[string]string{"leaf": "l1"}}},
		Jobs: []*JobResult{
			{Job: gang, Submitted: 0, QuorumAt: 1 * s, MaxBound: 2, Nodes: map[string]int{"n0": 1, "n1": 1}, MaxLiveDomains: 2,
				// Evicted after it started, resubmitted and started again at
				// 4 s: it waited from 0 to 4 s.
				Evicted: 2, LostGPUSeconds: 3, RestartedAt: 4 * s, CompletedGPUSeconds: 8},
			{Job: plain, Submitted: 0, QuorumAt: 3 * s, MaxBound: 1, Nodes: map[string]int{"n0": 1}, CompletedGPUSeconds: 2},
			{Job: never, Submitted: 2 * s, MaxBound: 1, Nodes: map[string]int{"n1": 1}},
		},
		// From 0 to 5s jobs wait and 4 GPUs are held, 2 of them useful;
		// from 5s nothing waits (not true of the jobs above, but the
		// samples are what counts) and all 8 are held.
		Samples: []Sample{
			{At: 0, GPUUsed: 4, UsefulGPU: 2, StrandedGPU: 2, FragGPU: 1, JobsWaiting: 1, QueueUsed: map[string]int64{"a": 4}, QueueWaitingGPU: map[string]int64{"b": 8},
				WaitCauses: map[string]int{WaitNoDomain: 3, WaitRoomHeld: 1}, HeldBy: map[string]int{"Unschedulable: x": 1}},
			{At: 5 * s, GPUUsed: 8, UsefulGPU: 8, QueueUsed: map[string]int64{"a": 4, "b": 4}},
		},
	}
	got := TraceRun{Scheduler: "x", Speed: 10, Result: r}.Summary()
	if got.Started != 2 || got.Jobs != 3 {
		t.Errorf("started %d of %d, want 2 of 3", got.Started, got.Jobs)
	}
	if got.Alloc != 0.75 || got.AllocWaiting != 0.5 || got.UsefulWaiting != 0.25 || got.FragWaiting != 0.125 {
		t.Errorf("allocation %v / %v, useful %v, fragmentation %v; want 0.75 / 0.5, 0.25, 0.125", got.Alloc, got.AllocWaiting, got.UsefulWaiting, got.FragWaiting)
	}
	if got.WaitingSeconds != 50 {
		t.Errorf("waiting %v trace seconds, want 50", got.WaitingSeconds)
	}
	// Waits in trace seconds: 40 (to its restart), 30, and 80 for the job
	// that never started.
	if got.WaitP50 != 40 || got.WaitP95 != 80 {
		t.Errorf("waits %v: p50 %v p95 %v, want 40 and 80", got.Waits, got.WaitP50, got.WaitP95)
	}
	if got.Goodput != 100 || got.LostGPUSeconds != 30 || got.Restarted != 1 || got.Evicted != 2 {
		t.Errorf("goodput %v, lost %v GPU·s, %d restarted, %d evicted; want 100, 30, 1, 2", got.Goodput, got.LostGPUSeconds, got.Restarted, got.Evicted)
	}
	if got.Split != 1 || got.Partial != 1 {
		t.Errorf("split %d partial %d, want 1 and 1", got.Split, got.Partial)
	}
	if got.StrandedPeak != 2 || got.StrandedMean != 1 {
		t.Errorf("stranded mean %v peak %d, want 1 and 2", got.StrandedMean, got.StrandedPeak)
	}
	// 3 jobs waited for a domain, 1 with room, the whole time jobs waited.
	if got.WaitCauses[WaitNoDomain] != 0.75 || got.WaitCauses[WaitRoomHeld] != 0.25 || got.WaitCauses[WaitNoRoom] != 0 {
		t.Errorf("wait causes %v, want no domain 0.75, room held 0.25", got.WaitCauses)
	}
	if want := []WordShare{{"Unschedulable: x", 1}}; !reflect.DeepEqual(got.HeldBy, want) {
		t.Errorf("room held by %v, want %v", got.HeldBy, want)
	}
	// While jobs waited, a held 4 of 8 and deserved 4 (b asked 8: equal
	// weights split the 8 GPUs 4/4).
	if len(got.Queues) != 2 || got.Queues[0].Share != 0.5 || got.Queues[0].Deserved != 0.5 || got.Queues[1].Share != 0 || got.Queues[1].Deserved != 0.5 {
		t.Errorf("queues %+v", got.Queues)
	}
}

// TestUsefulSettled: only the time when a job has waited SettleSeconds or
// more counts for the settled useful allocation.
func TestUsefulSettled(t *testing.T) {
	const s = time.Second
	r := &Result{Scenario: &Scenario{Name: "t"}, GPUs: 8, Elapsed: 10 * s, SubmitLag: 2 * s,
		Samples: []Sample{
			// At 10x: a job waiting 10 trace seconds, then 70.
			{At: 0, UsefulGPU: 2, JobsWaiting: 1, LongestWait: 1 * s},
			{At: 5 * s, UsefulGPU: 6, JobsWaiting: 1, LongestWait: 7 * s},
		},
	}
	got := TraceRun{Scheduler: "x", Speed: 10, Result: r}.Summary()
	if got.UsefulWaiting != 0.5 || got.UsefulSettled != 0.75 || got.SettledSeconds != 50 {
		t.Errorf("useful while waiting %v, settled %v over %v s; want 0.5, 0.75 over 50 s", got.UsefulWaiting, got.UsefulSettled, got.SettledSeconds)
	}
	// The replay's own lags, in trace seconds.
	if got.SubmitLag != 20 || got.SampleGap != 50 {
		t.Errorf("submission lag %v s, sample gap %v s; want 20 and 50", got.SubmitLag, got.SampleGap)
	}
}

// TestWaitCause: by room alone, per node (CPU, memory and GPUs), then per
// domain of the required level.
func TestWaitCause(t *testing.T) {
	gpu := Shape{CPU: 1000, Memory: 1 << 30, GPUs: 1}
	room := func(gpus int64) Room { return Room{CPU: 8000, Memory: 64 << 30, GPUs: gpus} }
	for _, tc := range []struct {
		name    string
		rooms   []Room
		domains []string
		shape   Shape
		need    int
		want    string
	}{
		{"too few GPUs free", []Room{room(2), room(1)}, nil, gpu, 4, WaitNoRoom},
		{"GPUs free but no CPU beside them", []Room{{CPU: 500, Memory: 64 << 30, GPUs: 8}}, nil, gpu, 1, WaitNoRoom},
		{"room without a requirement", []Room{room(2), room(2)}, nil, gpu, 4, WaitRoomHeld},
		{"room, but split over domains", []Room{room(2), room(2)}, []string{"l0", "l1"}, gpu, 4, WaitNoDomain},
		{"room in one domain", []Room{room(2), room(2), room(1)}, []string{"l0", "l0", "l1"}, gpu, 4, WaitRoomHeld},
		{"unlabelled nodes are no domain", []Room{room(4)}, []string{""}, gpu, 4, WaitNoDomain},
		{"a CPU-only pod", []Room{room(0)}, nil, Shape{CPU: 2000}, 4, WaitRoomHeld},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := WaitCause(tc.rooms, tc.domains, tc.shape, tc.need); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestSchedulerWord: pods refused for the same reason with other numbers
// and names count as one word; a pod never refused says so.
func TestSchedulerWord(t *testing.T) {
	refused := func(reason, msg string) *v1.Pod {
		return &v1.Pod{Status: v1.PodStatus{Conditions: []v1.PodCondition{
			{Type: v1.PodReady, Reason: "ignored"},
			{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: reason, Message: msg},
		}}}
	}
	a := SchedulerWord(refused("Unschedulable", "0/64 nodes are available: 12 Insufficient nvidia.com/gpu."))
	b := SchedulerWord(refused("Unschedulable", "0/64 nodes are available: 7 Insufficient nvidia.com/gpu."))
	if a != b || a != "Unschedulable: #/# nodes are available: # Insufficient nvidia.com/gpu." {
		t.Errorf("words %q and %q, want one word without the counts", a, b)
	}
	if got := SchedulerWord(refused("Unschedulable", "room held for gang default/job-0012; 3 nodes")); got != "Unschedulable: room held for gang default/job-#" {
		t.Errorf("word %q: the details after ';' should go", got)
	}
	if got := SchedulerWord(&v1.Pod{}); got != WordNotTried {
		t.Errorf("word of a pod never tried: %q", got)
	}
}
