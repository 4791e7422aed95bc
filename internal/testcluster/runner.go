package testcluster

import (
	"fmt"
	"io"
	"os"
	"sync"
)

// Runner lets the harness run outside go test (the simulator, benchmarks):
// it is a TB whose log goes to a writer and whose cleanups run at Close.
type Runner struct {
	name string
	log  io.Writer

	mu       sync.Mutex
	cleanups []func()
	failed   bool
}

// FatalError is what Runner panics with on Fatal; Run recovers it.
type FatalError struct{ Msg string }

func (e FatalError) Error() string { return e.Msg }

// NewRunner returns a Runner logging to log (io.Discard for silence).
func NewRunner(name string, log io.Writer) *Runner {
	return &Runner{name: name, log: log}
}

// Close runs the registered cleanups, last first.
func (r *Runner) Close() {
	r.mu.Lock()
	fs := r.cleanups
	r.cleanups = nil
	r.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

func (r *Runner) Attr(key, value string)         {}
func (r *Runner) Chdir(dir string)               { _ = os.Chdir(dir) }
func (r *Runner) Helper()                        {}
func (r *Runner) Name() string                   { return r.name }
func (r *Runner) Setenv(key, value string)       { _ = os.Setenv(key, value) }
func (r *Runner) Skipped() bool                  { return false }
func (r *Runner) Log(args ...any)                { fmt.Fprintln(r.log, args...) }
func (r *Runner) Logf(format string, a ...any)   { fmt.Fprintf(r.log, format+"\n", a...) }
func (r *Runner) Error(args ...any)              { r.Log(args...); r.Fail() }
func (r *Runner) Errorf(format string, a ...any) { r.Logf(format, a...); r.Fail() }
func (r *Runner) Fatal(args ...any)              { panic(FatalError{Msg: fmt.Sprint(args...)}) }
func (r *Runner) Fatalf(format string, a ...any) { panic(FatalError{Msg: fmt.Sprintf(format, a...)}) }
func (r *Runner) FailNow()                       { panic(FatalError{Msg: "FailNow"}) }
func (r *Runner) Skip(args ...any)               { r.Fatal(args...) }
func (r *Runner) Skipf(format string, a ...any)  { r.Fatalf(format, a...) }
func (r *Runner) SkipNow()                       { r.FailNow() }

// Cleanup registers f to run at Close.
func (r *Runner) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

// Fail marks the run failed.
func (r *Runner) Fail() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
}

// Failed reports whether anything failed.
func (r *Runner) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// TempDir returns a directory removed at Close.
func (r *Runner) TempDir() string {
	dir, err := os.MkdirTemp("", "phalanx-")
	if err != nil {
		r.Fatal(err)
	}
	r.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// RecoverFatal, deferred by a function that runs a Runner, turns the
// Runner's Fatalf panic into the function's error; other panics go on.
func RecoverFatal(err *error) {
	if r := recover(); r != nil {
		f, ok := r.(FatalError)
		if !ok {
			panic(r)
		}
		*err = f
	}
}
