package schedproc

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// fakeEnv makes the test binary a fake scheduler: "serve" answers on the
// secure port as a scheduler does, "exit" fails at start.
const fakeEnv = "SCHEDPROC_FAKE_SCHEDULER"

func TestMain(m *testing.M) {
	switch os.Getenv(fakeEnv) {
	case "serve":
		fakeScheduler()
		return
	case "exit":
		fmt.Println("fake scheduler: bad flag --nope")
		os.Exit(3)
	}
	os.Exit(m.Run())
}

const fakeMetrics = `# TYPE phalanx_gang_plan_duration_seconds histogram
phalanx_gang_plan_duration_seconds_bucket{le="+Inf"} 2
phalanx_gang_plan_duration_seconds_sum 0.25
phalanx_gang_plan_duration_seconds_count 2
`

// fakeScheduler serves /readyz, /metrics and a goroutine dump over TLS on
// --secure-port, after logging its flags, until killed.
func fakeScheduler() {
	port := ""
	for _, a := range os.Args[1:] {
		if v, ok := strings.CutPrefix(a, "--secure-port="); ok {
			port = v
		}
	}
	fmt.Println("fake scheduler flags:", strings.Join(os.Args[1:], " "))
	l, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") })
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, fakeMetrics) })
	mux.HandleFunc("/debug/pprof/goroutine", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "goroutine 1 [running] (debug=%s)", r.URL.Query().Get("debug"))
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	srv.Listener = l
	srv.StartTLS()
	select {}
}

// cluster is what Start needs of a cluster: scratch space, a kubeconfig
// path and admin credentials.
func cluster(t *testing.T) *testcluster.Cluster {
	return &testcluster.Cluster{Dir: t.TempDir(), Kubeconfig: "/nonexistent/kubeconfig", Config: &rest.Config{}}
}

const oneProfile = "profiles:\n- schedulerName: x\n"

func start(t *testing.T, mode string) *Process {
	t.Helper()
	t.Setenv(fakeEnv, mode)
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p, err := Start(cluster(t), bin, []byte(oneProfile), "fake-scheduler", true, "fake", "--extra=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

func TestProcess(t *testing.T) {
	ctx := context.Background()
	p := start(t, "serve")
	ready, err := p.WaitReady(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if p.PID() <= 0 || ready.Before(p.Started()) {
		t.Errorf("pid %d, started %v, ready %v", p.PID(), p.Started(), ready)
	}
	s, err := p.Scrape(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h := s.Plan(); h.Count != 2 || h.Sum != 0.25 {
		t.Errorf("scraped plans %+v, want 2 of 0.25 s", h)
	}
	log := p.LogTail()
	for _, want := range []string{"--config=", "--bind-address=127.0.0.1", "--secure-port=", "--authentication-kubeconfig=/nonexistent/kubeconfig", "--extra=1"} {
		if !strings.Contains(log, want) {
			t.Errorf("flags lack %s: %s", want, log)
		}
	}
	config := flagValue(t, log, "--config=")
	raw, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Profiles []struct {
			SchedulerName string `json:"schedulerName"`
		} `json:"profiles"`
		EnableContentionProfiling bool `json:"enableContentionProfiling"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil || len(doc.Profiles) != 1 || doc.Profiles[0].SchedulerName != "fake-scheduler" || !doc.EnableContentionProfiling {
		t.Errorf("config %s (%v): %s", config, err, raw)
	}

	dir := t.TempDir()
	path, err := p.KeepStuck(ctx, "ns/pass", dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "ns-pass") + "-{goroutines.txt,scheduler.log}"; path != want {
		t.Errorf("KeepStuck = %s, want %s", path, want)
	}
	if dump, err := os.ReadFile(filepath.Join(dir, "ns-pass-goroutines.txt")); err != nil || string(dump) != "goroutine 1 [running] (debug=2)" {
		t.Errorf("goroutine dump %q (%v)", dump, err)
	}
	if kept, err := os.ReadFile(filepath.Join(dir, "ns-pass-scheduler.log")); err != nil || !strings.Contains(string(kept), "fake scheduler flags:") {
		t.Errorf("kept log %q (%v)", kept, err)
	}
	if _, err := p.Get(ctx, "/nothing"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("Get of a missing path: %v", err)
	}

	p.Stop()
	select {
	case <-p.Exited():
	default:
		t.Fatal("Stop returned before the process exited")
	}
	p.Stop() // a second Stop is a no-op
}

func flagValue(t *testing.T, log, prefix string) string {
	t.Helper()
	for _, f := range strings.Fields(log) {
		if v, ok := strings.CutPrefix(f, prefix); ok {
			return v
		}
	}
	t.Fatalf("no %s in %s", prefix, log)
	return ""
}

// TestExitAtStart: a scheduler that exits before it is ready is reported
// with its log.
func TestExitAtStart(t *testing.T) {
	p := start(t, "exit")
	_, err := p.WaitReady(context.Background(), time.Minute)
	if err == nil || !strings.Contains(err.Error(), "scheduler exited at start") || !strings.Contains(err.Error(), "bad flag --nope") {
		t.Errorf("WaitReady = %v", err)
	}
}

func TestStartMissingBinary(t *testing.T) {
	if _, err := Start(cluster(t), filepath.Join(t.TempDir(), "missing"), []byte(oneProfile), "x", false, "x"); err == nil {
		t.Error("Start of a missing binary: no error")
	}
}

func TestConfig(t *testing.T) {
	tests := []struct {
		name, in  string
		profiling bool
		err       string
	}{
		{"plain", oneProfile, false, ""},
		{"profiling", oneProfile, true, ""},
		{"two profiles", oneProfile + "- schedulerName: y\n", false, "want one profile"},
		{"no profiles", "kind: KubeSchedulerConfiguration\n", false, "want one profile"},
		{"profile not a map", "profiles: [x]\n", false, "not a map"},
		{"not yaml", "profiles: [", false, "yaml"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Config([]byte(tc.in), "named", tc.profiling)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Config = %v, want an error with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string]any
			if err := yaml.Unmarshal(out, &doc); err != nil {
				t.Fatal(err)
			}
			name := doc["profiles"].([]any)[0].(map[string]any)["schedulerName"]
			if name != "named" || doc["enableProfiling"] != true || doc["enableContentionProfiling"] != tc.profiling {
				t.Errorf("Config = %s", out)
			}
		})
	}
}

func TestGet(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ok" {
			fmt.Fprint(w, "body")
			return
		}
		http.Error(w, " forbidden  ", http.StatusForbidden)
	}))
	defer srv.Close()
	ctx := context.Background()
	if got, err := get(ctx, srv.Client(), srv.URL+"/ok"); err != nil || string(got) != "body" {
		t.Errorf("get /ok = %q, %v", got, err)
	}
	_, err := get(ctx, srv.Client(), srv.URL+"/no")
	if err == nil || !strings.Contains(err.Error(), "403 Forbidden: forbidden") {
		t.Errorf("get /no = %v, want the status and trimmed body", err)
	}
}

func TestFreePort(t *testing.T) {
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatalf("port %d is not free: %v", port, err)
	}
	l.Close()
}
