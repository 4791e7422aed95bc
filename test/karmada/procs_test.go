package karmada

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// logs collects the components' log files, printed when the test fails
// and copied to $PHALANX_KARMADA_LOGS when set.
type logs struct {
	mu    sync.Mutex
	files map[string]string // name -> path
}

func (l *logs) add(name, path string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.files == nil {
		l.files = map[string]string{}
	}
	l.files[name] = path
}

// dump prints the tail of every log if t failed, and copies them all to
// $PHALANX_KARMADA_LOGS. Register it with t.Cleanup after the components
// start: cleanups run last-in first-out, so it runs before the clusters'
// scratch directories (which hold the phalanx-scheduler logs) are removed.
func (l *logs) dump(t *testing.T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	keep := os.Getenv("PHALANX_KARMADA_LOGS")
	if keep != "" {
		_ = os.MkdirAll(keep, 0o755)
	}
	for name, path := range l.files {
		if keep != "" {
			if raw, err := os.ReadFile(path); err == nil {
				_ = os.WriteFile(filepath.Join(keep, name+".log"), raw, 0o644)
			}
		}
		if t.Failed() {
			t.Logf("---- last lines of %s (%s) ----\n%s", name, path, tail(path, 60))
		}
	}
}

func tail(path string, n int) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// grepLog returns the lines of a log file containing every part.
func grepLog(path string, parts ...string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

// proc is a Karmada component run as a child process.
type proc struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
	once sync.Once
}

// startProc runs bin with args; its output goes to dir/name.log.
func startProc(t *testing.T, l *logs, dir, name, bin string, args ...string) *proc {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("starting %s: %v", name, err)
	}
	p := &proc{name: name, log: f.Name(), cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	l.add(name, p.log)
	t.Cleanup(p.stop)
	return p
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop ends the process with SIGTERM (SIGKILL after 15s) and waits.
func (p *proc) stop() {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
}

func (p *proc) String() string {
	return fmt.Sprintf("%s (log %s)", p.name, p.log)
}
