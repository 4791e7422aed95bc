package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// Tests of the Helm chart itself: what it renders, what its values schema
// refuses, and that what it tells users (Chart.yaml, NOTES.txt, comments)
// matches docs/deploy.md and go.mod.

func chartDir() string { return filepath.Join(repoRoot(), "charts", "phalanx") }

// helmBin is the helm CLI: TestMain's, or on runs against an existing
// cluster (where TestMain builds nothing) PHALANX_HELM or bin/tools/helm.
func helmBin(t *testing.T) string {
	t.Helper()
	if bins.helm != "" {
		return bins.helm
	}
	h := envOr("PHALANX_HELM", filepath.Join(repoRoot(), "bin", "tools", "helm"))
	if _, err := os.Stat(h); err != nil {
		t.Skipf("no helm CLI (%v); hack/tools.sh builds it", err)
	}
	return h
}

// helmTemplate renders the chart as release phalanx in phalanx-system with
// extra helm args.
func helmTemplate(t *testing.T, extra ...string) []*unstructured.Unstructured {
	t.Helper()
	args := append([]string{"template", "phalanx", chartDir(), "-n", "phalanx-system"}, extra...)
	out, err := exec.Command(helmBin(t), args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, ee.Stderr)
		}
		t.Fatalf("helm: %v", err)
	}
	objs, err := decodeObjects(out)
	if err != nil {
		t.Fatalf("helm %s: %v", strings.Join(args, " "), err)
	}
	return objs
}

// scrapeJob is a Prometheus job as prometheus-operator labels a
// ServiceMonitor's targets: the namespace of the Service and its job name.
type scrapeJob struct{ namespace, job string }

// scrapedJobs lists the jobs the rendered ServiceMonitors make Prometheus
// scrape: every rendered Service a ServiceMonitor selects (namespace and
// labels) that has a port the ServiceMonitor names, with the job named by the
// Service's jobLabel label, or else by the Service.
func scrapedJobs(t *testing.T, objs []*unstructured.Unstructured) map[scrapeJob]bool {
	t.Helper()
	jobs := map[scrapeJob]bool{}
	for _, sm := range objs {
		if sm.GetKind() != "ServiceMonitor" {
			continue
		}
		namespaces := []string{sm.GetNamespace()}
		if names, found, _ := unstructured.NestedStringSlice(sm.Object, "spec", "namespaceSelector", "matchNames"); found {
			namespaces = names
		}
		match, _, err := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
		if err != nil {
			t.Fatalf("ServiceMonitor %s: %v", sm.GetName(), err)
		}
		jobLabel, _, _ := unstructured.NestedString(sm.Object, "spec", "jobLabel")
		endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		var ports []string
		for _, e := range endpoints {
			if p, ok := e.(map[string]any)["port"].(string); ok {
				ports = append(ports, p)
			}
		}
		for _, svc := range objs {
			if svc.GetKind() != "Service" || !slices.Contains(namespaces, svc.GetNamespace()) {
				continue
			}
			selected := true
			for k, v := range match {
				selected = selected && svc.GetLabels()[k] == v
			}
			svcPorts, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
			hasPort := false
			for _, p := range svcPorts {
				hasPort = hasPort || slices.Contains(ports, fmt.Sprint(p.(map[string]any)["name"]))
			}
			if !selected || !hasPort {
				continue
			}
			job := svc.GetName()
			if v := svc.GetLabels()[jobLabel]; jobLabel != "" && v != "" {
				job = v
			}
			jobs[scrapeJob{svc.GetNamespace(), job}] = true
		}
	}
	return jobs
}

