package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// startLocal brings up one mode on an in-process control plane that enforces
// RBAC, installs the chart and runs the components as their pod specs say.
func startLocal(t *testing.T, mode string) *Env {
	t.Helper()
	if err := testcluster.BwrapAvailable(); err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 10*time.Minute)
	dir := t.TempDir()
	const ns = "phalanx-system"

	// The identity of kubeadm's /etc/kubernetes/scheduler.conf (a client
	// certificate there, a token here): user system:kube-scheduler, which the
	// API server's bootstrap RBAC binds to system:kube-scheduler.
	schedToken := randomToken(t)
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(schedToken+",system:kube-scheduler,system:kube-scheduler\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := testcluster.Start(t, testcluster.Options{SkipCRDs: true, APIServerFlags: []string{
		"--authorization-mode=Node,RBAC",
		"--token-auth-file=" + tokens,
	}})
	if err != nil {
		t.Fatalf("starting control plane: %v", err)
	}

	// helm template + apply: what `helm install` creates.
	args := []string{"template", "phalanx", filepath.Join(repoRoot(), "charts", "phalanx"), "--namespace", ns, "--set", "namespace.create=true"}
	if mode == modeReplace {
		args = append(args, "-f", filepath.Join(repoRoot(), "charts", "phalanx", "values-replace.yaml"))
	}
	rendered, err := exec.Command(bins.helm, args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("helm %v: %v\n%s", args, err, ee.Stderr)
		}
		t.Fatalf("helm: %v", err)
	}
	objs, err := decodeObjects(rendered)
	if err != nil {
		t.Fatalf("rendered chart: %v", err)
	}
	if err := applyObjects(ctx, c, objs); err != nil {
		t.Fatalf("applying the rendered chart: %v", err)
	}

	if err := c.StartKwokFor(fakeNodeAnnotation + "=fake"); err != nil {
		t.Fatal(err)
	}
	// kube-controller-manager's StatefulSet controller, as a real cluster
	// runs it (the ordered-startup scenario).
	if err := c.StartStatefulSetController(); err != nil {
		t.Fatal(err)
	}
	// Its ClusterRole aggregation: the namespace's view role gains the
	// chart's phalanx-namespace-viewer rules (the kubectl plugin scenario).
	if err := c.StartClusterRoleAggregation(); err != nil {
		t.Fatal(err)
	}
	// Its Job controller: the kubectl plugin scenario's running gang is a
	// Job's.
	if err := c.StartJobController(); err != nil {
		t.Fatal(err)
	}

	env := &Env{Cluster: c, Mode: mode, Namespace: ns}
	var procs []*testcluster.PodProcess

	// The controller, from its Deployment.
	ctrlDep := findDeployment(t, objs, "phalanx-controller")
	metricsPort, healthPort := freePort(t), freePort(t)
	ctrl, err := c.RunPod(ctx, testcluster.PodRun{
		Name: "phalanx-controller-0", Namespace: ns, Spec: ctrlDep.Spec.Template.Spec,
		Images: map[string]string{"/phalanx-controller": bins.controller},
		Ports:  map[int32]int{8080: metricsPort, 8081: healthPort},
		ExtraArgs: []string{
			"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(metricsPort),
			"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(healthPort),
		},
	})
	if err != nil {
		t.Fatalf("phalanx-controller: %v", err)
	}
	procs = append(procs, ctrl)

	// The scheduler: every replica of the Deployment (leader election picks
	// one), or the static pod.
	run := testcluster.PodRun{
		Namespace: ns,
		Images:    map[string]string{"/phalanx-scheduler": bins.scheduler},
	}
	replicas := 1
	switch mode {
	case modeSecond:
		dep := findDeployment(t, objs, "phalanx-scheduler")
		run.Spec = dep.Spec.Template.Spec
		if dep.Spec.Replicas != nil {
			replicas = int(*dep.Spec.Replicas)
		}
		run.ConfigMaps = map[string]map[string]string{}
		for _, v := range run.Spec.Volumes {
			if v.ConfigMap != nil {
				cm, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				run.ConfigMaps[cm.Name] = cm.Data
			}
		}
		// Stock kube-scheduler beside it, as on a kubeadm control plane.
		startStockScheduler(t, c, dir, schedToken)
	case modeReplace:
		// What the user copies from the ConfigMap to each control-plane node.
		cm, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, "phalanx-replace", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var pod corev1.Pod
		if err := yaml.UnmarshalStrict([]byte(cm.Data["kube-scheduler.yaml"]), &pod); err != nil {
			t.Fatalf("kube-scheduler.yaml: %v", err)
		}
		hostConfig := filepath.Join(dir, "etc-kubernetes-phalanx")
		if err := os.MkdirAll(hostConfig, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(hostConfig, "config.yaml"), []byte(cm.Data["config.yaml"]), 0o644); err != nil {
			t.Fatal(err)
		}
		schedConf := filepath.Join(dir, "scheduler.conf")
		if err := c.WriteTokenKubeconfig(schedConf, schedToken); err != nil {
			t.Fatal(err)
		}
		run.Namespace, run.Spec = pod.Namespace, pod.Spec
		run.HostPaths = map[string]string{"/etc/kubernetes/phalanx": hostConfig, "/etc/kubernetes/scheduler.conf": schedConf}
	}
	schedulers := map[string]*testcluster.PodProcess{}
	for i := 0; i < replicas; i++ {
		r := run
		r.Name = fmt.Sprintf("phalanx-scheduler-%d", i)
		if mode == modeReplace {
			r.Name = "kube-scheduler-e2e"
		}
		port := freePort(t)
		r.Ports = map[int32]int{10259: port}
		r.ExtraArgs = []string{"--secure-port=" + strconv.Itoa(port)}
		sched, err := c.RunPod(ctx, r)
		if err != nil {
			t.Fatalf("phalanx-scheduler (%s mode): %v", mode, err)
		}
		schedulers[sched.Name] = sched
		procs = append(procs, sched)
	}

	leaseNS, leaseName := ns, "phalanx-scheduler"
	if mode == modeReplace {
		leaseNS, leaseName = "kube-system", "kube-scheduler"
	}
	// Metrics come from the leader: only it schedules.
	env.metricsURL = func(ctx context.Context) (string, func(), error) {
		lease, err := c.Client.CoordinationV1().Leases(leaseNS).Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			return "", nil, err
		}
		if lease.Spec.HolderIdentity == nil {
			return "", nil, fmt.Errorf("lease %s/%s has no holder", leaseNS, leaseName)
		}
		sched, ok := schedulers[podName(*lease.Spec.HolderIdentity)]
		if !ok {
			return "", nil, fmt.Errorf("lease %s/%s is held by %s, not by a phalanx replica", leaseNS, leaseName, *lease.Spec.HolderIdentity)
		}
		return "https://" + sched.Addr[10259], func() {}, nil
	}
	env.isPhalanxLeader = func(_ context.Context, holder string) (bool, error) {
		_, ok := schedulers[podName(holder)]
		return ok, nil
	}
	env.logs = func(context.Context) (map[string]string, error) {
		out := map[string]string{}
		for _, p := range procs {
			b, err := os.ReadFile(p.Log)
			if err != nil {
				return nil, err
			}
			out[p.Name] = string(b)
		}
		return out, nil
	}
	return env
}

