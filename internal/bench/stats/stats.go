// Package stats summarises repeated measurements for the benchmarks'
// tables: the median and range of a set of figures, and the latency
// percentiles of timed calls.
package stats

import (
	"fmt"
	"math"
	"sort"
)

// Spread is the median and range of a set of figures.
type Spread struct{ Median, Min, Max float64 }

// SpreadOf summarises values (NaN ones are left out).
func SpreadOf(values []float64) Spread {
	var v []float64
	for _, x := range values {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return Spread{math.NaN(), math.NaN(), math.NaN()}
	}
	sort.Float64s(v)
	m := v[len(v)/2]
	if len(v)%2 == 0 {
		m = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return Spread{Median: m, Min: v[0], Max: v[len(v)-1]}
}

// Format prints the spread with the given verb, e.g. "%.0f" → "231 (225–240)".
func (s Spread) Format(verb string) string {
	if math.IsNaN(s.Median) {
		return "-"
	}
	if s.Min == s.Max {
		return fmt.Sprintf(verb, s.Median)
	}
	return fmt.Sprintf(verb+" ("+verb+"–"+verb+")", s.Median, s.Min, s.Max)
}

// Latency is the median, range and 95th percentile of call durations (ms).
type Latency struct{ Median, Min, Max, P95 float64 }

// LatencyOf summarises durations; the 95th percentile is the nearest rank.
func LatencyOf(ms []float64) Latency {
	if len(ms) == 0 {
		return Latency{math.NaN(), math.NaN(), math.NaN(), math.NaN()}
	}
	s := SpreadOf(ms)
	v := append([]float64(nil), ms...)
	sort.Float64s(v)
	rank := int(math.Ceil(0.95*float64(len(v)))) - 1
	return Latency{Median: s.Median, Min: s.Min, Max: s.Max, P95: v[max(rank, 0)]}
}
