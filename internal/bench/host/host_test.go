package host

import (
	"math"
	"os"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestCPUSeconds burns CPU in this process until the reading grows, and
// checks it grows in clock ticks and by no more than the wall time allows.
func TestCPUSeconds(t *testing.T) {
	pid := os.Getpid()
	before, err := CPUSeconds(pid)
	if err != nil {
		t.Fatal(err)
	}
	if before < 0 {
		t.Fatalf("CPUSeconds = %v, want ≥ 0", before)
	}
	start := time.Now()
	after, x := before, 0
	for after-before < 0.2 && time.Since(start) < 20*time.Second {
		for range 1_000_000 {
			x++
		}
		if after, err = CPUSeconds(pid); err != nil {
			t.Fatal(err)
		}
	}
	runtime.KeepAlive(x)
	wall := time.Since(start).Seconds()
	if d := after - before; d < 0.2 || d > wall*float64(runtime.NumCPU())+0.1 {
		t.Errorf("CPU time grew by %.2f s over %.2f s of busy loop on %d CPUs", d, wall, runtime.NumCPU())
	}
	if ticks := after * clockTicks; math.Abs(ticks-math.Round(ticks)) > 1e-6 {
		t.Errorf("CPUSeconds = %v is not a whole number of %d Hz ticks", after, clockTicks)
	}
}

func TestPeakRSS(t *testing.T) {
	rss, err := PeakRSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// A Go test binary holds at least a megabyte and far less than a terabyte.
	if rss < 1<<20 || rss > 1<<40 {
		t.Errorf("PeakRSS = %.0f bytes", rss)
	}
	if int64(rss)%1024 != 0 {
		t.Errorf("PeakRSS = %.0f, want whole kB", rss)
	}
}

func TestNoProcess(t *testing.T) {
	// Pid numbers stop well below this (pid_max is at most 2^22).
	const missing = 1 << 30
	if _, err := CPUSeconds(missing); err == nil {
		t.Error("CPUSeconds of a missing process: no error")
	}
	if _, err := PeakRSS(missing); err == nil {
		t.Error("PeakRSS of a missing process: no error")
	}
}

func TestMachine(t *testing.T) {
	got := Machine()
	m := regexp.MustCompile(`^(.+), (\d+) cores(, \d+ GiB)?$`).FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("Machine() = %q, want \"<CPU>, <n> cores, <m> GiB\"", got)
	}
	if m[2] == "0" {
		t.Errorf("Machine() = %q counts no cores", got)
	}
	if m[3] == "" {
		t.Errorf("Machine() = %q has no memory though /proc/meminfo exists", got)
	}
}

func TestLoadAverage(t *testing.T) {
	got := LoadAverage()
	fields := strings.Fields(got)
	if len(fields) != 3 {
		t.Fatalf("LoadAverage() = %q, want three figures", got)
	}
	for _, f := range fields {
		if !regexp.MustCompile(`^\d+\.\d+$`).MatchString(f) {
			t.Errorf("LoadAverage() field %q is not a load figure", f)
		}
	}
}
