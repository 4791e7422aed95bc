package side

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"github.com/phalanx-sched/phalanx/internal/bench"
	"github.com/phalanx-sched/phalanx/internal/bench/scrape"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// TestPassFigures checks that a failed pass gives no throughput and that
// requests are unknown, not zero, when the binary exports none.
func TestPassFigures(t *testing.T) {
	p := Pass{Pods: 100, Seconds: 2, CPUSeconds: 0.5, Metrics: scrape.Scrape{}}
	if p.PodsPerS() != 50 || p.CPUPerPod() != 5 {
		t.Errorf("pods/s %v, CPU ms/pod %v; want 50 and 5", p.PodsPerS(), p.CPUPerPod())
	}
	if !math.IsNaN(p.RequestsPerPod()) {
		t.Errorf("requests per pod without the metric = %v, want NaN", p.RequestsPerPod())
	}
	p.Failed = "timed out"
	if !math.IsNaN(p.PodsPerS()) {
		t.Errorf("a failed pass has %v pods/s, want NaN", p.PodsPerS())
	}
}

func TestPassRates(t *testing.T) {
	m := scrape.Scrape{
		"scheduler_scheduling_attempt_duration_seconds{result=scheduled}":     {Count: 100},
		"scheduler_scheduling_attempt_duration_seconds{result=unschedulable}": {Count: 50},
		"rest_client_requests_total{code=201,method=POST}":                    {Count: 200},
		"rest_client_requests_total{code=200,method=PATCH}":                   {Count: 100},
	}
	tests := []struct {
		name                         string
		p                            Pass
		endToEnd, attempts, requests float64
	}{
		{"finished", Pass{Pods: 100, EndToEnd: 4, Metrics: m}, 25, 1.5, 3},
		{"failed", Pass{Pods: 100, EndToEnd: 4, Metrics: m, Failed: "x"}, math.NaN(), 1.5, 3},
		{"no end", Pass{Pods: 100, Metrics: m}, math.NaN(), 1.5, 3},
		{"no pods", Pass{EndToEnd: 1, Metrics: m}, 0, math.NaN(), math.NaN()},
	}
	same := func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }
	for _, tc := range tests {
		if got := tc.p.EndToEndPodsPerS(); !same(got, tc.endToEnd) {
			t.Errorf("%s: end-to-end pods/s = %v, want %v", tc.name, got, tc.endToEnd)
		}
		if got := tc.p.AttemptsPerPod(); !same(got, tc.attempts) {
			t.Errorf("%s: attempts/pod = %v, want %v", tc.name, got, tc.attempts)
		}
		if got := tc.p.RequestsPerPod(); !same(got, tc.requests) {
			t.Errorf("%s: requests/pod = %v, want %v", tc.name, got, tc.requests)
		}
	}
	if got := (Pass{Pods: 5}).PodsPerS(); got != 0 {
		t.Errorf("pods/s without time = %v, want 0", got)
	}
	if got := (Pass{}).CPUPerPod(); !math.IsNaN(got) {
		t.Errorf("CPU per pod without pods = %v, want NaN", got)
	}
}

func TestResultPasses(t *testing.T) {
	r := Result{Passes: []Pass{
		{Scheduler: bench.Stock, Index: 0}, {Scheduler: bench.Phalanx, Index: 0},
		{Scheduler: bench.Phalanx, Index: 1}, {Scheduler: bench.Phalanx, Index: -1, Pods: 7},
	}}
	timed := r.Timed(bench.Phalanx)
	if len(timed) != 2 || timed[0].Index != 0 || timed[1].Index != 1 {
		t.Errorf("Timed(phalanx) = %+v", timed)
	}
	if p := r.Profiled(bench.Phalanx); p == nil || p.Pods != 7 {
		t.Errorf("Profiled(phalanx) = %+v", p)
	}
	if p := r.Profiled(bench.Stock); p != nil {
		t.Errorf("Profiled(stock) = %+v, want none", p)
	}
	if len(r.Timed(bench.RawBind)) != 0 {
		t.Error("Timed(raw-bind) of a result without it")
	}
}

