package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"
	schedv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/yaml"
)

const manifestsDir = "../../manifests"

const (
	schedulerName      = "phalanx-scheduler"
	controllerName     = "phalanx-controller"
	configMapName      = "phalanx-scheduler-config"
	configKey          = "config.yaml"
	configDir          = "/etc/phalanx"
	queueSortPlugin    = "Coscheduling"
	defaultPrioSort    = "PrioritySort"
	securePort         = 10259
	controllerHealth   = 8081
	hostConfigDir      = "/etc/kubernetes/phalanx"
	schedulerKubeconf  = "/etc/kubernetes/scheduler.conf"
	kubeSchedulerLock  = "kube-scheduler"
	kubeSystem         = "kube-system"
	defaultProfileName = "default-scheduler"
)

// checkedIn reads the files under manifests/install and manifests/replace
// (rendered from the chart; hack/verify-manifests.sh checks they match it).
func checkedIn(t *testing.T) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	for _, dir := range []string{"install", "replace"} {
		ents, err := os.ReadDir(filepath.Join(manifestsDir, dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if !strings.HasSuffix(e.Name(), ".yaml") {
				continue
			}
			b, err := os.ReadFile(filepath.Join(manifestsDir, dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			files[dir+"/"+e.Name()] = b
		}
	}
	return files
}

// decodeAll strictly decodes every Kubernetes object of every file except
// the replace-mode scheduler config.
func decodeAll(t *testing.T, files map[string][]byte) map[string][]runtime.Object {
	t.Helper()
	dec := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	out := map[string][]runtime.Object{}
	for name, b := range files {
		if !bytes.HasPrefix(b, []byte(Header)) {
			t.Errorf("%s: missing header %q", name, Header)
		}
		if name == "replace/config.yaml" {
			continue
		}
		docs, err := documents(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, d := range docs {
			if len(bytes.TrimSpace(stripComments(d))) == 0 {
				continue
			}
			obj, _, err := dec.Decode(d, nil, nil)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			out[name] = append(out[name], obj)
		}
	}
	return out
}

func stripComments(b []byte) []byte {
	var out []byte
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			out = append(out, l+"\n"...)
		}
	}
	return out
}

func schedConfig(t *testing.T, what string, b []byte) *schedv1.KubeSchedulerConfiguration {
	t.Helper()
	var cfg schedv1.KubeSchedulerConfiguration
	if err := yaml.UnmarshalStrict(b, &cfg); err != nil {
		t.Fatalf("%s: not a KubeSchedulerConfiguration: %v", what, err)
	}
	if cfg.APIVersion != "kubescheduler.config.k8s.io/v1" || cfg.Kind != "KubeSchedulerConfiguration" {
		t.Fatalf("%s: apiVersion/kind %s/%s", what, cfg.APIVersion, cfg.Kind)
	}
	return &cfg
}

func findObj[T runtime.Object](objs []runtime.Object, name string) T {
	var zero T
	for _, o := range objs {
		if v, ok := o.(T); ok {
			if m, ok := any(v).(interface{ GetName() string }); ok && m.GetName() == name {
				return v
			}
		}
	}
	return zero
}

// grants reports whether rules allow verb on group's resource.
func grants(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
			return true
		}
	}
	return false
}

func pluginNames(ps []schedv1.Plugin) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

func argsOf(t *testing.T, p schedv1.KubeSchedulerProfile, plugin string) map[string]any {
	t.Helper()
	for _, pc := range p.PluginConfig {
		if pc.Name == plugin {
			var m map[string]any
			if err := json.Unmarshal(pc.Args.Raw, &m); err != nil {
				t.Fatalf("profile %s: %s args: %v", *p.SchedulerName, plugin, err)
			}
			return m
		}
	}
	return nil
}

