package podrun

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// testEnv is an Env whose API server is a fixed endpoint and whose stops
// run at the end of the test.
func testEnv(t *testing.T) Env {
	t.Helper()
	return Env{
		Dir: t.TempDir(),
		Endpoint: func() (string, int, []byte, error) {
			return "10.0.0.1", 6443, []byte("the CA"), nil
		},
		Token: func(_ context.Context, namespace, name string) (string, error) {
			return "token-of-" + namespace + "/" + name, nil
		},
		OnStop: func(f func()) { t.Cleanup(f) },
	}
}

func shell(script string) corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Command: []string{"/usr/bin/sh", "-c", script}}}}
}

// run starts r and returns its log once it has exited.
func run(t *testing.T, env Env, r Run) string {
	t.Helper()
	if err := BwrapAvailable(); err != nil {
		t.Skip(err)
	}
	p, err := Start(context.Background(), env, r)
	if err != nil {
		t.Fatal(err)
	}
	<-p.done
	out, err := os.ReadFile(p.Log)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestStartAsTheKubelet: the container runs as its user, under the pod's
// name, with only its env, its ConfigMap volume and the ServiceAccount's
// token where in-cluster config reads them.
func TestStartAsTheKubelet(t *testing.T) {
	spec := shell(`id -u; id -g; hostname; echo "$GREETING $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT $HOME"; ` +
		`cat /etc/app/key; echo; cat ` + serviceAccountDir + `/token; echo; cat ` + serviceAccountDir + `/namespace`)
	spec.ServiceAccountName = "sa"
	spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](1000)}
	spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsGroup: ptr.To[int64](2000)}
	spec.Containers[0].Env = []corev1.EnvVar{{Name: "GREETING", Value: "hello"}}
	spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}}
	spec.Volumes = []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}}}
	got := run(t, testEnv(t), Run{
		Name: "pod-a", Namespace: "ns", Spec: spec,
		ConfigMaps: map[string]map[string]string{"app": {"key": "value"}},
	})
	want := "1000\n2000\npod-a\nhello 10.0.0.1:6443 \nvalue\ntoken-of-ns/sa\nns"
	if strings.TrimSpace(got) != want {
		t.Fatalf("the pod printed\n%s\nwant\n%s", got, want)
	}
}

// TestGivenTokenAndExtraArgs: a given token is mounted as it is (no
// TokenRequest), and ExtraArgs follow the spec's command and args.
func TestGivenTokenAndExtraArgs(t *testing.T) {
	env := testEnv(t)
	env.Token = func(context.Context, string, string) (string, error) {
		return "", errors.New("TokenRequest asked for though a token was given")
	}
	spec := shell(`cat ` + serviceAccountDir + `/token; echo " $0 $1"`)
	spec.ServiceAccountName = "sa"
	spec.Containers[0].Args = []string{"first"}
	got := run(t, env, Run{Name: "pod-b", Namespace: "ns", Spec: spec, ServiceAccountToken: "given", ExtraArgs: []string{"second"}})
	if strings.TrimSpace(got) != "given first second" {
		t.Fatalf("the pod printed %q", got)
	}
}

// TestReadOnlyRoot: the image's root filesystem is read-only when the
// container's security context says so, and writable otherwise.
func TestReadOnlyRoot(t *testing.T) {
	for _, tc := range []struct {
		readOnly *bool
		want     string
	}{
		{nil, "writable"},
		{ptr.To(false), "writable"},
		{ptr.To(true), "read-only"},
	} {
		t.Run(tc.want+"/"+strconv.FormatBool(ptr.Deref(tc.readOnly, false)), func(t *testing.T) {
			spec := shell(`if /usr/bin/touch /file 2>/dev/null; then echo writable; else echo read-only; fi`)
			spec.Containers[0].SecurityContext = &corev1.SecurityContext{ReadOnlyRootFilesystem: tc.readOnly}
			if got := strings.TrimSpace(run(t, testEnv(t), Run{Name: "ro", Spec: spec})); got != tc.want {
				t.Fatalf("the root is %s, want %s", got, tc.want)
			}
		})
	}
}

