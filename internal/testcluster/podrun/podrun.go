// Package podrun runs one container of a rendered pod spec as a local
// process inside bubblewrap, the way the kubelet would run it.
package podrun

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// serviceAccountDir is where the kubelet mounts a pod's ServiceAccount token,
// and where client-go's in-cluster config reads it.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// Run describes one container of a rendered pod spec to run as a local
// process the way the kubelet would: inside bubblewrap, with the container's
// command and args, its volumes mounted where the spec says, the pod's
// ServiceAccount token as the only credential (in-cluster config), its user,
// no capabilities, and a read-only root filesystem when the spec says so.
type Run struct {
	Name      string // for logs and scratch files
	Namespace string
	Spec      corev1.PodSpec
	Container string // name; default the first container
	// Images maps a path inside the image ("/phalanx-scheduler") to the local
	// binary; the image has nothing else (distroless).
	Images map[string]string
	// ConfigMaps holds the data of the ConfigMaps that volumes name.
	ConfigMaps map[string]map[string]string
	// HostPaths maps a hostPath volume's path to the local file or directory
	// standing in for the node's (replace mode's static pod).
	HostPaths map[string]string
	// Ports maps a container port to the local port it is reachable on: a
	// pod has its own network namespace, a local process does not. The
	// caller adds the flags that move the process to those ports (ExtraArgs),
	// the one departure from the spec's args.
	Ports     map[int32]int
	ExtraArgs []string
	// ServiceAccountToken is written as the pod's token when set; otherwise a
	// token for spec.serviceAccountName is requested (TokenRequest).
	ServiceAccountToken string
}

// Process is a running Run.
type Process struct {
	Name string
	Log  string
	Addr map[int32]string // container port -> host:port
	stop func() error
	done chan struct{}
}

// Stop ends the process (SIGTERM, then SIGKILL) and waits for it.
func (p *Process) Stop() error {
	if p == nil || p.stop == nil {
		return nil
	}
	f := p.stop
	p.stop = nil
	return f()
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// BwrapAvailable reports whether bubblewrap can run here (hack/ensure-deb.sh
// installs it).
func BwrapAvailable() error {
	if _, err := exec.LookPath("bwrap"); err != nil {
		return fmt.Errorf("bwrap not found (run hack/ensure-deb.sh bwrap bubblewrap): %w", err)
	}
	return nil
}

// Env is what a pod needs of the cluster it runs against.
type Env struct {
	// Dir holds the pod's scratch files and its log.
	Dir string
	// Endpoint returns the API server's host, port and CA bundle as a pod
	// sees them; asked only for a pod that mounts a ServiceAccount token.
	Endpoint func() (host string, port int, ca []byte, err error)
	// Token requests a token for a ServiceAccount (TokenRequest).
	Token func(ctx context.Context, namespace, name string) (string, error)
	// OnStop registers what ends the process with the cluster.
	OnStop func(func())
}

// Start starts r and waits until its readiness probe passes (if it has
// one). It stops with the cluster (env.OnStop).
func Start(ctx context.Context, env Env, r Run) (*Process, error) {
	if err := BwrapAvailable(); err != nil {
		return nil, err
	}
	ctr, err := container(r.Spec, r.Container)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(env.Dir, "pod-"+r.Name+"-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	readOnly := ctr.SecurityContext != nil && ptr.Deref(ctr.SecurityContext.ReadOnlyRootFilesystem, false)
	args := sandboxArgs(r, ctr)
	mounts, err := volumeArgs(r, ctr, dir, readOnly)
	if err != nil {
		return nil, err
	}
	args = append(args, mounts...)
	environ := []string{"PATH=/usr/bin:/bin"}
	if r.Spec.ServiceAccountName != "" && ptr.Deref(r.Spec.AutomountServiceAccountToken, true) {
		saArgs, saEnv, err := serviceAccountArgs(ctx, env, r, dir)
		if err != nil {
			return nil, err
		}
		args, environ = append(args, saArgs...), append(environ, saEnv...)
	}
	for _, e := range ctr.Env {
		if e.ValueFrom != nil {
			return nil, fmt.Errorf("%s: env %s: valueFrom is not supported", r.Name, e.Name)
		}
		environ = append(environ, e.Name+"="+e.Value)
	}
	args = append(args, "--clearenv")
	for _, e := range environ {
		k, v, _ := strings.Cut(e, "=")
		args = append(args, "--setenv", k, v)
	}
	if readOnly {
		args = append(args, "--remount-ro", "/")
	}
	args = append(args, "--chdir", "/")
	args = append(args, ctr.Command...)
	args = append(args, ctr.Args...)
	args = append(args, r.ExtraArgs...)

	p, err := start(env, r, args)
	if err != nil {
		return nil, err
	}
	if ctr.ReadinessProbe != nil && ctr.ReadinessProbe.HTTPGet != nil {
		if err := p.waitReady(ctx, ctr.ReadinessProbe.HTTPGet, r.Ports); err != nil {
			return p, err
		}
	}
	return p, nil
}

// sandboxArgs are bubblewrap's arguments for the container's user, its
// namespaces and the image's root filesystem.
func sandboxArgs(r Run, ctr corev1.Container) []string {
	uid, gid := int64(0), int64(0)
	for _, sc := range []*corev1.SecurityContext{podLevel(r.Spec.SecurityContext), ctr.SecurityContext} {
		if sc == nil {
			continue
		}
		if sc.RunAsUser != nil {
			uid = *sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			gid = *sc.RunAsGroup
		}
	}
	args := []string{
		"--unshare-user", "--uid", strconv.FormatInt(uid, 10), "--gid", strconv.FormatInt(gid, 10),
		"--unshare-pid", "--unshare-ipc", "--die-with-parent", "--new-session",
		// A pod's hostname is its name (leader election identities use it).
		"--unshare-uts", "--hostname", r.Name,
		"--cap-drop", "ALL",
		// The image's root: empty but for what is bound below.
		"--tmpfs", "/",
		"--proc", "/proc", "--dev", "/dev",
		// The host's shared libraries, read-only (the binaries under test may
		// be linked against libc; the image's are static).
		"--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
		"--dir", "/tmp",
	}
	for inImage, local := range r.Images {
		args = append(args, "--ro-bind", local, inImage)
	}
	return args
}

// volumeArgs binds the container's volumes where it mounts them; a
// ConfigMap's data is written under dir.
func volumeArgs(r Run, ctr corev1.Container, dir string, readOnly bool) ([]string, error) {
	volumes := map[string]corev1.Volume{}
	for _, v := range r.Spec.Volumes {
		volumes[v.Name] = v
	}
	var args []string
	for _, m := range ctr.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			return nil, fmt.Errorf("%s: volumeMount %s names no volume", r.Name, m.Name)
		}
		var src string
		switch {
		case v.ConfigMap != nil:
			data, ok := r.ConfigMaps[v.ConfigMap.Name]
			if !ok {
				return nil, fmt.Errorf("%s: volume %s: ConfigMap %s not given", r.Name, v.Name, v.ConfigMap.Name)
			}
			src = filepath.Join(dir, "volumes", v.Name)
			if err := writeFiles(src, data); err != nil {
				return nil, err
			}
		case v.HostPath != nil:
			if src, ok = r.HostPaths[v.HostPath.Path]; !ok {
				return nil, fmt.Errorf("%s: hostPath %s not given", r.Name, v.HostPath.Path)
			}
		default:
			return nil, fmt.Errorf("%s: volume %s: only configMap and hostPath volumes are supported", r.Name, v.Name)
		}
		bind := "--bind"
		if m.ReadOnly || readOnly {
			bind = "--ro-bind"
		}
		args = append(args, bind, src, m.MountPath)
	}
	return args, nil
}

