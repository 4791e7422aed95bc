package e2e

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// Tests of the chart's globalScheduler component (phalanx-global, the Karmada
// global tier) and of manifests/global/rbac.yaml, its access on the Karmada
// plane.

// globalFlags are phalanx-global's flags as the binary registers them
// (its --help): name -> type and default. The chart's values, left as
// shipped, must render exactly these defaults.
type globalFlag struct{ kind, def string }

var (
	globalFlagsOnce sync.Once
	globalFlagsRead map[string]globalFlag
	globalFlagsErr  error
	// helpLine is one pflag usage line: "  --name type   usage (default x)".
	helpLine = regexp.MustCompile(`^\s+(?:-\w, )?(--[\w-]+)(?: (\w+))?\s{2,}.*?(?:\(default (.*)\))?$`)
)

func globalFlags(t *testing.T) map[string]globalFlag {
	t.Helper()
	globalFlagsOnce.Do(func() {
		bin := bins.global
		if bin == "" {
			bin = filepath.Join(os.TempDir(), fmt.Sprintf("phalanx-global-e2e-%d", os.Getpid()))
			cmd := exec.Command("go", "build", "-o", bin, "./cmd/phalanx-global")
			cmd.Dir = repoRoot()
			if out, err := cmd.CombinedOutput(); err != nil {
				globalFlagsErr = fmt.Errorf("building phalanx-global: %v\n%s", err, out)
				return
			}
		}
		out, _ := exec.Command(bin, "--help").CombinedOutput()
		globalFlagsRead = map[string]globalFlag{}
		for _, line := range strings.Split(string(out), "\n") {
			if m := helpLine.FindStringSubmatch(line); m != nil {
				globalFlagsRead[m[1]] = globalFlag{kind: m[2], def: strings.Trim(m[3], `"`)}
			}
		}
		if len(globalFlagsRead) < 10 {
			globalFlagsErr = fmt.Errorf("%s --help lists %d flags:\n%s", bin, len(globalFlagsRead), out)
		}
	})
	if globalFlagsErr != nil {
		t.Fatal(globalFlagsErr)
	}
	return globalFlagsRead
}

// sameFlagValue compares a rendered value with a flag's default by the
// flag's type (pflag leaves zero defaults out of --help).
func sameFlagValue(f globalFlag, value string) bool {
	switch f.kind {
	case "duration":
		a, err1 := time.ParseDuration(value)
		b, err2 := time.ParseDuration(cmp.Or(f.def, "0s"))
		return err1 == nil && err2 == nil && a == b
	case "":
		return value == cmp.Or(f.def, "false")
	case "int", "int32", "float32", "Level":
		return value == cmp.Or(f.def, "0")
	default:
		return value == f.def
	}
}

const globalKubeconfig = "/etc/phalanx/karmada/kubeconfig"

// globalDeployment renders the chart with globalScheduler enabled (and extra
// helm args) and returns the phalanx-global Deployment and the flags of its
// container, by name.
func globalDeployment(t *testing.T, extra ...string) (*appsv1.Deployment, map[string]string, []*unstructured.Unstructured) {
	t.Helper()
	objs := helmTemplate(t, slices.Concat([]string{"--set", "globalScheduler.enabled=true",
		"--set", "globalScheduler.karmadaKubeconfigSecret=karmada-kc"}, extra)...)
	for _, o := range objs {
		if o.GetKind() != "Deployment" || o.GetName() != "phalanx-global" {
			continue
		}
		var dep appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, &dep, true); err != nil {
			t.Fatalf("Deployment phalanx-global: %v", err)
		}
		cmd := dep.Spec.Template.Spec.Containers[0].Command
		if len(cmd) == 0 || cmd[0] != "/phalanx-global" {
			t.Fatalf("phalanx-global command %v, want /phalanx-global first", cmd)
		}
		flags := map[string]string{}
		for _, a := range cmd[1:] {
			name, value, ok := strings.Cut(a, "=")
			if !ok {
				t.Fatalf("phalanx-global arg %q is not --flag=value", a)
			}
			if _, known := globalFlags(t)[name]; !known {
				t.Errorf("phalanx-global has no flag %s (arg %q)", name, a)
			}
			if _, dup := flags[name]; dup {
				t.Errorf("phalanx-global gets %s twice: %v", name, cmd)
			}
			flags[name] = value
		}
		return &dep, flags, objs
	}
	t.Fatal("no Deployment phalanx-global in the render")
	return nil, nil, nil
}

