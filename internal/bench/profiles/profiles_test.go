package profiles

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// stacks builds a profile of one sample type from samples given as a
// value and a stack, leaf first.
func stacks(unit string, samples ...sample) *profile.Profile {
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "value", Unit: unit}}}
	funcs := map[string]*profile.Function{}
	for _, s := range samples {
		var locs []*profile.Location
		for _, name := range s.stack {
			f := funcs[name]
			if f == nil {
				f = &profile.Function{ID: uint64(len(funcs) + 1), Name: name}
				funcs[name] = f
				p.Function = append(p.Function, f)
			}
			loc := &profile.Location{ID: uint64(len(p.Location) + 1), Line: []profile.Line{{Function: f}}}
			p.Location = append(p.Location, loc)
			locs = append(locs, loc)
		}
		p.Sample = append(p.Sample, &profile.Sample{Location: locs, Value: []int64{1, s.value}})
	}
	return p
}

type sample struct {
	value int64
	stack []string
}

const own = "github.com/phalanx-sched/phalanx/internal/gang."

func TestSummarise(t *testing.T) {
	p := stacks("nanoseconds",
		sample{60, []string{"runtime.mallocgc", own + "Plan", "main.main"}},
		sample{30, []string{own + "Plan", "main.main"}},
		// Recursion counts once towards cum.
		sample{10, []string{"k8s.io/client-go/rest.Do", "k8s.io/client-go/rest.Do", "main.main"}},
	)
	top := Summarise(p, "cpu", 1, 10, nil)
	if top.Kind != "cpu" || top.Total != 100 || top.Unit != "nanoseconds" {
		t.Fatalf("top = %+v", top)
	}
	want := []FuncCost{{"runtime.mallocgc", 0.6, 0.6}, {own + "Plan", 0.3, 0.9}, {"k8s.io/client-go/rest.Do", 0.1, 0.1}}
	if len(top.Flat) != len(want) {
		t.Fatalf("flat = %+v, want %+v", top.Flat, want)
	}
	for i := range want {
		if top.Flat[i] != want[i] {
			t.Errorf("flat[%d] = %+v, want %+v", i, top.Flat[i], want[i])
		}
	}
	// Cum leaves the runtime out; Own is phalanx's functions alone.
	if len(top.Cum) != 3 || top.Cum[0].Func != "main.main" || top.Cum[0].Cum != 1 || top.Cum[1].Func != own+"Plan" {
		t.Errorf("cum = %+v", top.Cum)
	}
	for _, f := range top.Cum {
		if strings.HasPrefix(f.Func, "runtime.") {
			t.Errorf("cum lists %s", f.Func)
		}
	}
	if len(top.Own) != 1 || top.Own[0] != (FuncCost{own + "Plan", 0.3, 0.9}) {
		t.Errorf("own = %+v", top.Own)
	}
	if short := Summarise(p, "cpu", 1, 1, nil); len(short.Flat) != 1 || len(short.Cum) != 1 {
		t.Errorf("n = 1 keeps flat %d, cum %d", len(short.Flat), len(short.Cum))
	}
	if empty := Summarise(stacks("nanoseconds"), "cpu", 1, 10, nil); empty.Total != 0 || empty.Flat != nil {
		t.Errorf("empty profile: %+v", empty)
	}
}

// TestWaitsOnLock: of a block profile, only lock waits are contention.
func TestWaitsOnLock(t *testing.T) {
	p := stacks("nanoseconds",
		sample{5, []string{"sync.(*Mutex).lockSlow", "sync.(*Mutex).Lock", own + "Reserve"}},
		sample{7, []string{"sync.(*RWMutex).RLock", own + "Snapshot"}},
		sample{1000, []string{"runtime.selectgo", "k8s.io/client-go/tools/cache.(*Reflector).watch"}},
		sample{100, []string{"runtime.chanrecv1", "k8s.io/client-go/util/workqueue.(*Typed).Get"}},
	)
	var locked []bool
	for _, s := range p.Sample {
		locked = append(locked, WaitsOnLock(s))
	}
	if want := []bool{true, true, false, false}; !equal(locked, want) {
		t.Errorf("WaitsOnLock = %v, want %v", locked, want)
	}
	top := Summarise(p, "lock", 1, 10, WaitsOnLock)
	if top.Total != 12 || len(top.Own) != 2 || top.Own[0].Func != own+"Snapshot" {
		t.Errorf("lock top = %+v", top)
	}
}