// TestStartRefuses: what the runner cannot do as the kubelet would is an
// error before anything runs.
func TestStartRefuses(t *testing.T) {
	if err := BwrapAvailable(); err != nil {
		t.Skip(err)
	}
	valueFrom := shell("true")
	valueFrom.Containers[0].Env = []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{}}}
	withSA := shell("true")
	withSA.ServiceAccountName = "sa"
	noEndpoint := testEnv(t)
	noEndpoint.Endpoint = func() (string, int, []byte, error) { return "", 0, nil, errors.New("not an in-process cluster") }
	for _, tc := range []struct {
		name string
		env  Env
		run  Run
		want string
	}{
		{"env valueFrom", testEnv(t), Run{Name: "p", Spec: valueFrom}, "valueFrom is not supported"},
		{"no such container", testEnv(t), Run{Name: "p", Spec: shell("true"), Container: "sidecar"}, `no container "sidecar"`},
		{"no API server for the token", noEndpoint, Run{Name: "p", Spec: withSA}, "not an in-process cluster"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Start(context.Background(), tc.env, tc.run); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestStopEndsTheProcess: Stop ends a process that would run on, once.
func TestStopEndsTheProcess(t *testing.T) {
	if err := BwrapAvailable(); err != nil {
		t.Skip(err)
	}
	p, err := Start(context.Background(), testEnv(t), Run{Name: "sleeper", Spec: shell("exec /usr/bin/sleep 600")})
	if err != nil {
		t.Fatal(err)
	}
	if p.Exited() {
		t.Fatal("exited at once")
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if !p.Exited() {
		t.Fatal("still running after Stop")
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("a second Stop: %v", err)
	}
}

// TestWaitReady: the readiness probe is polled on the local port standing
// in for the container port; a process that exits first is reported with
// its log.
func TestWaitReady(t *testing.T) {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer s.Close()
	_, portText, _ := net.SplitHostPort(s.Listener.Addr().String())
	port, _ := strconv.Atoi(portText)
	probe := &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(10259)}
	running := &Process{Name: "p", done: make(chan struct{})}
	if err := running.waitReady(context.Background(), probe, map[int32]int{10259: port}); err != nil {
		t.Fatalf("ready: %v", err)
	}
	log := filepath.Join(t.TempDir(), "p.log")
	if err := os.WriteFile(log, []byte("starting\nfatal: no config\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	exited := &Process{Name: "p", Log: log, done: make(chan struct{})}
	close(exited.done)
	err := exited.waitReady(context.Background(), probe, map[int32]int{10259: port})
	if err == nil || !strings.Contains(err.Error(), "exited before it was ready") || !strings.Contains(err.Error(), "fatal: no config") {
		t.Fatalf("exited: %v", err)
	}
}

func TestSandboxArgs(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pod      *corev1.PodSecurityContext
		ctr      *corev1.SecurityContext
		uid, gid string
	}{
		{"root by default", nil, nil, "0", "0"},
		{"pod level", &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65533)}, nil, "65532", "65533"},
		{"container over pod", &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1)}, &corev1.SecurityContext{RunAsUser: ptr.To[int64](2)}, "2", "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Run{Name: "pod", Spec: corev1.PodSpec{SecurityContext: tc.pod}, Images: map[string]string{"/bin/app": "/local/app"}}
			args := sandboxArgs(r, corev1.Container{SecurityContext: tc.ctr})
			for _, want := range [][]string{{"--uid", tc.uid}, {"--gid", tc.gid}, {"--hostname", "pod"}, {"--cap-drop", "ALL"}, {"--ro-bind", "/local/app", "/bin/app"}} {
				if !containsRun(args, want) {
					t.Errorf("args %q lack %q", args, want)
				}
			}
		})
	}
}

func TestVolumeArgs(t *testing.T) {
	cm := corev1.Volume{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "data"}}}}
	host := corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/etc/kubernetes"}}}
	empty := corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	for _, tc := range []struct {
		name     string
		volumes  []corev1.Volume
		mounts   []corev1.VolumeMount
		readOnly bool
		want     [][]string // runs of args
		err      string
	}{
		{name: "configMap", volumes: []corev1.Volume{cm}, mounts: []corev1.VolumeMount{{Name: "cm", MountPath: "/etc/app"}},
			want: [][]string{{"--bind"}, {"/etc/app"}}},
		{name: "read-only mount", volumes: []corev1.Volume{host}, mounts: []corev1.VolumeMount{{Name: "host", MountPath: "/etc/k", ReadOnly: true}},
			want: [][]string{{"--ro-bind", "/local/kubernetes", "/etc/k"}}},
		{name: "read-only root", volumes: []corev1.Volume{host}, mounts: []corev1.VolumeMount{{Name: "host", MountPath: "/etc/k"}}, readOnly: true,
			want: [][]string{{"--ro-bind", "/local/kubernetes", "/etc/k"}}},
		{name: "no such volume", mounts: []corev1.VolumeMount{{Name: "cm"}}, err: "names no volume"},
		{name: "ConfigMap not given", volumes: []corev1.Volume{{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "other"}}}}}, mounts: []corev1.VolumeMount{{Name: "cm"}}, err: "ConfigMap other not given"},
		{name: "hostPath not given", volumes: []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var"}}}},
			mounts: []corev1.VolumeMount{{Name: "host"}}, err: "hostPath /var not given"},
		{name: "other kinds", volumes: []corev1.Volume{empty}, mounts: []corev1.VolumeMount{{Name: "scratch"}}, err: "only configMap and hostPath"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			r := Run{Name: "pod", Spec: corev1.PodSpec{Volumes: tc.volumes},
				ConfigMaps: map[string]map[string]string{"data": {"a.yaml": "a: 1"}},
				HostPaths:  map[string]string{"/etc/kubernetes": "/local/kubernetes"}}
			args, err := volumeArgs(r, corev1.Container{VolumeMounts: tc.mounts}, dir, tc.readOnly)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range tc.want {
				if !containsRun(args, want) {
					t.Errorf("args %q lack %q", args, want)
				}
			}
			if tc.name == "configMap" {
				if got, err := os.ReadFile(filepath.Join(args[1], "a.yaml")); err != nil || string(got) != "a: 1" {
					t.Fatalf("the ConfigMap's file: %q %v", got, err)
				}
			}
		})
	}
}

func TestTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(path, []byte("1\n2\n3\n4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for n, want := range map[int]string{2: "3\n4", 4: "1\n2\n3\n4", 10: "1\n2\n3\n4"} {
		if got := tail(path, n); got != want {
			t.Errorf("tail(%d) = %q, want %q", n, got, want)
		}
	}
}

// containsRun reports whether want appears in args as consecutive elements.
func containsRun(args, want []string) bool {
	for i := range args {
		if i+len(want) <= len(args) && slices.Equal(args[i:i+len(want)], want) {
			return true
		}
	}
	return false
}