// TestChartGlobalDefaults: the shipped values give phalanx-global exactly
// its own flag defaults, the kubeconfig being the mounted Secret's.
func TestChartGlobalDefaults(t *testing.T) {
	_, flags, _ := globalDeployment(t)
	if flags["--kubeconfig"] != globalKubeconfig {
		t.Errorf("--kubeconfig=%q, want %s", flags["--kubeconfig"], globalKubeconfig)
	}
	for name, value := range flags {
		if f := globalFlags(t)[name]; name != "--kubeconfig" && !sameFlagValue(f, value) {
			t.Errorf("the chart's default %s=%s differs from the binary's %q (%s)", name, value, f.def, f.kind)
		}
	}
	for _, f := range []string{"--scheduler-name", "--default-queue", "--interval", "--starved-after", "--move-after", "--moves-per-hour",
		"--leader-elect", "--estimator-service-namespace", "--estimator-service-prefix", "--estimator-port", "--estimator-timeout"} {
		if _, ok := flags[f]; !ok {
			t.Errorf("the chart does not pass %s", f)
		}
	}
	for _, f := range []string{"--estimator-ca-file", "--estimator-cert-file", "--estimator-key-file"} {
		if _, ok := flags[f]; ok {
			t.Errorf("%s passed without globalScheduler.estimator.tls.secretName", f)
		}
	}
}

// TestChartGlobal: values reach phalanx-global's flags; every file a flag
// names is in a mounted Secret under the key the flag reads; the pod runs as
// the other components do, without a ServiceAccount token; the probes and the
// metrics Service use the ports the flags bind.
func TestChartGlobal(t *testing.T) {
	dep, flags, objs := globalDeployment(t,
		"--set", "globalScheduler.schedulerName=gang-global", "--set", "globalScheduler.defaultQueue=research",
		"--set", "globalScheduler.interval=2s", "--set", "globalScheduler.starvedAfter=0",
		"--set", "globalScheduler.moveAfter=15m", "--set", "globalScheduler.movesPerHour=2",
		"--set", "globalScheduler.estimator.serviceNamespace=estimators", "--set", "globalScheduler.estimator.servicePrefix=est",
		"--set", "globalScheduler.estimator.port=9443", "--set", "globalScheduler.estimator.timeout=1500ms",
		"--set", "globalScheduler.estimator.tls.secretName=est-tls", "--set", "globalScheduler.estimator.tls.insecureSkipVerify=true",
		"--set", "globalScheduler.replicas=2", "--set", "globalScheduler.logLevel=4",
		"--set", "globalScheduler.extraArgs={--kube-api-qps=80}")
	want := map[string]string{
		"--scheduler-name": "gang-global", "--default-queue": "research", "--interval": "2s", "--starved-after": "0",
		"--move-after": "15m", "--moves-per-hour": "2", "--leader-elect": "true",
		"--estimator-service-namespace": "estimators", "--estimator-service-prefix": "est", "--estimator-port": "9443",
		"--estimator-timeout": "1500ms", "--estimator-insecure-skip-verify": "true", "--v": "4", "--kube-api-qps": "80",
		"--kubeconfig":          globalKubeconfig,
		"--estimator-ca-file":   "/etc/phalanx/estimator-tls/ca.crt",
		"--estimator-cert-file": "/etc/phalanx/estimator-tls/tls.crt",
		"--estimator-key-file":  "/etc/phalanx/estimator-tls/tls.key",
	}
	for name, value := range want {
		if flags[name] != value {
			t.Errorf("%s=%q, want %q", name, flags[name], value)
		}
	}
	if *dep.Spec.Replicas != 2 {
		t.Errorf("replicas %d, want 2", *dep.Spec.Replicas)
	}

	pod := dep.Spec.Template.Spec
	c := pod.Containers[0]
	secrets := map[string]string{} // volume name -> Secret
	for _, v := range pod.Volumes {
		if v.Secret != nil {
			secrets[v.Name] = v.Secret.SecretName
		}
	}
	wantSecrets := map[string]string{"--kubeconfig": "karmada-kc", "--estimator-ca-file": "est-tls",
		"--estimator-cert-file": "est-tls", "--estimator-key-file": "est-tls"}
	for flag, secret := range wantSecrets {
		file := flags[flag]
		var mount *corev1.VolumeMount
		for i, m := range c.VolumeMounts {
			if filepath.Dir(file) == m.MountPath {
				mount = &c.VolumeMounts[i]
			}
		}
		switch {
		case mount == nil:
			t.Errorf("%s=%s: no volume mounted at %s (mounts %+v)", flag, file, filepath.Dir(file), c.VolumeMounts)
		case !mount.ReadOnly || mount.SubPath != "":
			t.Errorf("%s: mount %+v, want the whole Secret read-only", flag, mount)
		case secrets[mount.Name] != secret:
			t.Errorf("%s=%s: volume %s is Secret %q, want %q (key %s)", flag, file, mount.Name, secrets[mount.Name], secret, filepath.Base(file))
		}
	}

	psc, sc := pod.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil {
		t.Errorf("pod securityContext %+v", psc)
	}
	if sc == nil || !*sc.ReadOnlyRootFilesystem || !*sc.RunAsNonRoot || *sc.AllowPrivilegeEscalation ||
		*sc.RunAsUser == 0 || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext %+v", sc)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken || pod.ServiceAccountName != "phalanx-global" {
		t.Errorf("pod serviceAccount %q automount %v, want phalanx-global without a token", pod.ServiceAccountName, pod.AutomountServiceAccountToken)
	}

	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for flag, name := range map[string]string{"--metrics-bind-address": "metrics", "--health-probe-bind-address": "health"} {
		if flags[flag] != ":"+strconv.Itoa(int(ports[name])) {
			t.Errorf("%s=%s but container port %s is %d", flag, flags[flag], name, ports[name])
		}
	}
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port.String() != "health" {
			t.Errorf("probe %+v, want GET /healthz on port health", p)
		}
	}
	var svc *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "Service" && o.GetName() == "phalanx-global-metrics" {
			svc = o
		}
	}
	if svc == nil {
		t.Fatal("no Service phalanx-global-metrics")
	}
	svcPorts, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	sel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
	if len(svcPorts) != 1 || svcPorts[0].(map[string]any)["targetPort"] != "metrics" || sel["app.kubernetes.io/component"] != "global" {
		t.Errorf("Service phalanx-global-metrics ports %v selector %v, want targetPort metrics of component global", svcPorts, sel)
	}
	for k, v := range sel {
		if dep.Spec.Template.Labels[k] != v {
			t.Errorf("Service selector %s=%s does not match the pod labels %v", k, v, dep.Spec.Template.Labels)
		}
	}
}