func equal(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestShortFuncAndHead(t *testing.T) {
	for in, want := range map[string]string{
		own + "Plan": "internal/gang.Plan",
		"k8s.io/kubernetes/pkg/scheduler.(*Scheduler).scheduleOne": "scheduler.(*Scheduler).scheduleOne",
		"k8s.io/client-go/rest.(*Request).Do":                      "client-go/rest.(*Request).Do",
		"sigs.k8s.io/yaml.Unmarshal":                               "yaml.Unmarshal",
		"runtime.mallocgc":                                         "runtime.mallocgc",
	} {
		if got := ShortFunc(in); got != want {
			t.Errorf("ShortFunc(%q) = %q, want %q", in, got, want)
		}
	}
	l := []FuncCost{{Func: "a"}, {Func: "b"}, {Func: "c"}}
	if got := Head(l, 2); len(got) != 2 || got[1].Func != "b" {
		t.Errorf("Head(3, 2) = %+v", got)
	}
	if got := Head(l, 5); len(got) != 3 {
		t.Errorf("Head(3, 5) = %+v", got)
	}
}

func TestWrite(t *testing.T) {
	p := stacks("nanoseconds", sample{3, []string{own + "Plan"}})
	path := filepath.Join(t.TempDir(), "cpu.pb.gz")
	if err := Write(p, path); err != nil {
		t.Fatal(err)
	}
	read, err := readProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(read.Sample) != 1 || read.Sample[0].Value[1] != 3 || read.Sample[0].Location[0].Line[0].Function.Name != own+"Plan" {
		t.Errorf("read back %v", read)
	}
	if err := Write(p, filepath.Join(t.TempDir(), "missing", "cpu.pb.gz")); err == nil {
		t.Error("Write into a missing directory: no error")
	}
}

// fakeDebug serves CPU windows and heap profiles as a process's pprof
// endpoint would, counting the requests; windows fail while failing is set.
type fakeDebug struct {
	mu       sync.Mutex
	windows  int
	heaps    []int64 // in-use bytes of the heap profiles served, in turn
	failing  bool
	requests []string
}

func (f *fakeDebug) get(_ context.Context, path string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, path)
	var p *profile.Profile
	switch {
	case strings.HasPrefix(path, "/debug/pprof/profile?seconds=2"):
		if f.failing {
			return nil, errors.New("timeout")
		}
		f.windows++
		p = stacks("nanoseconds", sample{int64(f.windows), []string{own + "Plan"}})
	case path == "/debug/pprof/heap":
		inUse := int64(1)
		if len(f.heaps) > 0 {
			inUse, f.heaps = f.heaps[0], f.heaps[1:]
		}
		p = stacks("bytes", sample{inUse, []string{own + "alloc"}})
	default:
		return nil, errors.New("not found: " + path)
	}
	// The windows take no time here; pace them a little.
	time.Sleep(5 * time.Millisecond)
	var b bytes.Buffer
	err := p.Write(&b)
	return b.Bytes(), err
}

func (f *fakeDebug) set(failing bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failing = failing
}

func (f *fakeDebug) served() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.windows
}

// waitFor polls cond, failing the test after a few seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCPUProfiler: windows before readiness make the startup profile, the
// later ones the run's; the heap profile with the most in use is kept.
func TestCPUProfiler(t *testing.T) {
	f := &fakeDebug{heaps: []int64{10, 500, 20}}
	cp := StartCPUProfile(context.Background(), f.get)
	waitFor(t, "two windows", func() bool { return f.served() >= 2 })
	cp.MarkReady(time.Now())
	before := f.served()
	waitFor(t, "two more windows", func() bool { return f.served() >= before+2 })
	startup, run, err := cp.Stop()
	if err != nil {
		t.Fatal(err)
	}
	total := func(p *profile.Profile) (n int64) {
		for _, s := range p.Sample {
			n += s.Value[1]
		}
		return n
	}
	windows := f.served()
	// Window i has value i: the startup and the run hold all of them.
	if startup == nil || total(startup)+total(run) != int64(windows*(windows+1)/2) {
		t.Errorf("startup %v + run %v over %d windows", startup, run, windows)
	}
	if peak := cp.Peak(); peak == nil || peak.Sample[0].Value[1] != 500 {
		t.Errorf("peak heap = %v, want the 500-byte one", peak)
	}
	if lost := cp.Lost(); lost != "" {
		t.Errorf("Lost = %q, want none", lost)
	}
	if n := f.served(); n != windows {
		t.Errorf("windows taken after Stop: %d, then %d", windows, n)
	}
}

// TestCPUProfilerLostWindows: failures before the first window are the
// process not serving yet; later ones are counted.
func TestCPUProfilerLostWindows(t *testing.T) {
	f := &fakeDebug{failing: true}
	cp := StartCPUProfile(context.Background(), f.get)
	waitFor(t, "failed requests", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.requests) >= 2
	})
	if lost := cp.Lost(); lost != "" {
		t.Errorf("before the first window: Lost = %q", lost)
	}
	f.set(false)
	waitFor(t, "a window", func() bool { return f.served() >= 1 })
	f.set(true)
	waitFor(t, "a lost window", func() bool { return cp.Lost() != "" })
	cp.Cancel()
	if _, _, err := cp.Stop(); err != nil {
		t.Fatalf("Stop with windows: %v", err)
	}
	if lost := cp.Lost(); !strings.Contains(lost, "windows lost (last error: timeout)") {
		t.Errorf("Lost = %q", lost)
	}
}

func TestCPUProfilerNoWindows(t *testing.T) {
	f := &fakeDebug{failing: true}
	cp := StartCPUProfile(context.Background(), f.get)
	if _, _, err := cp.Stop(); err == nil || !strings.Contains(err.Error(), "no CPU profile windows") {
		t.Errorf("Stop without windows: %v", err)
	}
}

func readProfile(path string) (*profile.Profile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return profile.Parse(f)
}
