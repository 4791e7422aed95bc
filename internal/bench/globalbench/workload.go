package globalbench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/phalanx-sched/phalanx/internal/global"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

const gpu = v1.ResourceName("nvidia.com/gpu")

// epoch is simulated time zero.
var epoch = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// Gang sizes and how often each is drawn: many small jobs, few whole
// 32-GPU ones.
var (
	sizes       = []int64{4, 8, 16, 32}
	sizeWeights = []float64{0.4, 0.3, 0.2, 0.1}
)

const (
	runSigma = 1.0
	minRun   = 2 * time.Minute
	maxRun   = 8 * time.Hour
)

// simJob is a job of the stream with what the simulation knows about it.
type simJob struct {
	*global.Job
	Team   int
	GPUs   int64
	Submit time.Duration
	Run    time.Duration
	// Dispatched, Start and End are simulated times (-1 until known).
	Dispatched, Start, End time.Duration
}

func gpus(n int64) resources.List { return resources.List{gpu: n} }

// meanSize is the mean of sizes under sizeWeights.
func meanSize() float64 {
	var m float64
	for i, s := range sizes {
		m += float64(s) * sizeWeights[i]
	}
	return m
}

func drawSize(r *rand.Rand) int64 {
	x := r.Float64()
	for i, w := range sizeWeights {
		if x < w {
			return sizes[i]
		}
		x -= w
	}
	return sizes[len(sizes)-1]
}

// drawRun is log-normal around the median, bounded.
func drawRun(r *rand.Rand, median time.Duration) time.Duration {
	d := time.Duration(float64(median) * math.Exp(runSigma*r.NormFloat64()))
	return min(max(d, minRun), maxRun).Round(time.Second)
}

// stream draws the jobs submitted over the window: Poisson arrivals at the
// rate that offers o.Load of the GPUs, each to a team chosen uniformly
// (every team asks for the same, whatever its weight).
func stream(o Options, members int, seed uint64) []*simJob {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	meanRun := float64(o.MedianRun) * math.Exp(runSigma*runSigma/2)
	rate := o.Load * float64(int64(members)*o.GPUs) / (meanSize() * meanRun) // jobs per ns
	var out []*simJob
	for at := time.Duration(r.ExpFloat64() / rate); at < o.Window; at += time.Duration(r.ExpFloat64() / rate) {
		out = append(out, newJob(len(out), r.IntN(len(o.Weights)), drawSize(r), at.Round(time.Second), drawRun(r, o.MedianRun)))
	}
	return out
}

func newJob(i, teamIndex int, size int64, submit, run time.Duration) *simJob {
	name := fmt.Sprintf("job-%05d", i)
	return &simJob{
		Job: &global.Job{Key: "bench/" + name, UID: types.UID(name), Namespace: "bench", Kind: "Job", Name: name,
			Queue: team(teamIndex), Created: epoch.Add(submit), Request: gpus(size)},
		Team: teamIndex, GPUs: size, Submit: submit, Run: run, Dispatched: -1, Start: -1, End: -1,
	}
}