// TestChartGlobalRefuses: globalScheduler off renders nothing of it; a
// missing kubeconfig Secret, replicas without leader election, a misspelt key
// and a duration the binary could not parse fail the render, naming the value.
func TestChartGlobalRefuses(t *testing.T) {
	for _, o := range helmTemplate(t) {
		if o.GetLabels()["app.kubernetes.io/component"] == "global" {
			t.Errorf("globalScheduler.enabled=false renders %s %s", o.GetKind(), o.GetName())
		}
	}
	on := []string{"--set", "globalScheduler.enabled=true", "--set", "globalScheduler.karmadaKubeconfigSecret=karmada-kc"}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{name: "no kubeconfig Secret", args: []string{"--set", "globalScheduler.enabled=true"},
			want: []string{"globalScheduler.enabled needs globalScheduler.karmadaKubeconfigSecret"}},
		{name: "replicas without leader election", args: slices.Concat(on, []string{"--set", "globalScheduler.replicas=2", "--set", "globalScheduler.leaderElect=false"}),
			want: []string{"globalScheduler.replicas > 1 needs globalScheduler.leaderElect"}},
		{name: "typo", args: slices.Concat(on, []string{"--set", "globalScheduler.estimator.tls.secretNam=x"}),
			want: []string{"'/globalScheduler/estimator/tls'", "'secretNam'"}},
		{name: "duration without unit", args: slices.Concat(on, []string{"--set", "globalScheduler.interval=5"}),
			want: []string{"'/globalScheduler/interval'"}},
		{name: "top-level global is Helm's", args: []string{"--set", "global.enabled=true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := slices.Concat([]string{"template", "phalanx", chartDir(), "-n", "phalanx-system"}, tc.args)
			out, err := exec.Command(helmBin(t), args...).CombinedOutput()
			if tc.want == nil {
				// Helm's global values (a parent chart's) are not phalanx-global's switch.
				if err != nil {
					t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
				}
				if strings.Contains(string(out), "/phalanx-global") {
					t.Error("global.enabled=true rendered phalanx-global")
				}
				return
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("helm %s: %v; want a failed render:\n%s", strings.Join(args, " "), err, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("helm %s failed without naming %s:\n%s", strings.Join(args, " "), w, out)
				}
			}
		})
	}
}

