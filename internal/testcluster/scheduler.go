package testcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/component-base/configz"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"sigs.k8s.io/yaml"

	"github.com/phalanx-sched/phalanx/internal/testcluster/logguard"
	"github.com/phalanx-sched/phalanx/plugins"
	"github.com/phalanx-sched/phalanx/plugins/runtime"
)

// configzMu serialises in-process schedulers' use of the global configz key.
var configzMu sync.Mutex

// Scheduler is a running phalanx scheduler, in-process or a child process.
type Scheduler struct {
	// Runtime and Profiles are set for a scheduler run in this process: its
	// plugins' runtime and its profiles' frameworks.
	Runtime  *runtime.Runtime
	Profiles map[string]framework.Framework

	stop func() error
	kill func()
	dump func()
	// Log is the child process's output file ("" in-process).
	Log string
}

// DumpAndStop makes a scheduler binary print its goroutines to its log and
// exit (for diagnosing a test failure).
func (s *Scheduler) DumpAndStop() {
	if s == nil || s.dump == nil {
		return
	}
	f := s.dump
	s.dump, s.kill, s.stop = nil, nil, nil
	f()
}

// Kill ends a scheduler binary with SIGKILL, as a crash would, and waits for
// it to exit: nothing it held in memory is cleaned up.
func (s *Scheduler) Kill() {
	if s == nil || s.kill == nil {
		return
	}
	f := s.kill
	s.kill, s.stop = nil, nil
	f()
}

// Stop ends the scheduler and waits for it to exit.
func (s *Scheduler) Stop() error {
	if s == nil || s.stop == nil {
		return nil
	}
	f := s.stop
	s.stop = nil
	return f()
}

// WriteSchedulerConfig writes config to a file, pointing clientConnection at
// the cluster (unless withKubeconfig is false) and turning leader election off
// unless the config sets it.
func (c *Cluster) WriteSchedulerConfig(config []byte, withKubeconfig bool) (string, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(config, &doc); err != nil {
		return "", fmt.Errorf("scheduler config: %w", err)
	}
	if doc == nil {
		doc = map[string]any{}
	}
	conn, _ := doc["clientConnection"].(map[string]any)
	if conn == nil {
		conn = map[string]any{}
	}
	if withKubeconfig {
		conn["kubeconfig"] = c.Kubeconfig
	}
	doc["clientConnection"] = conn
	if _, ok := doc["leaderElection"]; !ok {
		doc["leaderElection"] = map[string]any{"leaderElect": false}
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(c.Dir, "scheduler-config-*.yaml")
	if err != nil {
		return "", err
	}
	defer f.Close()
	_, err = f.Write(out)
	return f.Name(), err
}

// StartScheduler runs the real kube-scheduler app with the phalanx plugins in
// this process. It returns once the scheduler is set up; errors in config or
// plugin args are returned here, as the binary would refuse to start.
func (c *Cluster) StartScheduler(config []byte) (*Scheduler, error) {
	path, err := c.WriteSchedulerConfig(config, true)
	if err != nil {
		return nil, err
	}
	opts := options.NewOptions()
	opts.ConfigFile = path
	opts.SecureServing.BindPort = 0
	opts.SecureServing.Listener = nil

	if err := plugins.SetFeatureDefaults(); err != nil {
		return nil, err
	}
	configzMu.Lock()
	guard := &logguard.Guard{}
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), guard.Logger(klog.Background())))
	rt := runtime.New(ctx, nil)
	cc, sched, err := plugins.Setup(ctx, opts, plugins.OptionsWith(rt)...)
	if err != nil {
		cancel()
		configz.Delete("componentconfig")
		configzMu.Unlock()
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, cc, sched) }()
	s := &Scheduler{Runtime: rt, Profiles: map[string]framework.Framework{}}
	for name, fw := range sched.Profiles {
		s.Profiles[name] = fw
	}
	s.stop = func() error {
		c.reportForbidden("the in-process scheduler", guard.Stop())
		cancel()
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			err = fmt.Errorf("scheduler did not stop within 30s")
		}
		configz.Delete("componentconfig")
		configzMu.Unlock()
		// Without leader election, Run reports its normal end as an error.
		if err == context.Canceled || (err != nil && err.Error() == "finished without leader elect") {
			err = nil
		}
		return err
	}
	c.onStop(func() { _ = s.Stop() })
	return s, nil
}

// StartSchedulerBinary runs the built phalanx-scheduler binary with
// --config and --kubeconfig, plus args. Its output goes to s.Log.
func (c *Cluster) StartSchedulerBinary(binary string, config []byte, args ...string) (*Scheduler, error) {
	path, err := c.WriteSchedulerConfig(config, false)
	if err != nil {
		return nil, err
	}
	logFile, err := os.CreateTemp(c.Dir, "scheduler-*.log")
	if err != nil {
		return nil, err
	}
	argv := append([]string{"--config=" + path, "--kubeconfig=" + c.Kubeconfig, "--secure-port=0"}, args...)
	cmd := exec.Command(binary, argv...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); logFile.Close() }()
	checkLog := func() {
		c.reportForbidden("phalanx-scheduler "+filepath.Base(logFile.Name()), logguard.InFile(logFile.Name()))
	}
	s := &Scheduler{Log: logFile.Name(), kill: func() {
		checkLog()
		_ = cmd.Process.Kill()
		<-done
	}, dump: func() {
		// SIGQUIT makes a Go program print every goroutine and exit.
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
		}
	}}
	s.stop = func() error {
		checkLog()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		return nil
	}
	c.onStop(func() { _ = s.Stop() })
	return s, nil
}

// RunSchedulerBinary runs the binary to completion (for start-up failures) and
// returns its combined output and exit error, or an error if it is still
// running after timeout.
func (c *Cluster) RunSchedulerBinary(binary string, config []byte, timeout time.Duration, args ...string) (string, error) {
	path, err := c.WriteSchedulerConfig(config, false)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	argv := append([]string{"--config=" + path, "--kubeconfig=" + c.Kubeconfig, "--secure-port=0"}, args...)
	out, err := exec.CommandContext(ctx, binary, argv...).CombinedOutput()
	if ctx.Err() != nil {
		return string(out), fmt.Errorf("%s still running after %v", filepath.Base(binary), timeout)
	}
	return string(out), err
}

// reportForbidden fails the cluster's test when a scheduler logged a
// forbidden line while it ran.
func (c *Cluster) reportForbidden(what string, hits []string) {
	if len(hits) == 0 || c.tb == nil {
		return
	}
	c.tb.Helper()
	if len(hits) > 5 {
		hits = append(hits[:5], fmt.Sprintf("... and %d more", len(hits)-5))
	}
	c.tb.Errorf("%s logged a broken scheduling-queue assumption while it ran:\n%s", what, strings.Join(hits, "\n"))
}