func TestStopsWorkload(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errPassTimeout, false},
		{fmt.Errorf("pass: %w", errPassTimeout), false},
		{errors.Join(errPassTimeout, fmt.Errorf("%w ns: boom", errCleanup)), true},
		{fmt.Errorf("%w ns: boom", errCleanup), true},
		{errors.New("scheduler exited early"), true},
		{context.Canceled, true},
	}
	for _, tc := range tests {
		if got := stopsWorkload(tc.err); got != tc.want {
			t.Errorf("stopsWorkload(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestOptionsRuns(t *testing.T) {
	all := Options{}
	some := Options{Schedulers: []bench.Scheduler{bench.Phalanx, bench.RawBind}}
	for _, s := range bench.AllSchedulers {
		if !all.runs(s) {
			t.Errorf("no Schedulers: %s not run", s)
		}
		if want := s == bench.Phalanx || s == bench.RawBind; some.runs(s) != want {
			t.Errorf("Schedulers %v: runs(%s) = %v", some.Schedulers, s, !want)
		}
	}
}

// fakeAPI is a fake API server for a pass's pods: it binds pods through
// the binding subresource (unless dropBinds), deletes collections, and
// records where each pod went.
type fakeAPI struct {
	*fake.Clientset
	mu        sync.Mutex
	nodeOf    map[string]string
	dropBinds bool
	// watching closes when a pod watch starts: the fake's watch misses
	// what happens before (an API server's watch resumes from the list).
	watching chan struct{}
	once     sync.Once
}

func newFakeAPI() *fakeAPI {
	f := &fakeAPI{Clientset: fake.NewClientset(), nodeOf: map[string]string{}, watching: make(chan struct{})}
	tracker := f.Tracker()
	pods := v1.SchemeGroupVersion.WithResource("pods")
	f.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
		f.once.Do(func() { close(f.watching) })
		return false, nil, nil
	})
	f.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "binding" {
			// An API server gives each pod a UID (the bind watch counts by it).
			pod := a.(k8stesting.CreateAction).GetObject().(*v1.Pod)
			if pod.UID == "" {
				pod.UID = types.UID(pod.Namespace + "/" + pod.Name)
			}
			return false, nil, nil
		}
		b := a.(k8stesting.CreateAction).GetObject().(*v1.Binding)
		select {
		case <-f.watching:
		case <-time.After(30 * time.Second):
			return true, nil, errors.New("no pod watch")
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.dropBinds {
			return true, nil, nil
		}
		obj, err := tracker.Get(pods, b.Namespace, b.Name)
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*v1.Pod).DeepCopy()
		pod.Spec.NodeName = b.Target.Name
		f.nodeOf[b.Name] = b.Target.Name
		return true, nil, tracker.Update(pods, pod, b.Namespace)
	})
	f.PrependReactor("delete-collection", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		list, err := tracker.List(pods, v1.SchemeGroupVersion.WithKind("Pod"), a.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		for _, p := range list.(*v1.PodList).Items {
			if err := tracker.Delete(pods, p.Namespace, p.Name); err != nil {
				return true, nil, err
			}
		}
		return true, nil, nil
	})
	return f
}

func (f *fakeAPI) cluster() *testcluster.Cluster { return &testcluster.Cluster{Client: f} }