// globalAccess is one request phalanx-global makes (or must not be able to
// make) on the Karmada plane.
type globalAccess struct {
	verb, group, resource, subresource, namespace, name, path string
	allowed                                                   bool
}

// TestGlobalRBACOnKarmadaPlane: manifests/global/rbac.yaml, applied to an API
// server that enforces RBAC (the Karmada plane's part that matters here),
// lets user system:phalanx-global do what phalanx-global does and nothing
// beyond it; with the Queue CRD its comment names applied too, that user
// lists Queues and the estimator Services.
func TestGlobalRBACOnKarmadaPlane(t *testing.T) {
	ctx := ctxFor(t, 3*time.Minute)
	raw, err := os.ReadFile(filepath.Join(repoRoot(), "manifests", "global", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crdRef := regexp.MustCompile(`apply -f (manifests/crds/\S+\.yaml)`).FindSubmatch(raw)
	if crdRef == nil {
		t.Fatal("manifests/global/rbac.yaml does not say which CRD to apply on the Karmada plane")
	}
	objs, err := decodeObjects(raw)
	if err != nil {
		t.Fatal(err)
	}
	strict := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	for _, d := range strings.Split(string(raw), "\n---\n") {
		if _, _, err := strict.Decode([]byte(d), nil, nil); err != nil {
			t.Fatalf("manifests/global/rbac.yaml: %v", err)
		}
	}
	crdRaw, err := os.ReadFile(filepath.Join(repoRoot(), string(crdRef[1])))
	if err != nil {
		t.Fatalf("the CRD manifests/global/rbac.yaml names: %v", err)
	}
	crd, err := decodeObjects(crdRaw)
	if err != nil {
		t.Fatal(err)
	}

	token := randomToken(t)
	tokens := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(tokens, []byte(token+",system:phalanx-global,system:phalanx-global\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := testcluster.Start(t, testcluster.Options{SkipCRDs: true, APIServerFlags: []string{
		"--authorization-mode=Node,RBAC", "--token-auth-file=" + tokens}})
	if err != nil {
		t.Fatal(err)
	}
	karmadaSystem := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": "karmada-system"}}}
	if err := applyObjects(ctx, c, slices.Concat([]*unstructured.Unstructured{karmadaSystem}, crd, objs)); err != nil {
		t.Fatal(err)
	}

	const ns, other = "karmada-system", "default"
	cases := []globalAccess{
		{verb: "get", group: "work.karmada.io", resource: "resourcebindings", namespace: "team-a", allowed: true},
		{verb: "list", group: "work.karmada.io", resource: "resourcebindings", allowed: true},
		{verb: "watch", group: "work.karmada.io", resource: "resourcebindings", allowed: true},
		{verb: "patch", group: "work.karmada.io", resource: "resourcebindings", namespace: "team-a", allowed: true},
		{verb: "patch", group: "work.karmada.io", resource: "resourcebindings", subresource: "status", namespace: "team-a", allowed: true},
		{verb: "list", group: "cluster.karmada.io", resource: "clusters", allowed: true},
		{verb: "watch", group: "cluster.karmada.io", resource: "clusters", allowed: true},
		{verb: "get", group: "cluster.karmada.io", resource: "clusters", name: "member-a", allowed: true},
		{verb: "list", group: "scheduling.phalanx.dev", resource: "queues", allowed: true},
		{verb: "watch", group: "scheduling.phalanx.dev", resource: "queues", allowed: true},
		{verb: "get", group: "scheduling.phalanx.dev", resource: "queues", name: "default", allowed: true},
		{verb: "list", resource: "namespaces", allowed: true},
		{verb: "watch", resource: "namespaces", allowed: true},
		{verb: "get", resource: "namespaces", name: "team-a", allowed: true},
		{verb: "list", resource: "services", namespace: ns, allowed: true},
		{verb: "watch", resource: "services", namespace: ns, allowed: true},
		{verb: "create", resource: "events", namespace: "team-a", allowed: true},
		{verb: "patch", group: "events.k8s.io", resource: "events", namespace: "team-a", allowed: true},
		{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: ns, allowed: true},
		{verb: "get", group: "coordination.k8s.io", resource: "leases", namespace: ns, name: "phalanx-global", allowed: true},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: ns, name: "phalanx-global", allowed: true},
		{verb: "get", group: "batch", resource: "jobs", namespace: "team-a", allowed: true},
		{verb: "get", group: "apps", resource: "deployments", namespace: "team-a", allowed: true},
		{verb: "get", group: "apps", resource: "statefulsets", namespace: "team-a", allowed: true},
		{verb: "get", group: "kubeflow.org", resource: "pytorchjobs", namespace: "team-a", allowed: true},
		{verb: "get", group: "kubeflow.org", resource: "mpijobs", namespace: "team-a", allowed: true},
		{verb: "get", group: "jobset.x-k8s.io", resource: "jobsets", namespace: "team-a", allowed: true},
		{verb: "get", group: "leaderworkerset.x-k8s.io", resource: "leaderworkersets", namespace: "team-a", allowed: true},
		{verb: "get", group: "ray.io", resource: "rayjobs", namespace: "team-a", allowed: true},
		{verb: "get", group: "ray.io", resource: "rayclusters", namespace: "team-a", allowed: true},
		{verb: "get", path: "/apis/work.karmada.io/v1alpha2", allowed: true},
		{verb: "get", path: "/api", allowed: true},
		// Beyond what it does.
		{verb: "delete", group: "work.karmada.io", resource: "resourcebindings", namespace: "team-a"},
		{verb: "update", group: "work.karmada.io", resource: "resourcebindings", namespace: "team-a"},
		{verb: "patch", group: "cluster.karmada.io", resource: "clusters", name: "member-a"},
		{verb: "update", group: "scheduling.phalanx.dev", resource: "queues", subresource: "status", name: "default"},
		{verb: "get", group: "work.karmada.io", resource: "works", namespace: "karmada-es-member-a"},
		{verb: "get", resource: "secrets", namespace: ns},
		{verb: "list", resource: "services", namespace: other},
		{verb: "get", resource: "services", namespace: ns, name: "karmada-scheduler-estimator-member-a"},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: ns, name: "karmada-scheduler"},
		{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: other},
		{verb: "list", group: "batch", resource: "jobs", namespace: "team-a"},
		{verb: "create", group: "apps", resource: "deployments", namespace: "team-a"},
	}
	// RBAC objects reach the authorizer through its informers: poll until
	// every answer is the expected one, or report the last full round.
	var wrong []string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var round []string
		for _, a := range cases {
			got, err := allowed(ctx, c.Client, a)
			if err != nil {
				return false, err
			}
			if got != a.allowed {
				round = append(round, describeAccess(a, got))
			}
		}
		wrong = round
		return len(wrong) == 0, nil
	})
	if err != nil {
		t.Fatalf("system:phalanx-global under manifests/global/rbac.yaml (%v):\n\t%s", err, strings.Join(wrong, "\n\t"))
	}

	// As the user itself: Queues are served on this plane and readable, and
	// the estimator Services are listable only in karmada-system.
	cfg := rest.AnonymousClientConfig(c.Config)
	cfg.BearerToken = token
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	queues := schema.GroupVersionResource{Group: "scheduling.phalanx.dev", Version: "v1alpha1", Resource: "queues"}
	if _, err := dyn.Resource(queues).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("system:phalanx-global lists Queues: %v", err)
	}
	user, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := user.CoreV1().Services(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("system:phalanx-global lists Services in %s: %v", ns, err)
	}
	if _, err := user.CoreV1().Services(other).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("system:phalanx-global lists Services in %s: %v, want Forbidden", other, err)
	}
}

func allowed(ctx context.Context, client kubernetes.Interface, a globalAccess) (bool, error) {
	spec := authorizationv1.SubjectAccessReviewSpec{User: "system:phalanx-global", Groups: []string{"system:authenticated"}}
	if a.path != "" {
		spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: a.path, Verb: a.verb}
	} else {
		spec.ResourceAttributes = &authorizationv1.ResourceAttributes{Verb: a.verb, Group: a.group, Resource: a.resource,
			Subresource: a.subresource, Namespace: a.namespace, Name: a.name}
	}
	r, err := client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return r.Status.Allowed, nil
}

func describeAccess(a globalAccess, got bool) string {
	what := a.path
	if what == "" {
		what = strings.TrimPrefix(a.group+"/", "/") + a.resource
		if a.subresource != "" {
			what += "/" + a.subresource
		}
		if a.namespace != "" {
			what += " in " + a.namespace
		}
		if a.name != "" {
			what += " named " + a.name
		}
	}
	verdict := map[bool]string{true: "allowed", false: "denied"}
	return a.verb + " " + what + ": " + verdict[got] + ", want " + verdict[a.allowed]
}
