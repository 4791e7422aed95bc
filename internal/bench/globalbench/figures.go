package globalbench

import (
	"math"
	"sort"
	"time"
)

// dispatchRate is jobs dispatched per second of the passes' wall time.
func (r runResult) dispatchRate() float64 {
	return float64(r.Dispatched) / math.Max(r.PassWall.Seconds(), 1e-9)
}

// meanPassMS is the mean pass's wall time.
func (r runResult) meanPassMS() float64 {
	if r.Passes == 0 {
		return math.NaN()
	}
	return float64(r.PassWall) / float64(r.Passes) / 1e6
}

// waitSeconds is the q-quantile (nearest rank) of the jobs' waits.
func (r runResult) waitSeconds(q float64) float64 {
	if len(r.Waits) == 0 {
		return math.NaN()
	}
	w := append([]time.Duration(nil), r.Waits...)
	sort.Slice(w, func(a, b int) bool { return w[a] < w[b] })
	rank := int(math.Ceil(q*float64(len(w)))) - 1
	return w[min(max(rank, 0), len(w)-1)].Seconds()
}

// utilisation is the GPU-seconds run over all GPUs from the first
// submission to the last end, in percent.
func (r runResult) utilisation() float64 {
	return 100 * r.GPUSeconds / (float64(r.Capacity) * math.Max(r.Span.Seconds(), 1e-9))
}

// busyUtilisation is the GPUs used while some job waited, in percent.
func (r runResult) busyUtilisation() float64 {
	if r.BusyOffered == 0 {
		return math.NaN()
	}
	return 100 * r.BusyUsed / r.BusyOffered
}

// shares are each team's part of the GPU-seconds run while every team had
// a job waiting, in percent.
func (r runResult) shares() []float64 {
	var total float64
	for _, s := range r.TeamGPUSeconds {
		total += s
	}
	out := make([]float64, len(r.TeamGPUSeconds))
	for i, s := range r.TeamGPUSeconds {
		out[i] = math.NaN()
		if total > 0 {
			out[i] = 100 * s / total
		}
	}
	return out
}

// targets are the teams' weights as percentages.
func targets(weights []int32) []float64 {
	var sum float64
	for _, w := range weights {
		sum += float64(w)
	}
	out := make([]float64, len(weights))
	for i, w := range weights {
		out[i] = 100 * float64(w) / sum
	}
	return out
}

// shareError is the largest distance, in percentage points, of a team's
// share from its weight's.
func (r runResult) shareError(weights []int32) float64 {
	want := targets(weights)
	worst := 0.0
	for i, s := range r.shares() {
		if math.IsNaN(s) {
			return math.NaN()
		}
		worst = math.Max(worst, math.Abs(s-want[i]))
	}
	return worst
}