// startStockScheduler runs kube-scheduler from the k8s.io/kubernetes module
// with kubeadm's flags, as user system:kube-scheduler.
func startStockScheduler(t *testing.T, c *testcluster.Cluster, dir, token string) {
	t.Helper()
	kubeconfig := filepath.Join(dir, "stock-scheduler.conf")
	if err := c.WriteTokenKubeconfig(kubeconfig, token); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "kube-scheduler.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bins.kubeScheduler,
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig,
		"--authorization-kubeconfig="+kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(freePort(t)),
		"--leader-elect=true",
		"--v=1")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); log.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
}

func findDeployment(t *testing.T, objs []*unstructured.Unstructured, name string) *appsv1.Deployment {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == "Deployment" && o.GetName() == name {
			var d appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
				t.Fatal(err)
			}
			return &d
		}
	}
	t.Fatalf("the rendered chart has no Deployment %s", name)
	return nil
}

// decodeObjects splits helm template output into objects.
func decodeObjects(b []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// applyObjects creates the objects like `kubectl apply` of a fresh install:
// CRDs first (and waits until they are served), then namespaces, then the
// rest.
func applyObjects(ctx context.Context, c *testcluster.Cluster, objs []*unstructured.Unstructured) error {
	var crds, namespaces, rest []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "CustomResourceDefinition":
			crds = append(crds, o)
		case "Namespace":
			namespaces = append(namespaces, o)
		default:
			rest = append(rest, o)
		}
	}
	for _, o := range crds {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &crd); err != nil {
			return err
		}
		if err := applyCRD(ctx, c, &crd); err != nil {
			return err
		}
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Client.Discovery()))
	for _, group := range [][]*unstructured.Unstructured{namespaces, rest} {
		for _, o := range group {
			mapping, err := mapper.RESTMapping(o.GroupVersionKind().GroupKind(), o.GroupVersionKind().Version)
			if err != nil {
				return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
			}
			var ri interface {
				Create(context.Context, *unstructured.Unstructured, metav1.CreateOptions, ...string) (*unstructured.Unstructured, error)
			}
			if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
				ri = c.Dynamic.Resource(mapping.Resource).Namespace(o.GetNamespace())
			} else {
				ri = c.Dynamic.Resource(mapping.Resource)
			}
			if _, err := ri.Create(ctx, o, metav1.CreateOptions{FieldManager: "e2e"}); err != nil {
				return fmt.Errorf("%s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
			}
		}
	}
	return nil
}

// applyCRD creates or replaces a CRD and waits until its versions are served.
func applyCRD(ctx context.Context, c *testcluster.Cluster, crd *apiextensionsv1.CustomResourceDefinition) error {
	client, err := apiextensionsClient(c)
	if err != nil {
		return err
	}
	crds := client.ApiextensionsV1().CustomResourceDefinitions()
	old, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("CRD %s: %w", crd.Name, err)
		}
	case err != nil:
		return err
	default:
		crd.ResourceVersion = old.ResourceVersion
		if _, err := crds.Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("CRD %s: %w", crd.Name, err)
		}
	}
	return testcluster.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		got, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		established := false
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				established = true
			}
		}
		if !established {
			return false, nil
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			rl, err := c.Client.Discovery().ServerResourcesForGroupVersion(crd.Spec.Group + "/" + v.Name)
			if err != nil {
				return false, nil
			}
			found := false
			for _, r := range rl.APIResources {
				found = found || r.Name == crd.Spec.Names.Plural
			}
			if !found {
				return false, nil
			}
		}
		return true, nil
	})
}

func randomToken(t *testing.T) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
