package metrics

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
)

// TestEachSpan: a sample stands for the time until the next one (the last
// until end); excluded and empty spans are not called.
func TestEachSpan(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		name    string
		at      []time.Duration
		end     time.Duration
		include []bool
		want    []string // "i:dt"
	}{
		{"last runs to the end", []time.Duration{0, 2 * s}, 5 * s, []bool{true, true}, []string{"0:2", "1:3"}},
		{"excluded skipped", []time.Duration{0, s, 3 * s}, 4 * s, []bool{false, true, false}, []string{"1:2"}},
		{"two samples at once", []time.Duration{0, s, s}, 2 * s, []bool{true, true, true}, []string{"0:1", "2:1"}},
		{"end before the last sample", []time.Duration{0, 3 * s}, 2 * s, []bool{true, true}, []string{"0:3"}},
		{"no samples", nil, s, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			EachSpan(tc.at, tc.end, tc.include, func(i int, dt float64) { got = append(got, fmt.Sprintf("%d:%g", i, dt)) })
			if !slices.Equal(got, tc.want) {
				t.Errorf("spans %v, want %v", got, tc.want)
			}
		})
	}
}

// TestCopiesIn: the scarcest resource the pod asks for bounds the copies;
// a pod asking nothing fits without bound.
func TestCopiesIn(t *testing.T) {
	room := Room{CPU: 8000, Memory: 16 << 30, GPUs: 4}
	for _, tc := range []struct {
		name  string
		shape Shape
		want  int
	}{
		{"GPUs bound", Shape{CPU: 1000, Memory: 1 << 30, GPUs: 1}, 4},
		{"CPU bound", Shape{CPU: 3000, GPUs: 1}, 2},
		{"memory bound", Shape{Memory: 5 << 30}, 3},
		{"too big", Shape{GPUs: 5}, 0},
		{"asks nothing", Shape{}, 1 << 20},
	} {
		if got := copiesIn(tc.shape, room); got != tc.want {
			t.Errorf("%s: copiesIn = %d, want %d", tc.name, got, tc.want)
		}
		if fits := tc.shape.Fits(room); fits != (tc.want > 0) {
			t.Errorf("%s: Fits = %v with %d copies", tc.name, fits, tc.want)
		}
	}
}

// TestWaterFillConserves: no queue gets more than it asks for, and the
// capacity is all handed out unless the demand is smaller.
func TestWaterFillConserves(t *testing.T) {
	weight := map[string]float64{"a": 1, "b": 3, "c": 0.5, "d": 0}
	for _, demand := range []map[string]float64{
		{"a": 7, "b": 1, "c": 30, "d": 2},
		{"a": 100, "b": 100, "c": 100, "d": 100},
		{"a": 1, "b": 2, "c": 3, "d": 4},
		{"a": 0, "b": 0},
	} {
		got := WaterFill(20, weight, demand)
		var sum, asked float64
		for q, d := range demand {
			if got[q] < 0 || got[q] > d+1e-9 {
				t.Errorf("demand %v: %s gets %v", demand, q, got[q])
			}
			sum += got[q]
			asked += d
		}
		if want := math.Min(20, asked); math.Abs(sum-want) > 1e-6 {
			t.Errorf("demand %v: handed out %v, want %v (%v)", demand, sum, want, got)
		}
	}
}

func TestPercentileKeepsInput(t *testing.T) {
	values := []float64{3, 1, 2}
	_ = Percentile(values, 50)
	if !slices.Equal(values, []float64{3, 1, 2}) {
		t.Errorf("Percentile reordered its input: %v", values)
	}
}

// TestSchedulerWordClipsRunes: a long message is cut at 100 runes, never
// inside one.
func TestSchedulerWordClipsRunes(t *testing.T) {
	msg := strings.Repeat("é", 150)
	p := &v1.Pod{Status: v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodScheduled, Reason: "R", Message: msg}}}}
	got := SchedulerWord(p)
	if !utf8.ValidString(got) || got != "R: "+strings.Repeat("é", 100)+"…" {
		t.Errorf("word %q, want 100 runes and a mark", got)
	}
	if DomainKey("leaf", "l0") != "leaf=l0" {
		t.Errorf("DomainKey = %q", DomainKey("leaf", "l0"))
	}
}