// writeFiles creates dir with a file per entry of data.
func writeFiles(dir string, data map[string]string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for k, val := range data {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(val), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// serviceAccountArgs mounts the pod's ServiceAccount token where client-go's
// in-cluster config reads it, and returns the environment naming the API
// server.
func serviceAccountArgs(ctx context.Context, env Env, r Run, dir string) (args, environ []string, err error) {
	host, port, ca, err := env.Endpoint()
	if err != nil {
		return nil, nil, err
	}
	token := r.ServiceAccountToken
	if token == "" {
		if token, err = env.Token(ctx, r.Namespace, r.Spec.ServiceAccountName); err != nil {
			return nil, nil, err
		}
	}
	sa := filepath.Join(dir, "serviceaccount")
	if err := os.MkdirAll(sa, 0o755); err != nil {
		return nil, nil, err
	}
	for name, content := range map[string][]byte{"token": []byte(token), "ca.crt": ca, "namespace": []byte(r.Namespace)} {
		if err := os.WriteFile(filepath.Join(sa, name), content, 0o644); err != nil {
			return nil, nil, err
		}
	}
	return []string{"--ro-bind", sa, serviceAccountDir},
		[]string{"KUBERNETES_SERVICE_HOST=" + host, "KUBERNETES_SERVICE_PORT=" + strconv.Itoa(port)}, nil
}

// start starts bubblewrap with args, logging to env.Dir; the process stops
// with the cluster.
func start(env Env, r Run, args []string) (*Process, error) {
	logFile, err := os.Create(filepath.Join(env.Dir, r.Name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("bwrap", args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("%s: %w", r.Name, err)
	}
	p := &Process{Name: r.Name, Log: logFile.Name(), Addr: map[int32]string{}, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logFile.Close(); close(p.done) }()
	p.stop = func() error {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-p.done
		}
		return nil
	}
	env.OnStop(func() { _ = p.Stop() })
	for cp, hp := range r.Ports {
		p.Addr[cp] = net.JoinHostPort("127.0.0.1", strconv.Itoa(hp))
	}
	return p, nil
}

// waitReady polls the readiness probe as the kubelet would (TLS unverified).
func (p *Process) waitReady(ctx context.Context, probe *corev1.HTTPGetAction, ports map[int32]int) error {
	port, ok := ports[probe.Port.IntVal]
	if !ok {
		port = probe.Port.IntValue()
	}
	scheme := strings.ToLower(string(probe.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	url := fmt.Sprintf("%s://%s%s", scheme, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), probe.Path)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if p.Exited() {
			return fmt.Errorf("%s exited before it was ready; log %s:\n%s", p.Name, p.Log, tail(p.Log, 30))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s not ready at %s; log %s:\n%s", p.Name, url, p.Log, tail(p.Log, 30))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func container(spec corev1.PodSpec, name string) (corev1.Container, error) {
	for _, c := range spec.Containers {
		if name == "" || c.Name == name {
			return c, nil
		}
	}
	return corev1.Container{}, fmt.Errorf("no container %q", name)
}

func podLevel(psc *corev1.PodSecurityContext) *corev1.SecurityContext {
	if psc == nil {
		return nil
	}
	return &corev1.SecurityContext{RunAsUser: psc.RunAsUser, RunAsGroup: psc.RunAsGroup}
}
