// Package logguard watches what a scheduler logs for upstream's reports of a
// broken assumption between the plugins and the scheduling queue.
package logguard

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/go-logr/logr"
)

// ForbiddenLogLines are what a scheduler must never log while it runs: each
// is upstream's own report of a broken assumption between the plugins and
// the scheduling queue. A scheduler that logs one fails the test that ran it.
// What it logs once it is being stopped does not count: a pod still waiting
// in Permit when the queue closes is reported the same way (upstream's
// shutdown, not a bug of the plugins).
var ForbiddenLogLines = []string{
	"in flight Pod isn't found in the scheduling queue",
	"the same pod is tracked in multiple places in the scheduler",
}

// Guard watches what one in-process scheduler logs for ForbiddenLogLines.
type Guard struct {
	mu       sync.Mutex
	stopping bool
	hits     []string
}

func (g *Guard) check(msg string, err error, kv []any) {
	text := msg
	if err != nil {
		text += ": " + err.Error()
	}
	for _, bad := range ForbiddenLogLines {
		if !strings.Contains(text, bad) {
			continue
		}
		g.mu.Lock()
		if !g.stopping {
			g.hits = append(g.hits, fmt.Sprintf("%s %v", text, kv))
		}
		g.mu.Unlock()
	}
}

// Stop marks the start of the scheduler's shutdown and returns what it
// logged before.
func (g *Guard) Stop() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopping = true
	return g.hits
}

// Logger wraps base so that every line it logs is checked.
func (g *Guard) Logger(base logr.Logger) logr.Logger {
	return logr.New(guardSink{LogSink: base.GetSink(), g: g})
}

// guardSink forwards to the scheduler's own sink after the check.
type guardSink struct {
	logr.LogSink
	g *Guard
}

func (s guardSink) Info(level int, msg string, kv ...any) {
	s.g.check(msg, nil, kv)
	s.LogSink.Info(level, msg, kv...)
}

func (s guardSink) Error(err error, msg string, kv ...any) {
	s.g.check(msg, err, kv)
	s.LogSink.Error(err, msg, kv...)
}

func (s guardSink) WithValues(kv ...any) logr.LogSink {
	return guardSink{LogSink: s.LogSink.WithValues(kv...), g: s.g}
}

func (s guardSink) WithName(name string) logr.LogSink {
	return guardSink{LogSink: s.LogSink.WithName(name), g: s.g}
}

// WithCallDepth keeps the caller's file and line in the log (this wrapper
// adds a frame).
func (s guardSink) WithCallDepth(depth int) logr.LogSink {
	if cd, ok := s.LogSink.(logr.CallDepthLogSink); ok {
		return guardSink{LogSink: cd.WithCallDepth(depth + 1), g: s.g}
	}
	return s
}

// InFile returns the lines of a scheduler binary's log, up to its
// current end, that hold one of ForbiddenLogLines.
func InFile(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil
	}
	var hits []string
	sc := bufio.NewScanner(io.LimitReader(f, end))
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		for _, bad := range ForbiddenLogLines {
			if strings.Contains(sc.Text(), bad) {
				hits = append(hits, sc.Text())
			}
		}
	}
	return hits
}
