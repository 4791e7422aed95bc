package metrics

import (
	"math"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
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
