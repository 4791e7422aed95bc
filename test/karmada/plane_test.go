package karmada

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadaclientset "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	"github.com/karmada-io/karmada/pkg/resourceinterpreter/default/thirdparty"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/uuid"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorclientset "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/internal/estimator/estimatortest"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

const (
	// karmadaSystem is where karmada-scheduler looks up estimator Services
	// (--scheduler-estimator-service-namespace).
	karmadaSystem = "karmada-system"
	// estimatorPort is --scheduler-estimator-port: the Service port entry
	// karmada-scheduler reads the targetPort of.
	estimatorPort = 10352
	// namespace of the workloads, in the plane and in every member.
	namespace = "training"
)

// pytorchJobs is the resource template's kind as the plane serves it.
var pytorchJobs = schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "pytorchjobs"}

// pytorchJobCRD serves kubeflow.org/v1 PyTorchJob with no schema: the test
// needs the kind to exist (karmada-scheduler's APIEnablement filter, the
// estimator's template lookup), not training-operator's validation.
const pytorchJobCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: pytorchjobs.kubeflow.org
spec:
  group: kubeflow.org
  names:
    kind: PyTorchJob
    listKind: PyTorchJobList
    plural: pytorchjobs
    singular: pytorchjob
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`

// plane is the Karmada control plane: kube-apiserver + etcd in-process
// (testcluster) standing for karmada-apiserver, Karmada's CRDs, and
// karmada-aggregated-apiserver serving cluster.karmada.io behind an
// APIService.
type plane struct {
	*testcluster.Cluster
	karmada karmadaclientset.Interface
	dir     string
	logs    *logs
	tls     *estimatortest.TLS
	// scheduler is the running karmada-scheduler, if any.
	scheduler *proc
	restarts  int
}

func startPlane(t *testing.T, l *logs, tls *estimatortest.TLS) *plane {
	t.Helper()
	ctx := context.Background()
	c, err := testcluster.Start(t, testcluster.Options{SkipCRDs: true})
	if err != nil {
		t.Fatalf("starting the Karmada plane's API server: %v", err)
	}
	p := &plane{Cluster: c, dir: t.TempDir(), logs: l, tls: tls}
	if p.karmada, err = karmadaclientset.NewForConfig(c.CRDConfig); err != nil {
		t.Fatal(err)
	}

	docs := append(karmadaCRDs(t, "policy", "work"), []byte(pytorchJobCRD))
	if err := c.InstallCRDYAML(ctx, docs...); err != nil {
		t.Fatalf("installing Karmada's CRDs: %v", err)
	}
	for _, ns := range []string{karmadaSystem, namespace} {
		if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	p.startAggregatedAPIServer(t)
	return p
}

// karmadaCRDs reads Karmada's CRDs of the given groups (directories of
// charts/karmada/_crds/bases) as its chart installs them, without the
// conversion webhook patch (only v1alpha2, the storage version, is used).
func karmadaCRDs(t *testing.T, dirs ...string) [][]byte {
	t.Helper()
	var docs [][]byte
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(karmadaSrc, "charts", "karmada", "_crds", "bases", dir, "*.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("Karmada CRDs %s in %s: %v (found %d)", dir, karmadaSrc, err, len(files))
		}
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			docs = append(docs, raw)
		}
	}
	return docs
}

// startAggregatedAPIServer runs karmada-aggregated-apiserver on the
// plane's etcd (own prefix), registers it as the APIService of
// cluster.karmada.io/v1alpha1 behind an ExternalName Service to
// 127.0.0.1, and waits until the plane serves Clusters through it.
func (p *plane) startAggregatedAPIServer(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	etcd := p.APIServer.ServerOpts.Etcd.StorageConfig.Transport.ServerList
	addr, err := estimatortest.FreeAddress()
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(addr)
	portNum, _ := strconv.Atoi(port)
	server := startProc(t, p.logs, p.dir, "karmada-aggregated-apiserver", karmadaCmd("aggregated-apiserver"),
		"--kubeconfig="+p.Kubeconfig,
		"--authentication-kubeconfig="+p.Kubeconfig,
		"--authorization-kubeconfig="+p.Kubeconfig,
		"--etcd-servers="+strings.Join(etcd, ","),
		"--etcd-prefix=/karmada-aggregated-apiserver",
		"--bind-address=127.0.0.1",
		"--secure-port="+port,
		"--cert-dir="+filepath.Join(p.dir, "aggregated-apiserver-certs"),
		"--v=2")

	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "karmada-aggregated-apiserver", Namespace: karmadaSystem},
		Spec: v1.ServiceSpec{
			Type:         v1.ServiceTypeExternalName,
			ExternalName: "127.0.0.1",
			Ports:        []v1.ServicePort{{Name: "https", Port: int32(portNum), TargetPort: intstr.FromInt32(int32(portNum))}},
		},
	}
	if _, err := p.Client.CoreV1().Services(karmadaSystem).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	agg, err := aggregatorclientset.NewForConfig(p.Config)
	if err != nil {
		t.Fatal(err)
	}
	// The aggregator dials an ExternalName Service at externalName:port
	// (k8s.io/apiserver/pkg/util/proxy.ResolveCluster), port being the
	// APIService's. Its TLS server name is the Service's DNS name, which
	// the self-signed serving certificate does not carry: skip verify.
	apiService := &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1alpha1.cluster.karmada.io"},
		Spec: apiregistrationv1.APIServiceSpec{
			Group:                 clusterv1alpha1.GroupName,
			Version:               "v1alpha1",
			Service:               &apiregistrationv1.ServiceReference{Namespace: karmadaSystem, Name: svc.Name, Port: ptr.To(int32(portNum))},
			InsecureSkipTLSVerify: true,
			GroupPriorityMinimum:  2000,
			VersionPriority:       10,
		},
	}
	if _, err := agg.ApiregistrationV1().APIServices().Create(ctx, apiService, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var last string
	err = testcluster.Eventually(ctx, 90*time.Second, func(ctx context.Context) (bool, error) {
		if server.exited() {
			t.Fatalf("%s exited:\n%s", server, tail(server.log, 30))
		}
		got, err := agg.ApiregistrationV1().APIServices().Get(ctx, apiService.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiregistrationv1.Available {
				last = fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
				if c.Status != apiregistrationv1.ConditionTrue {
					return false, nil
				}
			}
		}
		_, err = p.karmada.ClusterV1alpha1().Clusters().List(ctx, metav1.ListOptions{})
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("the plane never served cluster.karmada.io/v1alpha1 through karmada-aggregated-apiserver (APIService Available: %s): %v", last, err)
	}
}

// registerCluster creates the member's Cluster (Push mode) and its status.
func (p *plane) registerCluster(t *testing.T, m *member) {
	t.Helper()
	ctx := context.Background()
	cl := &clusterv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: m.name},
		Spec:       clusterv1alpha1.ClusterSpec{SyncMode: clusterv1alpha1.Push, APIEndpoint: m.Config.Host},
	}
	if _, err := p.karmada.ClusterV1alpha1().Clusters().Create(ctx, cl, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Cluster %s: %v", m.name, err)
	}
	if err := p.syncClusterStatus(ctx, m); err != nil {
		t.Fatal(err)
	}
}

// syncClusterStatus does what karmada-controller-manager's cluster status
// controller does (it is not run here): Ready, the member's API
// enablements from its discovery, and the resource summary that Karmada's
// general estimator divides (allocatable of the nodes, requests of the
// pods bound and pending).
func (p *plane) syncClusterStatus(ctx context.Context, m *member) error {
	_, lists, err := m.Client.Discovery().ServerGroupsAndResources()
	if err != nil {
		return fmt.Errorf("discovery of %s: %w", m.name, err)
	}
	var enablements []clusterv1alpha1.APIEnablement
	for _, l := range lists {
		e := clusterv1alpha1.APIEnablement{GroupVersion: l.GroupVersion}
		for _, r := range l.APIResources {
			if !strings.Contains(r.Name, "/") {
				e.Resources = append(e.Resources, clusterv1alpha1.APIResource{Name: r.Name, Kind: r.Kind})
			}
		}
		enablements = append(enablements, e)
	}
	sort.Slice(enablements, func(i, j int) bool { return enablements[i].GroupVersion < enablements[j].GroupVersion })

	nodes, err := m.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	pods, err := m.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	summary := &clusterv1alpha1.ResourceSummary{Allocatable: v1.ResourceList{}, Allocated: v1.ResourceList{}, Allocating: v1.ResourceList{}}
	for _, n := range nodes.Items {
		addTo(summary.Allocatable, n.Status.Allocatable)
	}
	for _, pod := range pods.Items {
		if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
			continue
		}
		into := summary.Allocated
		if pod.Spec.NodeName == "" {
			into = summary.Allocating
		}
		req := v1.ResourceList{v1.ResourcePods: *resourceOne()}
		for _, c := range pod.Spec.Containers {
			addTo(req, c.Resources.Requests)
		}
		addTo(into, req)
	}

	cl, err := p.karmada.ClusterV1alpha1().Clusters().Get(ctx, m.name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	cl.Status.KubernetesVersion = "v1.37.2"
	cl.Status.APIEnablements = enablements
	cl.Status.ResourceSummary = summary
	now := metav1.Now()
	meta.SetStatusCondition(&cl.Status.Conditions, metav1.Condition{Type: clusterv1alpha1.ClusterConditionReady, Status: metav1.ConditionTrue,
		Reason: "ClusterReady", Message: "cluster is healthy and ready to accept workloads", LastTransitionTime: now})
	meta.SetStatusCondition(&cl.Status.Conditions, metav1.Condition{Type: clusterv1alpha1.ClusterConditionCompleteAPIEnablements, Status: metav1.ConditionTrue,
		Reason: "Complete", Message: "collected complete APIs from member cluster", LastTransitionTime: now})
	if _, err := p.karmada.ClusterV1alpha1().Clusters().UpdateStatus(ctx, cl, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("status of Cluster %s: %w", m.name, err)
	}
	return nil
}

// pointEstimator makes karmada-system/karmada-scheduler-estimator-<cluster>
// an ExternalName Service to 127.0.0.1 whose port 10352 targets port.
func (p *plane) pointEstimator(ctx context.Context, cluster string, port int) error {
	name := "karmada-scheduler-estimator-" + cluster
	want := v1.ServiceSpec{
		Type:         v1.ServiceTypeExternalName,
		ExternalName: "127.0.0.1",
		Ports:        []v1.ServicePort{{Name: "grpc", Port: estimatorPort, TargetPort: intstr.FromInt32(int32(port))}},
	}
	svc, err := p.Client.CoreV1().Services(karmadaSystem).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = p.Client.CoreV1().Services(karmadaSystem).Create(ctx, &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: karmadaSystem}, Spec: want}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	svc.Spec = want
	_, err = p.Client.CoreV1().Services(karmadaSystem).Update(ctx, svc, metav1.UpdateOptions{})
	return err
}

// startScheduler (re)starts karmada-scheduler with the accurate estimator
// on (TLS with a client certificate), the multi-template path and
// overcommit protection. A restart is how the estimators are switched:
// karmada-scheduler caches one connection per cluster for its lifetime.
func (p *plane) startScheduler(t *testing.T) {
	t.Helper()
	if p.scheduler != nil {
		p.scheduler.stop()
	}
	p.restarts++
	p.scheduler = startProc(t, p.logs, p.dir, fmt.Sprintf("karmada-scheduler-%d", p.restarts), karmadaCmd("scheduler"),
		"--kubeconfig="+p.Kubeconfig,
		"--leader-elect=false",
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
		"--enable-scheduler-estimator=true",
		"--scheduler-estimator-ca-file="+p.tls.CA,
		"--scheduler-estimator-cert-file="+p.tls.ClientCert,
		"--scheduler-estimator-key-file="+p.tls.ClientKey,
		"--feature-gates=MultiplePodTemplatesScheduling=true,SchedulingOvercommitProtection=true",
		"--v=4")
}

// pytorchJob is a PyTorchJob: one CPU-only master and workers of
// gpusPerWorker GPUs, whose pod templates require one topology level.
func pytorchJob(name string, workers int64, gpusPerWorker int64, level string) *unstructured.Unstructured {
	template := func(res map[string]any) map[string]any {
		return map[string]any{
			"metadata": map[string]any{"annotations": map[string]any{topologyRequired: level}},
			"spec": map[string]any{"containers": []any{map[string]any{
				"name": "pytorch", "image": "registry.k8s.io/pause:3.10",
				"resources": map[string]any{"requests": res, "limits": res},
			}}},
		}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubeflow.org/v1",
		"kind":       "PyTorchJob",
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"spec": map[string]any{"pytorchReplicaSpecs": map[string]any{
			"Master": map[string]any{"replicas": int64(1), "template": template(map[string]any{"cpu": "1", "memory": "1Gi"})},
			"Worker": map[string]any{"replicas": workers, "template": template(map[string]any{
				"cpu": "1", "memory": "1Gi", string(testcluster.GPU): strconv.FormatInt(gpusPerWorker, 10)})},
		}},
	}}
}

// interpreter is Karmada's built-in third-party interpreter: its
// PyTorchJob GetComponents is what karmada-controller-manager's detector
// writes to a binding's spec.components.
var interpreter = thirdparty.NewConfigurableInterpreter()

// submit creates the resource template in the plane and the
// ResourceBinding that karmada-controller-manager's detector would create
// for it under a PropagationPolicy (the detector is not run here): named
// <name>-pytorchjob, components from Karmada's interpreter, placed on
// exactly one of clusters (nil: any) whole.
func (p *plane) submit(t *testing.T, job *unstructured.Unstructured, clusters []string) *workv1alpha2.ResourceBinding {
	t.Helper()
	ctx := context.Background()
	tmpl, err := p.Dynamic.Resource(pytorchJobs).Namespace(namespace).Create(ctx, job, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating PyTorchJob %s: %v", job.GetName(), err)
	}
	components, enabled, err := interpreter.GetComponents(tmpl)
	if err != nil || !enabled || len(components) != 2 {
		t.Fatalf("Karmada's PyTorchJob interpreter: components %+v, enabled %v, err %v", components, enabled, err)
	}
	placement := &policyv1alpha1.Placement{
		SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: 1, MaxGroups: 1}},
		// Divided: with Duplicated (or none) the spread selection ignores
		// the estimators' answers.
		ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
			ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
			ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceAggregated,
		},
	}
	if clusters != nil {
		placement.ClusterAffinity = &policyv1alpha1.ClusterAffinity{ClusterNames: clusters}
	}
	rb := &workv1alpha2.ResourceBinding{
		ObjectMeta: metav1.ObjectMeta{
			Name:      bindingName(tmpl.GetName()),
			Namespace: namespace,
			Labels:    map[string]string{policyv1alpha1.PropagationPolicyPermanentIDLabel: string(uuid.NewUUID())},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: tmpl.GetAPIVersion(), Kind: tmpl.GetKind(), Name: tmpl.GetName(),
				UID: tmpl.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Spec: workv1alpha2.ResourceBindingSpec{
			Resource: workv1alpha2.ObjectReference{APIVersion: tmpl.GetAPIVersion(), Kind: tmpl.GetKind(), Namespace: namespace,
				Name: tmpl.GetName(), UID: tmpl.GetUID(), ResourceVersion: tmpl.GetResourceVersion()},
			Components:    components,
			Placement:     placement,
			SchedulerName: "default-scheduler",
		},
	}
	out, err := p.karmada.WorkV1alpha2().ResourceBindings(namespace).Create(ctx, rb, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating ResourceBinding %s: %v", rb.Name, err)
	}
	return out
}

func bindingName(job string) string { return job + "-pytorchjob" }

// withdraw deletes a job's binding and template from the plane.
func (p *plane) withdraw(t *testing.T, job string) {
	t.Helper()
	ctx := context.Background()
	if err := p.karmada.WorkV1alpha2().ResourceBindings(namespace).Delete(ctx, bindingName(job), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if err := p.Dynamic.Resource(pytorchJobs).Namespace(namespace).Delete(ctx, job, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	err := testcluster.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		_, err := p.karmada.WorkV1alpha2().ResourceBindings(namespace).Get(ctx, bindingName(job), metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("binding of %s not gone: %v", job, err)
	}
}

// decision waits until karmada-scheduler has decided a job's binding
// (condition Scheduled, True or False) and returns the binding.
func (p *plane) decision(t *testing.T, job string, timeout time.Duration) *workv1alpha2.ResourceBinding {
	t.Helper()
	var rb *workv1alpha2.ResourceBinding
	err := testcluster.Eventually(context.Background(), timeout, func(ctx context.Context) (bool, error) {
		if p.scheduler.exited() {
			t.Fatalf("%s exited:\n%s", p.scheduler, tail(p.scheduler.log, 30))
		}
		var err error
		rb, err = p.karmada.WorkV1alpha2().ResourceBindings(namespace).Get(ctx, bindingName(job), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return meta.FindStatusCondition(rb.Status.Conditions, workv1alpha2.Scheduled) != nil, nil
	})
	if err != nil {
		t.Fatalf("karmada-scheduler never decided binding %s within %v (last: %+v): %v", bindingName(job), timeout, rb, err)
	}
	return rb
}

// scheduledTo waits for a successful decision and returns its clusters.
func (p *plane) scheduledTo(t *testing.T, job string, timeout time.Duration) []string {
	t.Helper()
	rb := p.decision(t, job, timeout)
	cond := meta.FindStatusCondition(rb.Status.Conditions, workv1alpha2.Scheduled)
	if cond.Status != metav1.ConditionTrue {
		t.Fatalf("binding %s not scheduled: %s %s: %s", rb.Name, cond.Status, cond.Reason, cond.Message)
	}
	return targetNames(rb)
}

func targetNames(rb *workv1alpha2.ResourceBinding) []string {
	var out []string
	for _, tc := range rb.Spec.Clusters {
		out = append(out, tc.Name)
	}
	return out
}
