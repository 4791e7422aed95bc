package logguard

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

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
