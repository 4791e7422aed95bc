// Package schedproc runs a scheduler binary as a child process against a
// test cluster, with its /metrics and pprof served on a local port, and
// reads them: readiness, metric scrapes, profiles, goroutine dumps.
package schedproc

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/phalanx-sched/phalanx/internal/bench/scrape"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// Process is a scheduler binary run as its own process, serving /metrics
// and pprof on a local port.
type Process struct {
	cmd     *exec.Cmd
	started time.Time
	exited  chan struct{}
	log     string
	base    string
	client  *http.Client
	once    sync.Once
}

// Start runs a scheduler binary with config (its one profile
// named schedulerName), serving /metrics and pprof on a local port, with
// extra flags; its output goes to a log named after logName.
func Start(c *testcluster.Cluster, binary string, config []byte, schedulerName string, profiling bool, logName string, extra ...string) (*Process, error) {
	config, err := Config(config, schedulerName, profiling)
	if err != nil {
		return nil, err
	}
	path, err := c.WriteSchedulerConfig(config, true)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	certDir, err := os.MkdirTemp(c.Dir, "certs-")
	if err != nil {
		return nil, err
	}
	args := append([]string{
		"--config=" + path,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + certDir,
		// Requests for metrics and profiles are authenticated with the
		// cluster's admin credentials and need no authorization.
		"--authentication-kubeconfig=" + c.Kubeconfig,
		"--authorization-kubeconfig=" + c.Kubeconfig,
		"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics,/debug/pprof/*",
	}, extra...)
	logFile, err := os.CreateTemp(c.Dir, logName+"-*.log")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cs := &Process{cmd: cmd, exited: make(chan struct{}), log: logFile.Name(), base: fmt.Sprintf("https://127.0.0.1:%d", port)}
	if cs.client, err = schedulerClient(c.Config); err != nil {
		logFile.Close()
		return nil, err
	}
	cs.started = time.Now()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(cs.exited)
	}()
	return cs, nil
}

// Config sets the profile's schedulerName and, for profiled
// passes, contention profiling (block profile rate 1, which costs time).
func Config(config []byte, schedulerName string, profiling bool) ([]byte, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(config, &doc); err != nil {
		return nil, err
	}
	profiles, _ := doc["profiles"].([]any)
	if len(profiles) != 1 {
		return nil, fmt.Errorf("want one profile in the bench's scheduler config, got %d", len(profiles))
	}
	p, _ := profiles[0].(map[string]any)
	if p == nil {
		return nil, fmt.Errorf("profile is not a map")
	}
	p["schedulerName"] = schedulerName
	doc["enableProfiling"] = true
	doc["enableContentionProfiling"] = profiling
	return yaml.Marshal(doc)
}

// schedulerClient talks to a child scheduler's secure port with the admin
// credentials; the scheduler's serving certificate is self-signed.
func schedulerClient(admin *rest.Config) (*http.Client, error) {
	cfg := &rest.Config{
		BearerToken: admin.BearerToken,
		TLSClientConfig: rest.TLSClientConfig{
			Insecure: true,
			CertData: admin.CertData,
			KeyData:  admin.KeyData,
		},
		Timeout: 2 * time.Minute,
	}
	return rest.HTTPClientFor(cfg)
}

// WaitReady waits until /readyz answers and says when.
func (cs *Process) WaitReady(ctx context.Context, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := cs.Get(rctx, "/readyz")
		cancel()
		if err == nil {
			return time.Now(), nil
		}
		select {
		case <-cs.exited:
			return time.Time{}, fmt.Errorf("scheduler exited at start: %s", cs.LogTail())
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return time.Time{}, fmt.Errorf("scheduler not ready after %v: %s", timeout, cs.LogTail())
}

// Scrape reads the histograms of /metrics.
func (cs *Process) Scrape(ctx context.Context) (scrape.Scrape, error) {
	raw, err := cs.Get(ctx, "/metrics")
	if err != nil {
		return nil, err
	}
	return scrape.ParseScrape(bytes.NewReader(raw))
}

// Stop ends the process (SIGTERM, then SIGKILL after 20 s), once.
func (cs *Process) Stop() {
	cs.once.Do(func() {
		_ = cs.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-cs.exited:
		case <-time.After(20 * time.Second):
			_ = cs.cmd.Process.Kill()
			<-cs.exited
		}
	})
}

// LogTail is the last 2000 bytes of the process's log.
func (cs *Process) LogTail() string {
	raw, _ := os.ReadFile(cs.log)
	if len(raw) > 2000 {
		raw = raw[len(raw)-2000:]
	}
	return string(raw)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// KeepStuck keeps a timed-out scheduler's goroutine dump and log in dir
// (the cluster's directory, where the log is, goes with the run) and says
// where they are.
func (sched *Process) KeepStuck(ctx context.Context, name, dir string) (string, error) {
	raw, err := sched.Get(ctx, "/debug/pprof/goroutine?debug=2")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	prefix := filepath.Join(dir, strings.ReplaceAll(name, "/", "-"))
	if err := os.WriteFile(prefix+"-goroutines.txt", raw, 0o644); err != nil {
		return "", err
	}
	log, err := os.ReadFile(sched.log)
	if err != nil {
		return "", err
	}
	return prefix + "-{goroutines.txt,scheduler.log}", os.WriteFile(prefix+"-scheduler.log", log, 0o644)
}

func get(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, bytes.TrimSpace(body))
	}
	return body, nil
}

// Get reads a path of the process's secure port ("/metrics").
func (cs *Process) Get(ctx context.Context, path string) ([]byte, error) {
	return get(ctx, cs.client, cs.base+path)
}

// PID is the process's id.
func (cs *Process) PID() int { return cs.cmd.Process.Pid }

// Started is when the process was started.
func (cs *Process) Started() time.Time { return cs.started }

// Exited is closed when the process has ended.
func (cs *Process) Exited() <-chan struct{} { return cs.exited }
