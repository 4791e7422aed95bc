package side

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/phalanx-sched/phalanx/internal/bench"
)

var tiny = bench.Workload{Name: "tiny", Nodes: 2, Pods: 4, CPU: "100m"}

// TestRunPassNamespace: a pass runs in a namespace named after the
// workload, scheduler and pass ("profiled" for the profiled one), and a
// namespace already there fails the pass before any pod is made.
func TestRunPassNamespace(t *testing.T) {
	for _, tc := range []struct {
		name     string
		index    int
		ns       string
		existing bool
	}{
		{"timed", 2, "tiny-raw-bind-2", false},
		{"profiled", -1, "tiny-raw-bind-profiled", false},
		{"namespace taken", 0, "tiny-raw-bind-0", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f := newFakeAPI()
			if tc.existing {
				if _, err := f.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tc.ns}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			p, err := runPass(ctx, f.cluster(), tiny, bench.RawBind, tc.index, Options{Progress: &bytes.Buffer{}})
			if p.Index != tc.index || p.Pods != tiny.Total() {
				t.Errorf("pass %+v, want index %d over %d pods", p, tc.index, tiny.Total())
			}
			if tc.existing {
				if err == nil {
					t.Fatal("a pass in a namespace already there: no error")
				}
				pods, _ := f.CoreV1().Pods(tc.ns).List(ctx, metav1.ListOptions{})
				if len(pods.Items) != 0 {
					t.Errorf("%d pods made after the namespace failed", len(pods.Items))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.CoreV1().Namespaces().Get(ctx, tc.ns, metav1.GetOptions{}); err != nil {
				t.Errorf("namespace %s: %v", tc.ns, err)
			}
		})
	}
}

// TestRunPassCleanupFailure: pods left behind stop the workload, whether
// the pass finished or timed out.
func TestRunPassCleanupFailure(t *testing.T) {
	defer func(p, c time.Duration) { PassTimeout, bench.CleanupTimeout = p, c }(PassTimeout, bench.CleanupTimeout)
	PassTimeout, bench.CleanupTimeout = 200*time.Millisecond, 300*time.Millisecond
	for _, dropBinds := range []bool{false, true} {
		f := newFakeAPI()
		f.dropBinds = dropBinds
		// Deletion that deletes nothing.
		f.PrependReactor("delete-collection", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, nil
		})
		_, err := runPass(context.Background(), f.cluster(), tiny, bench.RawBind, 0, Options{Progress: &bytes.Buffer{}})
		if !errors.Is(err, errCleanup) || !strings.Contains(err.Error(), "tiny-raw-bind-0") || !stopsWorkload(err) {
			t.Errorf("dropBinds %v: err = %v, want a cleanup error of tiny-raw-bind-0 that stops the workload", dropBinds, err)
		}
		if timedOut := errors.Is(err, errPassTimeout); timedOut != dropBinds {
			t.Errorf("dropBinds %v: timed out %v", dropBinds, timedOut)
		}
	}
}

// TestRawBindErrors: a failed bind request, or a cancelled context while
// waiting for the watch, ends the pass with that error.
func TestRawBindErrors(t *testing.T) {
	ctx := context.Background()
	f := newFakeAPI()
	watch, err := watchBinds(ctx, f.cluster(), "empty", tiny.Total())
	if err != nil {
		t.Fatal(err)
	}
	defer watch.stop()
	// No pods in the namespace: the first bind is refused.
	_, err = rawBind(ctx, f.cluster(), tiny, "empty", watch, Pass{Pods: tiny.Total()})
	if err == nil || !strings.HasPrefix(err.Error(), "binding ") || !strings.Contains(err.Error(), "not found") {
		t.Errorf("binding missing pods: err = %v", err)
	}

	// Workers still running after the first error read dropBinds.
	f.mu.Lock()
	f.dropBinds = true
	f.mu.Unlock()
	if err := bench.CreateObjects(ctx, f.cluster(), tiny, bench.RawBind, "empty"); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := rawBind(cancelled, f.cluster(), tiny, "empty", watch, Pass{Pods: tiny.Total()}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled while waiting: err = %v, want context.Canceled", err)
	}
}

// TestWatchBindsNone: before any bind the span is empty and done open.
func TestWatchBindsNone(t *testing.T) {
	f := newFakeAPI()
	bw, err := watchBinds(context.Background(), f.cluster(), "ns", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer bw.stop()
	if first, last := bw.span(); !first.IsZero() || !last.IsZero() {
		t.Errorf("span %v – %v before any bind", first, last)
	}
	select {
	case <-bw.done:
		t.Error("done closed before any bind")
	default:
	}
}

func TestRunNothing(t *testing.T) {
	done := 0
	out, err := Run(context.Background(), nil, Options{Done: func(Result) { done++ }})
	if err != nil || len(out) != 0 || done != 0 {
		t.Errorf("Run of no workloads = %v, %v (%d done)", out, err, done)
	}
}

// TestProfiledIsThePass: Profiled points into the result's passes, so the
// profiles collected later land in the result.
func TestProfiledIsThePass(t *testing.T) {
	r := Result{Passes: []Pass{{Scheduler: bench.Phalanx, Index: 0}, {Scheduler: bench.Phalanx, Index: -1}}}
	p := r.Profiled(bench.Phalanx)
	if p == nil || p != &r.Passes[1] {
		t.Fatalf("Profiled = %p, want the second pass %p", p, &r.Passes[1])
	}
	p.Pods = 3
	if r.Passes[1].Pods != 3 {
		t.Error("a change through Profiled is not in the result")
	}
}
