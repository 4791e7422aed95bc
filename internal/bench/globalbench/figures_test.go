package globalbench

import (
	"math"
	"testing"
	"time"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 || (math.IsNaN(a) && math.IsNaN(b)) }

func TestWaitSecondsIsTheNearestRank(t *testing.T) {
	var waits []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		waits = append(waits, time.Duration(i)*time.Second)
	}
	r := runResult{Waits: waits}
	cases := []struct {
		q    float64
		want float64
	}{{0.5, 50}, {0.99, 99}, {1, 100}, {0, 1}}
	for _, c := range cases {
		if got := r.waitSeconds(c.q); got != c.want {
			t.Errorf("q %v: %v s, want %v", c.q, got, c.want)
		}
	}
	if waits[0] != 100*time.Second {
		t.Fatal("waitSeconds sorted the result's own waits")
	}
	if !math.IsNaN((runResult{}).waitSeconds(0.5)) {
		t.Fatal("no waits should give NaN")
	}
}

func TestSharesAndShareError(t *testing.T) {
	cases := []struct {
		name    string
		seconds []float64
		weights []int32
		shares  []float64
		err     float64
	}{
		{"on target", []float64{200, 100, 100}, []int32{2, 1, 1}, []float64{50, 25, 25}, 0},
		{"equal instead of 2:1:1", []float64{100, 100, 100}, []int32{2, 1, 1}, []float64{100.0 / 3, 100.0 / 3, 100.0 / 3}, 50 - 100.0/3},
		{"two teams, 2:1, one over", []float64{50, 50}, []int32{2, 1}, []float64{50, 50}, 50 - 100.0/3},
		{"never contended", []float64{0, 0}, []int32{2, 1}, []float64{math.NaN(), math.NaN()}, math.NaN()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := runResult{TeamGPUSeconds: c.seconds}
			got := r.shares()
			for i := range c.shares {
				if !near(got[i], c.shares[i]) {
					t.Fatalf("shares %v, want %v", got, c.shares)
				}
			}
			if e := r.shareError(c.weights); !near(e, c.err) {
				t.Fatalf("share error %v, want %v", e, c.err)
			}
		})
	}
}

func TestUtilisationAndRates(t *testing.T) {
	r := runResult{GPUSeconds: 64 * 3600, Capacity: 128, Span: 2 * time.Hour, BusyUsed: 90, BusyOffered: 120,
		Dispatched: 50, PassWall: 500 * time.Millisecond, Passes: 10}
	checks := []struct {
		name      string
		got, want float64
	}{
		{"utilisation", r.utilisation(), 25},
		{"while waiting", r.busyUtilisation(), 75},
		{"dispatched per second of pass", r.dispatchRate(), 100},
		{"mean pass ms", r.meanPassMS(), 50},
	}
	for _, c := range checks {
		if !near(c.got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	empty := runResult{}
	if !math.IsNaN(empty.busyUtilisation()) || !math.IsNaN(empty.meanPassMS()) {
		t.Error("a run with nothing waiting and no passes should give NaN, not a figure")
	}
}

func TestTargetsAreTheWeightsInPercent(t *testing.T) {
	got := targets([]int32{2, 1, 1})
	for i, want := range []float64{50, 25, 25} {
		if !near(got[i], want) {
			t.Fatalf("targets %v", got)
		}
	}
}
