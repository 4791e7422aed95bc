package stats

import (
	"math"
	"testing"
)

func TestSpreadOf(t *testing.T) {
	tests := []struct {
		in   []float64
		want Spread
	}{
		{[]float64{3, 1, 2}, Spread{2, 1, 3}},
		{[]float64{4, 1, 2, 3}, Spread{2.5, 1, 4}},
		{[]float64{math.NaN(), 5}, Spread{5, 5, 5}},
	}
	for _, tc := range tests {
		if got := SpreadOf(tc.in); got != tc.want {
			t.Errorf("SpreadOf(%v) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
	if got := SpreadOf(nil).Format("%.0f"); got != "-" {
		t.Errorf("empty spread formats as %q, want -", got)
	}
	if got := (Spread{2, 1, 3}).Format("%.1f"); got != "2.0 (1.0–3.0)" {
		t.Errorf("Format = %q", got)
	}
}

func TestSpreadOfLeavesOutNonFinite(t *testing.T) {
	tests := []struct {
		name string
		in   []float64
		want Spread
	}{
		{"infinities", []float64{math.Inf(1), 4, math.Inf(-1), 2}, Spread{3, 2, 4}},
		{"one value", []float64{7}, Spread{7, 7, 7}},
		{"input order kept", []float64{9, 8}, Spread{8.5, 8, 9}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]float64(nil), tc.in...)
			if got := SpreadOf(in); got != tc.want {
				t.Errorf("SpreadOf(%v) = %+v, want %+v", tc.in, got, tc.want)
			}
			for i := range in {
				if in[i] != tc.in[i] {
					t.Errorf("SpreadOf reordered its input: %v", in)
				}
			}
		})
	}
	if got := SpreadOf([]float64{math.NaN(), math.Inf(1)}); !math.IsNaN(got.Median) || !math.IsNaN(got.Min) || !math.IsNaN(got.Max) {
		t.Errorf("SpreadOf(only non-finite) = %+v, want NaNs", got)
	}
}

func TestSpreadFormat(t *testing.T) {
	tests := []struct {
		s    Spread
		verb string
		want string
	}{
		{Spread{5, 5, 5}, "%.0f", "5"},
		{Spread{231, 225, 240}, "%.0f", "231 (225–240)"},
		{Spread{0.5, 0.25, 1}, "%.2f", "0.50 (0.25–1.00)"},
		{Spread{math.NaN(), 1, 2}, "%.1f", "-"},
	}
	for _, tc := range tests {
		if got := tc.s.Format(tc.verb); got != tc.want {
			t.Errorf("%+v.Format(%q) = %q, want %q", tc.s, tc.verb, got, tc.want)
		}
	}
}

func TestLatencyOf(t *testing.T) {
	var ms []float64
	for i := 20; i >= 1; i-- {
		ms = append(ms, float64(i))
	}
	if got, want := LatencyOf(ms), (Latency{Median: 10.5, Min: 1, Max: 20, P95: 19}); got != want {
		t.Errorf("LatencyOf(1..20) = %+v, want %+v", got, want)
	}
	if got := LatencyOf([]float64{7}); got != (Latency{7, 7, 7, 7}) {
		t.Errorf("LatencyOf([7]) = %+v", got)
	}
	if got := LatencyOf(nil); !math.IsNaN(got.P95) {
		t.Errorf("LatencyOf(nil) = %+v, want NaN", got)
	}
}
