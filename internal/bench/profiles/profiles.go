// Package profiles summarises the pprof profiles the benchmarks take of a
// scheduler (top functions by flat and cumulative share, phalanx's own) and
// collects a process's CPU profile in windows from its pprof endpoint.
package profiles

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/pprof/profile"
)

// phalanxPackage marks phalanx's own functions in profiles.
const phalanxPackage = "github.com/phalanx-sched/phalanx/"

// FuncCost is one function's share of a profile.
type FuncCost struct {
	Func string
	// Flat is the share of samples in the function itself, Cum in it and
	// everything it calls (0..1).
	Flat, Cum float64
}

// Top summarises a profile: the functions with the most flat time, those
// outside the Go runtime with the most cumulative time, and phalanx's own
// functions by cumulative time.
type Top struct {
	Kind  string // "cpu" or "lock" (block profile samples waiting on a lock)
	Total float64
	Unit  string
	Flat  []FuncCost
	Cum   []FuncCost
	Own   []FuncCost
	// Path is where the raw profile was written ("" if not kept).
	Path string
	// Note says what the profile misses.
	Note string
}

// lockFuncs are where a goroutine blocks on a lock. The block profile also
// records goroutines idling in select and channel receives (informers,
// workers waiting for work); only lock waits are contention.
var lockFuncs = map[string]bool{
	"sync.(*Mutex).Lock": true, "sync.(*Mutex).lockSlow": true,
	"sync.(*RWMutex).Lock": true, "sync.(*RWMutex).RLock": true,
}

// WaitsOnLock reports whether a block-profile sample waits on a lock.
func WaitsOnLock(s *profile.Sample) bool {
	for _, loc := range s.Location {
		for _, line := range loc.Line {
			if line.Function != nil && lockFuncs[line.Function.Name] {
				return true
			}
		}
	}
	return false
}

// infrastructure are functions too generic to say where time goes.
func infrastructure(fn string) bool {
	for _, prefix := range []string{"runtime.", "sync.", "internal/", "k8s.io/apimachinery/pkg/util/wait.", "k8s.io/kubernetes/pkg/scheduler/framework/parallelize.", "k8s.io/client-go/util/workqueue."} {
		if strings.HasPrefix(fn, prefix) {
			return true
		}
	}
	return false
}

// Summarise computes flat and cumulative shares per function of sample
// value index vi over the samples keep accepts (nil: all), and keeps the n
// largest.
func Summarise(p *profile.Profile, kind string, vi, n int, keep func(*profile.Sample) bool) Top {
	flat, cum := map[string]float64{}, map[string]float64{}
	total := 0.0
	for _, s := range p.Sample {
		if keep != nil && !keep(s) {
			continue
		}
		v := float64(s.Value[vi])
		total += v
		seen := map[string]bool{}
		for li, loc := range s.Location {
			for lj, line := range loc.Line {
				if line.Function == nil {
					continue
				}
				fn := line.Function.Name
				if li == 0 && lj == 0 {
					flat[fn] += v
				}
				if !seen[fn] {
					seen[fn] = true
					cum[fn] += v
				}
			}
		}
	}
	t := Top{Kind: kind, Total: total, Unit: p.SampleType[vi].Unit}
	if total == 0 {
		return t
	}
	for fn, v := range flat {
		t.Flat = append(t.Flat, FuncCost{Func: fn, Flat: v / total, Cum: cum[fn] / total})
	}
	for fn, v := range cum {
		fc := FuncCost{Func: fn, Flat: flat[fn] / total, Cum: v / total}
		if strings.HasPrefix(fn, phalanxPackage) {
			t.Own = append(t.Own, fc)
		}
		if !infrastructure(fn) {
			t.Cum = append(t.Cum, fc)
		}
	}
	sort.Slice(t.Flat, func(i, j int) bool {
		if t.Flat[i].Flat != t.Flat[j].Flat {
			return t.Flat[i].Flat > t.Flat[j].Flat
		}
		return t.Flat[i].Func < t.Flat[j].Func
	})
	byCum := func(l []FuncCost) {
		sort.Slice(l, func(i, j int) bool {
			if l[i].Cum != l[j].Cum {
				return l[i].Cum > l[j].Cum
			}
			return l[i].Func < l[j].Func
		})
	}
	byCum(t.Own)
	byCum(t.Cum)
	t.Flat, t.Cum, t.Own = Head(t.Flat, n), Head(t.Cum, n), Head(t.Own, n)
	return t
}

