package globalbench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestStreamDrawsGangsOverTheWindow(t *testing.T) {
	o := Defaults()
	o.Window = 24 * time.Hour
	jobs := stream(o, 20, 7)
	if len(jobs) < 100 {
		t.Fatalf("%d jobs in a day on 20 members", len(jobs))
	}
	var offered float64
	teams := make([]int, len(o.Weights))
	for i, j := range jobs {
		switch {
		case !slices.Contains(sizes, j.GPUs) || j.Request[gpu] != j.GPUs:
			t.Fatalf("job %s asks %d GPUs (request %v), want one of %v", j.Name, j.GPUs, j.Request, sizes)
		case j.Submit < 0 || j.Submit >= o.Window:
			t.Fatalf("job %s submitted at %v, outside the window", j.Name, j.Submit)
		case i > 0 && j.Submit < jobs[i-1].Submit:
			t.Fatalf("job %s submitted at %v before the one ahead of it (%v)", j.Name, j.Submit, jobs[i-1].Submit)
		case j.Run < minRun || j.Run > maxRun:
			t.Fatalf("job %s runs %v, outside %v–%v", j.Name, j.Run, minRun, maxRun)
		case j.Queue != team(j.Team) || !j.Created.Equal(epoch.Add(j.Submit)):
			t.Fatalf("job %s: queue %s team %d created %v", j.Name, j.Queue, j.Team, j.Created)
		case j.Member != "" || j.Dispatched != -1 || j.Start != -1 || j.End != -1:
			t.Fatalf("job %s is not fresh: %+v", j.Name, j)
		}
		offered += float64(j.GPUs) * j.Run.Seconds()
		teams[j.Team]++
	}
	// The offered load is o.Load of the GPUs, within sampling noise and
	// the run-time bounds.
	load := offered / (float64(20*o.GPUs) * o.Window.Seconds())
	if math.Abs(load-o.Load)/o.Load > 0.25 {
		t.Fatalf("offered load %.2f, want about %.2f", load, o.Load)
	}
	// Teams submit alike whatever their weight.
	for i, n := range teams {
		if share := float64(n) / float64(len(jobs)); math.Abs(share-1.0/3) > 0.08 {
			t.Fatalf("team %d submitted %d of %d jobs", i, n, len(jobs))
		}
	}
}

func TestStreamIsDeterministicPerSeed(t *testing.T) {
	o := Defaults()
	a, b, c := stream(o, 3, 1), stream(o, 3, 1), stream(o, 3, 2)
	same := func(x, y []*simJob) bool {
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i].GPUs != y[i].GPUs || x[i].Submit != y[i].Submit || x[i].Run != y[i].Run || x[i].Team != y[i].Team {
				return false
			}
		}
		return true
	}
	if !same(a, b) {
		t.Fatal("seed 1 drew two different streams")
	}
	if same(a, c) {
		t.Fatal("seeds 1 and 2 drew the same stream")
	}
}

func TestStreamScalesWithTheMembers(t *testing.T) {
	o := Defaults()
	o.Window = 12 * time.Hour
	few, many := len(stream(o, 3, 3)), len(stream(o, 30, 3))
	if ratio := float64(many) / float64(few); ratio < 7 || ratio > 13 {
		t.Fatalf("%d jobs on 3 members, %d on 30: ratio %.1f, want about 10", few, many, ratio)
	}
}

func TestDrawSizeFollowsItsWeights(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	counts := map[int64]int{}
	const n = 20000
	for range n {
		counts[drawSize(r)]++
	}
	for i, s := range sizes {
		if got := float64(counts[s]) / n; math.Abs(got-sizeWeights[i]) > 0.02 {
			t.Fatalf("size %d drawn %.3f of the time, want %.2f", s, got, sizeWeights[i])
		}
	}
	if m := meanSize(); math.Abs(m-10.4) > 1e-9 {
		t.Fatalf("mean size %v, want 10.4", m)
	}
}

func TestDrawRunIsBoundedAroundItsMedian(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var runs []time.Duration
	for range 5001 {
		d := drawRun(r, 20*time.Minute)
		if d < minRun || d > maxRun || d != d.Round(time.Second) {
			t.Fatalf("run %v outside %v–%v or not whole seconds", d, minRun, maxRun)
		}
		runs = append(runs, d)
	}
	slices.Sort(runs)
	if med := runs[len(runs)/2]; med < 18*time.Minute || med > 22*time.Minute {
		t.Fatalf("median run %v, want about 20m", med)
	}
}