func TestGeneratedManifests(t *testing.T) {
	files := checkedIn(t)
	objs := decodeAll(t, files)
	canonicalSrc, err := os.ReadFile(filepath.Join(manifestsDir, "scheduler-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	canonical := schedConfig(t, "canonical", canonicalSrc)

	// Second-scheduler mode: the ConfigMap holds the canonical config plus
	// leader election in phalanx-system.
	cm := findObj[*corev1.ConfigMap](objs["install/11-scheduler.yaml"], configMapName)
	if cm == nil {
		t.Fatalf("ConfigMap %s not generated", configMapName)
	}
	inst := schedConfig(t, "ConfigMap "+configMapName, []byte(cm.Data[configKey]))
	le := inst.LeaderElection
	if le.LeaderElect == nil || !*le.LeaderElect || le.ResourceNamespace != namespace || le.ResourceName != schedulerName {
		t.Errorf("install leaderElection = %+v", le)
	}
	withoutLE := *inst
	withoutLE.LeaderElection = canonical.LeaderElection
	if !reflect.DeepEqual(&withoutLE, canonical) {
		t.Errorf("install config differs from the canonical one beyond leaderElection")
	}

	dep := findObj[*appsv1.Deployment](objs["install/11-scheduler.yaml"], schedulerName)
	if dep == nil {
		t.Fatal("scheduler Deployment not generated")
	}
	ps := dep.Spec.Template.Spec
	if ps.ServiceAccountName != schedulerName || ps.Volumes[0].ConfigMap.Name != configMapName {
		t.Errorf("scheduler Deployment: serviceAccount %q, config volume %+v", ps.ServiceAccountName, ps.Volumes[0])
	}
	c := ps.Containers[0]
	if !slices.Contains(c.Command, "--config="+configDir+"/"+configKey) || c.Command[0] != "/phalanx-scheduler" {
		t.Errorf("scheduler command %v", c.Command)
	}
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
		if p == nil || p.HTTPGet.Port.IntValue() != securePort || p.HTTPGet.Scheme != corev1.URISchemeHTTPS {
			t.Errorf("scheduler probe %+v", p)
		}
	}
	sc := c.SecurityContext
	if !*sc.RunAsNonRoot || !*sc.ReadOnlyRootFilesystem || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("scheduler securityContext %+v", sc)
	}

	ctrl := findObj[*appsv1.Deployment](objs["install/20-controller.yaml"], controllerName)
	if ctrl == nil || ctrl.Spec.Template.Spec.Containers[0].LivenessProbe.HTTPGet.Port.IntValue() != controllerHealth {
		t.Errorf("controller Deployment %+v", ctrl)
	}

	// Every ServiceAccount a Deployment uses is bound.
	for sa, file := range map[string]string{schedulerName: "install/10-scheduler-rbac.yaml", controllerName: "install/20-controller.yaml"} {
		if findObj[*corev1.ServiceAccount](objs[file], sa) == nil || findObj[*rbacv1.ClusterRoleBinding](objs[file], sa) == nil {
			t.Errorf("%s: ServiceAccount or ClusterRoleBinding %s missing", file, sa)
		}
	}

	// The controller reads what DRA devices count in queues as.
	if cr := findObj[*rbacv1.ClusterRole](objs["install/20-controller.yaml"], controllerName); cr == nil {
		t.Errorf("controller ClusterRole %s missing", controllerName)
	} else {
		for _, res := range []string{"resourceclaims", "resourceslices", "deviceclasses"} {
			for _, verb := range []string{"get", "list", "watch"} {
				if !grants(cr.Rules, "resource.k8s.io", res, verb) {
					t.Errorf("controller ClusterRole lacks %s resource.k8s.io %s", verb, res)
				}
			}
		}
	}

	// Replace mode: both profiles, identical queueSort and queueSort args.
	rep := schedConfig(t, "replace/config.yaml", files["replace/config.yaml"])
	if len(rep.Profiles) != 2 || *rep.Profiles[0].SchedulerName != schedulerName || *rep.Profiles[1].SchedulerName != defaultProfileName {
		t.Fatalf("replace profiles %+v", rep.Profiles)
	}
	phx, def := rep.Profiles[0], rep.Profiles[1]
	if !reflect.DeepEqual(phx.Plugins.QueueSort, def.Plugins.QueueSort) {
		t.Errorf("queueSort differs: %+v vs %+v", phx.Plugins.QueueSort, def.Plugins.QueueSort)
	}
	if got := pluginNames(phx.Plugins.QueueSort.Enabled); !reflect.DeepEqual(got, []string{queueSortPlugin}) {
		t.Errorf("queueSort enabled %v", got)
	}
	if !slices.Contains(pluginNames(phx.Plugins.QueueSort.Disabled), defaultPrioSort) {
		t.Errorf("queueSort must disable %s", defaultPrioSort)
	}
	if a, b := argsOf(t, phx, queueSortPlugin), argsOf(t, def, queueSortPlugin); !reflect.DeepEqual(a, b) {
		t.Errorf("%s args differ between profiles: %v vs %v", queueSortPlugin, a, b)
	}
	if def.Plugins.MultiPoint.Enabled != nil || len(def.PluginConfig) != 1 {
		t.Errorf("default-scheduler profile must keep the stock plugins: %+v", def)
	}
	// The phalanx profile is the canonical one but for queueSort.enabled.
	canonProf := canonical.Profiles[0]
	phxCopy := *phx.DeepCopy()
	phxCopy.Plugins.QueueSort.Enabled = canonProf.Plugins.QueueSort.Enabled
	if !reflect.DeepEqual(phxCopy, canonProf) {
		t.Errorf("replace phalanx profile differs from the canonical one beyond queueSort.enabled")
	}
	if rep.ClientConnection.Kubeconfig != schedulerKubeconf || rep.ClientConnection.QPS != canonical.ClientConnection.QPS {
		t.Errorf("replace clientConnection %+v", rep.ClientConnection)
	}
	rle := rep.LeaderElection
	if rle.LeaderElect == nil || !*rle.LeaderElect || rle.ResourceNamespace != kubeSystem || rle.ResourceName != kubeSchedulerLock {
		t.Errorf("replace leaderElection %+v", rle)
	}

	pod := findObj[*corev1.Pod](objs["replace/kube-scheduler.yaml"], "kube-scheduler")
	if pod == nil || !pod.Spec.HostNetwork || pod.Namespace != kubeSystem {
		t.Fatalf("static pod %+v", pod)
	}
	for _, flag := range []string{
		"--config=" + hostConfigDir + "/" + configKey,
		"--kubeconfig=" + schedulerKubeconf,
		"--authentication-kubeconfig=" + schedulerKubeconf,
		"--authorization-kubeconfig=" + schedulerKubeconf,
	} {
		if !slices.Contains(pod.Spec.Containers[0].Command, flag) {
			t.Errorf("static pod lacks %s", flag)
		}
	}
	hostPaths := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		hostPaths[v.HostPath.Path] = true
	}
	if !hostPaths[hostConfigDir] || !hostPaths[schedulerKubeconf] {
		t.Errorf("static pod hostPaths %v", hostPaths)
	}
	if crb := findObj[*rbacv1.ClusterRoleBinding](objs["replace/rbac.yaml"], schedulerName+":system:kube-scheduler"); crb == nil ||
		crb.Subjects[0].Kind != "User" || crb.Subjects[0].Name != "system:kube-scheduler" {
		t.Errorf("replace RBAC binding %+v", crb)
	}
}