// CPUProfiler collects a scheduler's CPU profile in short windows from its
// pprof endpoint, from the process's start until stopped; windows that
// start before readiness make the startup profile, the others the run's.
type CPUProfiler struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	parts  []window
	ready  time.Time
	err    error
	failed int // windows lost
	// peakHeap is the heap profile with the most bytes in use of those taken
	// after each window: peak RSS follows the live heap at its largest, which
	// the heap at the end of a pass does not show.
	peakHeap      *profile.Profile
	peakHeapBytes int64
}

type window struct {
	start time.Time
	prof  *profile.Profile
}

const cpuWindowSeconds = 2

// Get reads a path of a process's debug server ("/debug/pprof/heap").
type Get func(ctx context.Context, path string) ([]byte, error)

// StartCPUProfile starts taking CPU profile windows (and a heap profile
// after each) through get until Stop or Cancel.
func StartCPUProfile(ctx context.Context, get Get) *CPUProfiler {
	ctx, cancel := context.WithCancel(ctx)
	cp := &CPUProfiler{cancel: cancel}
	cp.wg.Add(1)
	go func() {
		defer cp.wg.Done()
		for ctx.Err() == nil {
			// The window in flight when the run ends is finished, not
			// cancelled: a cancelled request returns no profile at all. A
			// failed window (a loaded scheduler answering late) is counted
			// and the next one starts; before the first success the process
			// is not serving yet, and nothing is lost.
			start := time.Now()
			raw, err := get(context.Background(), fmt.Sprintf("/debug/pprof/profile?seconds=%d", cpuWindowSeconds))
			var p *profile.Profile
			if err == nil {
				p, err = profile.ParseData(raw)
			}
			var heap *profile.Profile
			if err == nil {
				if raw, herr := get(context.Background(), "/debug/pprof/heap"); herr == nil {
					heap, _ = profile.ParseData(raw)
				}
			}
			cp.mu.Lock()
			switch {
			case err == nil:
				cp.parts = append(cp.parts, window{start: start, prof: p})
			case len(cp.parts) == 0:
			default:
				cp.err, cp.failed = err, cp.failed+1
			}
			if inUse := heapInUse(heap); heap != nil && inUse > cp.peakHeapBytes {
				cp.peakHeap, cp.peakHeapBytes = heap, inUse
			}
			cp.mu.Unlock()
			if err != nil {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	return cp
}

// MarkReady ends the startup: windows that start later are the run's.
func (cp *CPUProfiler) MarkReady(at time.Time) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.ready = at
}

// Lost says how many windows failed.
func (cp *CPUProfiler) Lost() string {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.failed == 0 {
		return ""
	}
	return fmt.Sprintf("%d of %d %ds windows lost (last error: %v)", cp.failed, cp.failed+len(cp.parts), cpuWindowSeconds, cp.err)
}

// heapInUse sums a heap profile's in-use bytes (its last sample type).
func heapInUse(p *profile.Profile) int64 {
	if p == nil || len(p.SampleType) == 0 {
		return 0
	}
	vi := len(p.SampleType) - 1
	var total int64
	for _, s := range p.Sample {
		total += s.Value[vi]
	}
	return total
}

// Cancel ends the windows without waiting (Stop already does).
func (cp *CPUProfiler) Cancel() { cp.cancel() }

// Peak is the heap profile with the most bytes in use, nil if none was taken.
func (cp *CPUProfiler) Peak() *profile.Profile {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.peakHeap
}

// Stop waits for the last window and merges the windows of the startup
// (nil if none) and of the run.
func (cp *CPUProfiler) Stop() (startup, run *profile.Profile, err error) {
	cp.cancel()
	cp.wg.Wait()
	cp.mu.Lock()
	defer cp.mu.Unlock()
	var before, after []*profile.Profile
	for _, w := range cp.parts {
		if w.start.Before(cp.ready) {
			before = append(before, w.prof)
		} else {
			after = append(after, w.prof)
		}
	}
	if len(after) == 0 {
		if cp.err == nil {
			cp.err = fmt.Errorf("no CPU profile windows")
		}
		return nil, nil, cp.err
	}
	if len(before) > 0 {
		if startup, err = profile.Merge(before); err != nil {
			return nil, nil, err
		}
	}
	run, err = profile.Merge(after)
	return startup, run, err
}

// Write keeps the raw profile for `go tool pprof`.
func Write(p *profile.Profile, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := p.Write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ShortFunc trims the module paths off a function name for tables.
func ShortFunc(fn string) string {
	for _, prefix := range []string{phalanxPackage, "k8s.io/kubernetes/pkg/", "k8s.io/", "sigs.k8s.io/"} {
		if strings.HasPrefix(fn, prefix) {
			return strings.TrimPrefix(fn, prefix)
		}
	}
	return fn
}

// Head is the first n of l.
func Head(l []FuncCost, n int) []FuncCost {
	if len(l) > n {
		return l[:n]
	}
	return l
}