var (
	upSelector = regexp.MustCompile(`\bup\s*\{([^}]*)\}`)
	matcher    = regexp.MustCompile(`(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
)

// TestChartAlertsOnScrapedJobs: every alert of the PrometheusRule that reads
// up{job=...} names a job the same render makes Prometheus scrape (a Service
// and a ServiceMonitor selecting it), in the namespace it names. Otherwise
// absent(up{...}) fires forever, as PhalanxSchedulerDown did in replace mode,
// which renders no scheduler Service.
func TestChartAlertsOnScrapedJobs(t *testing.T) {
	replace := []string{"-f", filepath.Join(chartDir(), "values-replace.yaml")}
	rule := []string{"--set", "metrics.prometheusRule.enabled=true"}
	monitor := []string{"--set", "metrics.serviceMonitor.enabled=true"}
	for _, tc := range []struct {
		name string
		args []string
		// wantUp: the alerts on up series this render must hold (so the
		// check is not vacuous where a target is scraped).
		wantUp []string
	}{
		{name: "replace", args: slices.Concat(replace, rule)},
		{name: "replace with ServiceMonitors", args: slices.Concat(replace, rule, monitor)},
		{name: "second-scheduler without ServiceMonitors", args: rule},
		{name: "second-scheduler without metrics Services", args: slices.Concat(rule, monitor, []string{"--set", "metrics.service.enabled=false"})},
		{name: "second-scheduler with ServiceMonitors", args: slices.Concat(rule, monitor), wantUp: []string{"PhalanxSchedulerDown"}},
		{name: "second-scheduler with ServiceMonitors, no controller", args: slices.Concat(rule, monitor, []string{"--set", "controller.enabled=false"}), wantUp: []string{"PhalanxSchedulerDown"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := helmTemplate(t, tc.args...)
			jobs := scrapedJobs(t, objs)
			var rules, upAlerts []string
			for _, o := range objs {
				if o.GetKind() != "PrometheusRule" {
					continue
				}
				groups, _, err := unstructured.NestedSlice(o.Object, "spec", "groups")
				if err != nil {
					t.Fatal(err)
				}
				for _, g := range groups {
					rs, _ := g.(map[string]any)["rules"].([]any)
					for _, r := range rs {
						r := r.(map[string]any)
						alert, _ := r["alert"].(string)
						expr := fmt.Sprint(r["expr"])
						rules = append(rules, alert)
						for _, sel := range upSelector.FindAllStringSubmatch(expr, -1) {
							upAlerts = append(upAlerts, alert)
							labels := map[string]string{}
							for _, m := range matcher.FindAllStringSubmatch(sel[1], -1) {
								if m[2] != "=" {
									t.Errorf("alert %s: up{%s}: only equality matchers name a job exactly", alert, sel[1])
								}
								labels[m[1]] = m[3]
							}
							job, ok := labels["job"]
							if !ok {
								t.Errorf("alert %s: up{%s} names no job", alert, sel[1])
								continue
							}
							ns := labels["namespace"]
							if ns == "" {
								ns = o.GetNamespace()
							}
							if !jobs[scrapeJob{ns, job}] {
								t.Errorf("alert %s reads up{%s}, but this render scrapes no job %q in namespace %s (scraped: %v): it would fire forever",
									alert, sel[1], job, ns, jobs)
							}
						}
					}
				}
			}
			if len(rules) == 0 {
				t.Fatalf("helm template %v rendered no PrometheusRule alerts", tc.args)
			}
			for _, want := range tc.wantUp {
				if !slices.Contains(upAlerts, want) {
					t.Errorf("alert %s is missing although its target is scraped (alerts: %v)", want, rules)
				}
			}
		})
	}
}

// TestChartValuesSchemaRefusesTypos: `helm install` with a misspelt key (top
// level of an object and nested) against an API server fails, names the key,
// and leaves nothing of the release in the cluster; the same command line
// without the typo passes the schema.
func TestChartValuesSchemaRefusesTypos(t *testing.T) {
	if os.Getenv("PHALANX_E2E_KUBECONFIG") != "" {
		t.Skip("needs an empty cluster of its own; covered by make test")
	}
	helm := helmBin(t)
	c, err := testcluster.Start(t, testcluster.Options{SkipCRDs: true})
	if err != nil {
		t.Fatal(err)
	}
	const ns = "phalanx-system"
	base := []string{"--set", "image.repository=registry.example.com/phalanx"}
	cases := []struct {
		name, typo, fixed, key, parent string
		values                         []string
	}{
		{name: "scheduler", typo: "scheduler.replcas=3", fixed: "scheduler.replicas=3", key: "replcas", parent: "/scheduler"},
		{name: "nested", typo: "metrics.serviceMonitor.enabeld=true", fixed: "metrics.serviceMonitor.enabled=true", key: "enabeld", parent: "/metrics/serviceMonitor"},
		{name: "top level", typo: "fullnameOverides=x", fixed: "fullnameOverride=x", key: "fullnameOverides", parent: ""},
		{name: "replace mode", typo: "replace.bindAdress=0.0.0.0", fixed: "replace.bindAddress=0.0.0.0", key: "bindAdress", parent: "/replace",
			values: []string{"-f", filepath.Join(chartDir(), "values-replace.yaml")}},
	}
	var valid [][]*unstructured.Unstructured
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := slices.Concat([]string{"install", "phalanx", chartDir(), "--kubeconfig", c.Kubeconfig,
				"-n", ns, "--create-namespace", "--timeout", "1m"}, base, tc.values, []string{"--set", tc.typo})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			out, err := exec.CommandContext(ctx, helm, args...).CombinedOutput()
			if err == nil {
				t.Fatalf("helm %s succeeded; want the schema to refuse %s:\n%s", strings.Join(args, " "), tc.key, out)
			}
			if !strings.Contains(string(out), "'"+tc.key+"'") || !strings.Contains(string(out), "'"+tc.parent+"'") {
				t.Errorf("helm %s: %v; want an error naming %q at %q:\n%s", strings.Join(args, " "), err, tc.key, tc.parent, out)
			}
			// The same command line without the typo passes the schema. (Not
			// helm install: the in-process API server reports the version
			// v0.0.0-master, which the chart's kubeVersion refuses.)
			valid = append(valid, helmTemplate(t, slices.Concat(base, tc.values, []string{"--set", tc.fixed})...))
		})
	}

	// Nothing of the release reached the cluster: no namespace, no release
	// record, none of the objects the valid command lines render.
	ctx := ctxFor(t, 2*time.Minute)
	if _, err := c.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s: %v; want NotFound after failed installs", ns, err)
	}
	secrets, err := c.Client.CoreV1().Secrets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		t.Errorf("helm release record %s/%s exists after failed installs", s.Namespace, s.Name)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Client.Discovery()))
	checked := 0
	for _, objs := range valid {
		for _, o := range objs {
			gvk := o.GroupVersionKind()
			mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if meta.IsNoMatchError(err) {
				continue // a kind the cluster does not serve (ServiceMonitor): no such object can exist
			}
			if err != nil {
				t.Fatalf("%s %s: %v", gvk.Kind, o.GetName(), err)
			}
			var getErr error
			if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
				_, getErr = c.Dynamic.Resource(mapping.Resource).Namespace(o.GetNamespace()).Get(ctx, o.GetName(), metav1.GetOptions{})
			} else {
				_, getErr = c.Dynamic.Resource(mapping.Resource).Get(ctx, o.GetName(), metav1.GetOptions{})
			}
			checked++
			if !apierrors.IsNotFound(getErr) {
				t.Errorf("%s %s: %v; want NotFound after failed installs", gvk.Kind, strings.TrimPrefix(o.GetNamespace()+"/"+o.GetName(), "/"), getErr)
			}
		}
	}
	if checked == 0 {
		t.Error("checked no objects: the valid renders were empty or not served")
	}
	t.Logf("%d objects of the valid renders checked absent", checked)
}

// TestChartDocSections: every docs/deploy.md section the chart names (NOTES.txt,
// templates, values files, README, Chart.yaml), as `docs/deploy.md, "Title"`,
// is a heading there.
func TestChartDocSections(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot(), "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	headings := map[string]bool{}
	for _, l := range strings.Split(string(raw), "\n") {
		if h, ok := strings.CutPrefix(l, "#"); ok {
			headings[strings.TrimSpace(strings.TrimLeft(h, "#"))] = true
		}
	}
	// "docs/deploy.md" then ",", ":" or " (" and a quoted title; comments
	// wrap, so line breaks and comment markers count as spaces.
	ref := regexp.MustCompile(`docs/deploy\.md[,:]?\s+\(?"([^"]+)"`)
	wrap := regexp.MustCompile(`\s*\n\s*(#\s*)?`)
	var files []string
	err = filepath.WalkDir(chartDir(), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "files" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	refs := map[string]int{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoRoot(), f)
		text := wrap.ReplaceAllString(string(b), " ")
		for _, m := range ref.FindAllStringSubmatch(text, -1) {
			refs[rel]++
			if !headings[m[1]] {
				t.Errorf("%s points to docs/deploy.md section %q, which has no such heading", rel, m[1])
			}
		}
	}
	if refs[filepath.Join("charts", "phalanx", "templates", "NOTES.txt")] == 0 {
		t.Errorf("found no docs/deploy.md section named in NOTES.txt (references: %v); the check would be vacuous", refs)
	}
}

