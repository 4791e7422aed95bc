package replay

import (
	"bytes"
	"context"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/phalanx-sched/phalanx/internal/sim"
	"github.com/phalanx-sched/phalanx/internal/sim/trace"
)

// TestTraceReplayShort replays a tiny generated trace with phalanx on a real
// in-process cluster: every job starts, no gang is bound in part or split
// across leaves, and both reports are written. It takes well under a minute.
func TestTraceReplayShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	sh, err := trace.OpenbShapes()
	if err != nil {
		t.Fatal(err)
	}
	o := trace.DefaultGenOptions
	o.Nodes, o.Jobs, o.Seed = 6, 14, 3
	tr, err := trace.Generate(sh, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// At most 30s of replay for the horizon.
	speed := max(100, tr.Horizon()/30)
	runs, err := ReplayTrace(ctx, tr, []string{TracePhalanx}, ReplayOptions{Options: sim.Options{Log: io.Discard}, Speed: speed, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	s := runs[0].Summary()
	if s.Started != len(tr.Jobs) {
		t.Errorf("%d of %d jobs started", s.Started, len(tr.Jobs))
	}
	if s.Partial != 0 || s.Split != 0 {
		t.Errorf("%d partial and %d split gangs, want none", s.Partial, s.Split)
	}
	if s.StrandedPeak > 0 && s.StrandedMean > 0.5 {
		t.Errorf("GPUs stranded by incomplete gangs: mean %.2f, peak %d", s.StrandedMean, s.StrandedPeak)
	}
	// Where the idle GPUs were: every leaf, never more free than it has,
	// and the leaves' free GPUs together are the GPUs not allocated while
	// jobs waited.
	if len(s.IdleByDomain) == 0 {
		t.Error("no idle GPUs by domain in the summary")
	}
	idle := 0.0
	for _, d := range s.IdleByDomain {
		if d.Idle < 0 || d.Idle > float64(d.GPUs) {
			t.Errorf("domain %s=%s: %.1f of %d GPUs free", d.Level, d.Domain, d.Idle, d.GPUs)
		}
		if d.Level == s.IdleByDomain[0].Level {
			idle += d.Idle
		}
	}
	if free := float64(s.GPUs) * (1 - s.AllocWaiting); s.WaitingSeconds > 0 && math.Abs(idle-free) > 0.01*float64(s.GPUs) {
		t.Errorf("the %s domains had %.1f GPUs free while jobs waited, the cluster %.1f", s.IdleByDomain[0].Level, idle, free)
	}
	// Each longest wait's causes are its own waited time: they add up to
	// it, and a run in which jobs waited judged some of them.
	judged := false
	for _, j := range s.LongestWaits {
		sum := 0.0
		for _, share := range j.Causes {
			sum += share
		}
		if j.Causes != nil && math.Abs(sum-1) > 1e-9 {
			t.Errorf("job %s: causes %v add up to %v", j.Key, j.Causes, sum)
		}
		judged = judged || j.Causes != nil
	}
	if len(s.WaitCauses) > 0 && !judged {
		t.Errorf("jobs waited (%v) but none of the longest waits has causes: %+v", s.WaitCauses, s.LongestWaits)
	}
	dir := t.TempDir()
	var text bytes.Buffer
	WriteTraceText(&text, runs)
	if err := os.WriteFile(filepath.Join(dir, "trace.txt"), text.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "trace.html"))
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteTraceHTML(f, runs); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, name := range []string{"trace.txt", "trace.html"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() == 0 {
			t.Errorf("report %s not written: %v", name, err)
		}
	}
	html, _ := os.ReadFile(filepath.Join(dir, "trace.html"))
	for _, want := range []string{"GPU allocation over time", "Job waits", "Queue shares", "<svg", "what the longest waits waited for"} {
		if !bytes.Contains(html, []byte(want)) {
			t.Errorf("HTML report lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(text.String())
	}
}

func TestScaledSchedulerConfig(t *testing.T) {
	raw, err := ScaledSchedulerConfig(50)
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	// 30s and 15s at 50x: 0.6s rounds to the 1s minimum, 0.3s to 0.
	if !strings.Contains(s, "reservationAfterSeconds: 1\n") || !strings.Contains(s, "minRuntimeSeconds: 0\n") || !strings.Contains(s, "defaultScheduleTimeoutSeconds: 60\n") {
		t.Errorf("scaled config:\n%s", s)
	}
	if !strings.Contains(s, "fragmentationHalfLifeSeconds: 72\n") {
		t.Errorf("scaled config: the fragmentation half-life (3600 s) is not 72 s at 50x:\n%s", s)
	}
	raw, _ = ScaledSchedulerConfig(5)
	if s := string(raw); !strings.Contains(s, "reservationAfterSeconds: 6\n") || !strings.Contains(s, "minRuntimeSeconds: 3\n") {
		t.Errorf("scaled config at 5x:\n%s", s)
	}
	off, err := WithoutFragmentation(raw)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(off); !strings.Contains(s, "fragmentationHalfLifeSeconds: 0\n") || !strings.Contains(s, "reservationAfterSeconds: 6\n") {
		t.Errorf("without fragmentation:\n%s", s)
	}
}