// TestImageIsWhatMakeImageBuilds: every container runs
// ghcr.io/phalanx-sched/phalanx:<appVersion>, the tag `make image` gives.
func TestImageIsWhatMakeImageBuilds(t *testing.T) {
	raw, err := os.ReadFile("../../charts/phalanx/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(raw, &chart); err != nil || chart.AppVersion == "" {
		t.Fatalf("Chart.yaml appVersion: %v", err)
	}
	want := "ghcr.io/phalanx-sched/phalanx:" + chart.AppVersion
	images := 0
	for name, objs := range decodeAll(t, checkedIn(t)) {
		for _, o := range objs {
			var spec *corev1.PodSpec
			switch v := o.(type) {
			case *appsv1.Deployment:
				spec = &v.Spec.Template.Spec
			case *corev1.Pod:
				spec = &v.Spec
			default:
				continue
			}
			for _, c := range spec.Containers {
				images++
				if c.Image != want {
					t.Errorf("%s: container %s runs %s, want %s", name, c.Name, c.Image, want)
				}
			}
		}
	}
	if images < 3 {
		t.Errorf("found %d containers, want the scheduler, the controller and the static pod", images)
	}
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mk), "IMAGE ?= ghcr.io/phalanx-sched/phalanx:$(APP_VERSION)") {
		t.Error("the Makefile's IMAGE is not ghcr.io/phalanx-sched/phalanx:$(APP_VERSION)")
	}
}

// TestGenerateSplits checks the split of helm output into files.
func TestGenerateSplits(t *testing.T) {
	doc := func(tmpl, body string) string { return "---\n# Source: phalanx/templates/" + tmpl + "\n" + body + "\n" }
	install := doc("namespace.yaml", "kind: Namespace") + doc("controller.yaml", "kind: Deployment") + doc("scheduler.yaml", "kind: ConfigMap")
	replace := doc("namespace.yaml", "kind: Namespace") + doc("controller.yaml", "kind: Deployment") + doc("scheduler-rbac.yaml", "kind: ClusterRole") +
		doc("replace.yaml", "kind: ConfigMap\ndata:\n  config.yaml: |\n    a: 1\n  kube-scheduler.yaml: |\n    kind: Pod\n")
	files, err := Generate([]byte(install), []byte(replace))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"install/00-namespace.yaml", "install/11-scheduler.yaml", "install/20-controller.yaml", "replace/config.yaml", "replace/kube-scheduler.yaml", "replace/rbac.yaml"}
	if got := sortedKeys(files); !reflect.DeepEqual(got, want) {
		t.Fatalf("files %v, want %v", got, want)
	}
	if string(files["replace/config.yaml"]) != Header+"a: 1\n" {
		t.Errorf("replace/config.yaml = %q", files["replace/config.yaml"])
	}
	if _, err := Generate([]byte(install+doc("new.yaml", "kind: X")), []byte(replace)); err == nil {
		t.Error("a template without a manifests/install file was accepted")
	}
}