// TestChartKubeVersion: Chart.yaml's kubeVersion admits exactly the minors
// from the one of k8s.io/kubernetes in go.mod on (a scheduler must not be
// newer than the API server), and docs/deploy.md states the same.
func TestChartKubeVersion(t *testing.T) {
	gomod, err := os.ReadFile(filepath.Join(repoRoot(), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*k8s\.io/kubernetes v1\.(\d+)\.`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("go.mod requires no k8s.io/kubernetes v1.x")
	}
	want := fmt.Sprintf(">=1.%s.0-0", m[1])
	raw, err := os.ReadFile(filepath.Join(chartDir(), "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		KubeVersion string `json:"kubeVersion"`
	}
	if err := yaml.Unmarshal(raw, &chart); err != nil {
		t.Fatal(err)
	}
	if chart.KubeVersion != want {
		t.Errorf("Chart.yaml kubeVersion %q; phalanx is kube-scheduler 1.%s, so want %q", chart.KubeVersion, m[1], want)
	}
	doc, err := os.ReadFile(filepath.Join(repoRoot(), "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`kubeVersion: "` + want + `"`, "kube-scheduler 1." + string(m[1])} {
		if !strings.Contains(string(doc), s) {
			t.Errorf("docs/deploy.md does not say %s", s)
		}
	}
}

// TestChartEstimator: with estimator.enabled the scheduler runs Karmada's
// estimator as docs/multicluster.md says: the flags, the mounted TLS and
// kubeconfig Secrets, the container port behind the Service, read access to
// PriorityClasses; a bad flag stops the binary at start, naming the flag.
func TestChartEstimator(t *testing.T) {
	objs := helmTemplate(t, "--set", "estimator.enabled=true", "--set", "estimator.clusterName=member-b",
		"--set", "estimator.tls.secretName=est-tls", "--set", "estimator.karmadaKubeconfigSecret=karmada-kc")
	var args []string
	var mounts, volumes, ports []any
	var svc *unstructured.Unstructured
	priorityClasses := false
	for _, o := range objs {
		switch {
		case o.GetKind() == "Deployment" && o.GetName() == "phalanx-scheduler":
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			c := containers[0].(map[string]any)
			cmd, _, _ := unstructured.NestedStringSlice(c, "command")
			args = cmd
			mounts, _, _ = unstructured.NestedSlice(c, "volumeMounts")
			ports, _, _ = unstructured.NestedSlice(c, "ports")
			volumes, _, _ = unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
		case o.GetKind() == "Service" && o.GetName() == "phalanx-estimator":
			svc = o
		case o.GetKind() == "ClusterRole" && o.GetName() == "phalanx-scheduler":
			rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
			for _, r := range rules {
				res, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "resources")
				priorityClasses = priorityClasses || slices.Contains(res, "priorityclasses")
			}
		}
	}
	for _, want := range []string{"--karmada-estimator-address=:10352", "--karmada-cluster-name=member-b",
		"--karmada-estimator-cert-file=/etc/phalanx/estimator-tls/tls.crt", "--karmada-estimator-key-file=/etc/phalanx/estimator-tls/tls.key",
		"--karmada-estimator-client-ca-file=/etc/phalanx/estimator-tls/ca.crt", "--karmada-kubeconfig=/etc/phalanx/karmada/kubeconfig"} {
		if !slices.Contains(args, want) {
			t.Errorf("scheduler command lacks %s: %v", want, args)
		}
	}
	text := fmt.Sprint(mounts, volumes, ports)
	for _, want := range []string{"/etc/phalanx/estimator-tls", "/etc/phalanx/karmada", "secretName:est-tls", "secretName:karmada-kc", "containerPort:10352", "name:estimator"} {
		if !strings.Contains(text, want) {
			t.Errorf("scheduler pod lacks %s: %s", want, text)
		}
	}
	if svc == nil {
		t.Fatal("no Service phalanx-estimator")
	}
	svcPorts, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	if p := fmt.Sprint(svcPorts); !strings.Contains(p, "port:10352") || !strings.Contains(p, "targetPort:estimator") {
		t.Errorf("Service phalanx-estimator ports %s, want 10352 to the container's estimator port", p)
	}
	if !priorityClasses {
		t.Error("the scheduler's ClusterRole does not read priorityclasses (an estimator call's priorityClassName)")
	}

	// Without the Secret's files, the binary stops at start naming the flag.
	if bins.scheduler == "" {
		return
	}
	var estArgs []string
	for _, a := range args {
		if strings.HasPrefix(a, "--karmada-") {
			estArgs = append(estArgs, a)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bins.scheduler, estArgs...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--karmada-estimator-cert-file") {
		t.Errorf("phalanx-scheduler without the TLS files: %v, want an exit naming --karmada-estimator-cert-file:\n%s", err, tail(string(out), 10))
	}
}
