package logguard

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"
)

// TestLogGuard: a forbidden line logged through the guarded logger (as the
// scheduling queue logs it, through a named child logger) is recorded while
// the scheduler runs, not once it is stopping; other lines are not.
func TestLogGuard(t *testing.T) {
	g := &Guard{}
	logger := g.Logger(klog.Background()).WithValues("scheduler", "test")
	logger.Info("Pod moved to an internal scheduling queue")
	utilruntime.HandleErrorWithLogger(logger, errors.New("in flight Pod isn't found in the scheduling queue. If you see this error log, it's likely a bug in the scheduler"),
		"Error getting cluster events for pod", "pod", "default/p")
	hits := g.Stop()
	if len(hits) != 1 {
		t.Fatalf("hits = %q, want the one forbidden line", hits)
	}
	utilruntime.HandleErrorWithLogger(logger, errors.New("in flight Pod isn't found in the scheduling queue"), "at shutdown")
	if hits := g.Stop(); len(hits) != 1 {
		t.Fatalf("a line logged while stopping counted: %q", hits)
	}
}

// TestForbiddenInFile: a scheduler binary's log is searched the same way.
func TestForbiddenInFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "scheduler.log")
	log := "I1126 ok line\nE1126 \"Error getting cluster events for pod\" err=\"in flight Pod isn't found in the scheduling queue.\"\n"
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	if hits := InFile(path); len(hits) != 1 {
		t.Fatalf("hits = %q, want one", hits)
	}
}

// TestGuardCheck: a forbidden text counts in the message or in the error,
// once per line it appears in, with the line's values.
func TestGuardCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  string
		err  error
		want int
	}{
		{"clean", "Pod moved to an internal scheduling queue", nil, 0},
		{"in the message", "the same pod is tracked in multiple places in the scheduler", nil, 1},
		{"in the error", "Error", errors.New("the same pod is tracked in multiple places in the scheduler"), 1},
		{"both texts", ForbiddenLogLines[0] + "; " + ForbiddenLogLines[1], nil, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &Guard{}
			g.check(tc.msg, tc.err, []any{"pod", "default/p"})
			hits := g.Stop()
			if len(hits) != tc.want {
				t.Fatalf("hits = %q, want %d", hits, tc.want)
			}
			for _, h := range hits {
				if !strings.Contains(h, "default/p") {
					t.Fatalf("hit %q lacks the line's values", h)
				}
			}
		})
	}
}

// TestGuardKeepsItsSink: the guarded logger still logs through the sink it
// wraps, with names and values, and at the caller's depth.
func TestGuardKeepsItsSink(t *testing.T) {
	var lines []string
	base := funcr.New(func(prefix, args string) { lines = append(lines, prefix+" "+args) }, funcr.Options{LogCaller: funcr.All})
	g := &Guard{}
	logger := g.Logger(base).WithName("queue").WithValues("profile", "p")
	logger.Info("hello")
	logger.Error(errors.New("boom"), "failed")
	if len(lines) != 2 || !strings.Contains(lines[0], "queue") || !strings.Contains(lines[0], `"profile"="p"`) || !strings.Contains(lines[1], "boom") {
		t.Fatalf("the sink got %q", lines)
	}
	if !strings.Contains(lines[0], "logguard_test.go") {
		t.Fatalf("the caller is not this test: %q", lines[0])
	}
	if hits := g.Stop(); len(hits) != 0 {
		t.Fatalf("clean lines counted: %q", hits)
	}
}

// TestInFileMissing: a log that is not there has nothing forbidden.
func TestInFileMissing(t *testing.T) {
	if hits := InFile(filepath.Join(t.TempDir(), "none.log")); hits != nil {
		t.Fatalf("hits = %q", hits)
	}
}