// TestRawBindPass runs a raw-bind pass against the fake API server: a
// namespace of its own, every pod bound round robin over the nodes, and
// nothing left behind.
func TestRawBindPass(t *testing.T) {
	f := newFakeAPI()
	w := bench.Workload{Name: "tiny", Nodes: 3, Pods: 20, CPU: "100m"}
	var progress bytes.Buffer
	p, err := runPass(context.Background(), f.cluster(), w, bench.RawBind, 1, Options{Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if p.Scheduler != bench.RawBind || p.Index != 1 || p.Pods != 20 || p.Failed != "" {
		t.Errorf("pass %+v", p)
	}
	if p.Seconds <= 0 || p.EndToEnd != p.Seconds {
		t.Errorf("seconds %v, end to end %v", p.Seconds, p.EndToEnd)
	}
	if _, err := f.CoreV1().Namespaces().Get(context.Background(), "tiny-raw-bind-1", metav1.GetOptions{}); err != nil {
		t.Errorf("pass namespace: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.nodeOf) != 20 {
		t.Fatalf("%d pods bound, want 20", len(f.nodeOf))
	}
	for i := range 20 {
		if got, want := f.nodeOf[w.PodName(i)], w.Node(i%3).Name; got != want {
			t.Errorf("%s on %s, want %s", w.PodName(i), got, want)
		}
	}
	left, err := f.CoreV1().Pods("tiny-raw-bind-1").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(left.Items) != 0 {
		t.Errorf("%d pods left after the pass (%v)", len(left.Items), err)
	}
}

// TestRawBindTimeout: binds the watch never sees fail the pass, which is
// reported and cleaned up, not the end of the workload.
func TestRawBindTimeout(t *testing.T) {
	defer func(d time.Duration) { PassTimeout = d }(PassTimeout)
	PassTimeout = 200 * time.Millisecond
	f := newFakeAPI()
	f.dropBinds = true
	w := bench.Workload{Name: "tiny", Nodes: 2, Pods: 4, CPU: "100m"}
	p, err := runPass(context.Background(), f.cluster(), w, bench.RawBind, 0, Options{Progress: &bytes.Buffer{}})
	if !errors.Is(err, errPassTimeout) || stopsWorkload(err) {
		t.Fatalf("err = %v, want a timeout that does not stop the workload", err)
	}
	if want := "0 of 4 binds seen after 200ms"; p.Failed != want {
		t.Errorf("Failed = %q, want %q", p.Failed, want)
	}
	if !math.IsNaN(p.PodsPerS()) {
		t.Errorf("a failed pass has %v pods/s", p.PodsPerS())
	}
}

// TestWatchBinds: each pod's bind counts once, and done closes at the total.
func TestWatchBinds(t *testing.T) {
	ctx := context.Background()
	f := newFakeAPI()
	bw, err := watchBinds(ctx, f.cluster(), "ns", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer bw.stop()
	<-f.watching
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "a"}}
	if _, err := f.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bound := pod.DeepCopy()
	bound.Spec.NodeName = "n"
	for range 2 {
		// An update of a bound pod is not a second bind.
		bound.Labels = map[string]string{"touch": fmt.Sprint(time.Now().UnixNano())}
		if _, err := f.CoreV1().Pods("ns").Update(ctx, bound, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	other := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", UID: "b"}, Spec: v1.PodSpec{NodeName: "n"}}
	if _, err := f.CoreV1().Pods("ns").Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-bw.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("done not closed; %d binds seen", bw.bound.Load())
	}
	if n := bw.bound.Load(); n != 2 {
		t.Errorf("%d binds counted, want 2", n)
	}
	if first, last := bw.span(); first.IsZero() || last.Before(first) {
		t.Errorf("span %v – %v", first, last)
	}
}

// TestStartScheduler: stock and upstream-gang run kube-scheduler with the
// stock config, upstream-gang with the workload's gates; phalanx runs its
// own binary with the canonical config.
func TestStartScheduler(t *testing.T) {
	dir := t.TempDir()
	fakeBin := func(name string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte("#!/bin/sh\necho "+name+" \"$@\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return path
	}
	bins := Binaries{KubeScheduler: fakeBin("kube-scheduler"), Phalanx: fakeBin("phalanx-scheduler")}
	c := &testcluster.Cluster{Dir: dir, Kubeconfig: "/k", Config: &rest.Config{}}
	w := bench.Workload{Name: "w", SubGroupSize: 4}
	for _, tc := range []struct {
		s      bench.Scheduler
		binary string
		gates  bool
	}{{bench.Stock, "kube-scheduler", false}, {bench.UpstreamGang, "kube-scheduler", true}, {bench.Phalanx, "phalanx-scheduler", false}} {
		p, err := startScheduler(c, w, tc.s, false, bins)
		if err != nil {
			t.Fatal(err)
		}
		<-p.Exited()
		log := p.LogTail()
		if !strings.HasPrefix(log, tc.binary+" ") {
			t.Errorf("%s ran %q", tc.s, log)
		}
		if gates := strings.Contains(log, w.GateFlag()); gates != tc.gates {
			t.Errorf("%s flags %q: gates %v, want %v", tc.s, log, gates, tc.gates)
		}
		var config string
		for _, f := range strings.Fields(log) {
			if v, ok := strings.CutPrefix(f, "--config="); ok {
				config = v
			}
		}
		raw, err := os.ReadFile(config)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Profiles []struct {
				SchedulerName string         `json:"schedulerName"`
				PluginConfig  []any          `json:"pluginConfig"`
				Plugins       map[string]any `json:"plugins"`
			} `json:"profiles"`
		}
		if err := yaml.Unmarshal(raw, &doc); err != nil || len(doc.Profiles) != 1 || doc.Profiles[0].SchedulerName != tc.s.SchedulerName() {
			t.Errorf("%s config (%v): %s", tc.s, err, raw)
		}
		if canonical := doc.Profiles[0].Plugins != nil; canonical != tc.s.IsPhalanx() {
			t.Errorf("%s config has plugins %v", tc.s, doc.Profiles[0].Plugins)
		}
	}
}
