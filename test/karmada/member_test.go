package karmada

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/estimator/estimatortest"
	"github.com/phalanx-sched/phalanx/internal/estimator/karmadapb"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
	"github.com/phalanx-sched/phalanx/manifests"
)

const (
	// ibLabel puts a node in an InfiniBand domain; the NetworkTopology
	// "default" of every member names it level ibLevel.
	ibLabel          = "network.example.com/ib-cluster"
	ibLevel          = "ib-cluster"
	topologyRequired = phalanxv1alpha1.TopologyRequiredAnnotation
)

// member is a member cluster: an in-process API server with nodes, its
// phalanx-scheduler binary (scheduling and serving the estimator, TLS with
// client certificates required) and Karmada's own karmada-scheduler-
// estimator binary on the same API server.
type member struct {
	name string
	*testcluster.Cluster
	phalanx         *testcluster.Scheduler
	phalanxPort     int
	karmadaEstPort  int
	karmadaEstimate *proc
}

// ibNodes are GPU nodes (32 CPUs, 4 GPUs) in IB domains: domain -> count.
func ibNodes(prefix string, domains map[string]int) []testcluster.NodeSpec {
	var out []testcluster.NodeSpec
	for _, d := range sortedKeys(domains) {
		for i := range domains[d] {
			out = append(out, testcluster.NodeSpec{Name: fmt.Sprintf("%s-%s-n%d", prefix, d, i), CPU: "32", Memory: "128Gi", GPUs: 4,
				Labels: map[string]string{ibLabel: d}, NRTPolicy: "none"})
		}
	}
	return out
}

func startMember(t *testing.T, p *plane, name string, nodes []testcluster.NodeSpec) *member {
	t.Helper()
	m := startMemberScheduler(t, p, name, nodes)
	m.karmadaEstPort = freePort(t)
	m.karmadaEstimate = startProc(t, p.logs, p.dir, "karmada-scheduler-estimator-"+name, karmadaCmd("scheduler-estimator"),
		"--kubeconfig="+m.Kubeconfig,
		"--cluster-name="+name,
		"--server-port="+strconv.Itoa(m.karmadaEstPort),
		"--grpc-auth-cert-file="+p.tls.ServerCert,
		"--grpc-auth-key-file="+p.tls.ServerKey,
		"--grpc-client-ca-file="+p.tls.CA,
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
		"--v=2")
	return m
}

// startMemberScheduler starts a member's API server, nodes, NetworkTopology,
// PyTorchJob CRD, workload namespace and phalanx-scheduler (no Karmada
// estimator).
func startMemberScheduler(t *testing.T, p *plane, name string, nodes []testcluster.NodeSpec) *member {
	t.Helper()
	ctx := context.Background()
	c, err := testcluster.Start(t, testcluster.Options{})
	if err != nil {
		t.Fatalf("starting member %s: %v", name, err)
	}
	m := &member{name: name, Cluster: c}
	if err := c.CreateNodes(ctx, nodes...); err != nil {
		t.Fatal(err)
	}
	nt := &phalanxv1alpha1.NetworkTopology{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: phalanxv1alpha1.NetworkTopologySpec{Levels: []phalanxv1alpha1.TopologyLevel{
			{Name: ibLevel, NodeLabel: ibLabel},
			{Name: "host", NodeLabel: v1.LabelHostname},
		}},
	}
	if _, err := c.Phalanx.SchedulingV1alpha1().NetworkTopologies().Create(ctx, nt, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The member serves the workload's kind, as one running
	// training-operator would (Cluster status lists it).
	if err := c.InstallCRDYAML(ctx, []byte(pytorchJobCRD)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	m.phalanxPort = freePort(t)
	m.phalanx, err = c.StartSchedulerBinary(phalanxBin, manifests.SchedulerConfig,
		"--karmada-estimator-address="+hostPort(m.phalanxPort),
		"--karmada-cluster-name="+name,
		"--karmada-kubeconfig="+p.Kubeconfig,
		"--karmada-estimator-cert-file="+p.tls.ServerCert,
		"--karmada-estimator-key-file="+p.tls.ServerKey,
		"--karmada-estimator-client-ca-file="+p.tls.CA,
		"--v=3")
	if err != nil {
		t.Fatalf("starting phalanx-scheduler of %s: %v", name, err)
	}
	p.logs.add("phalanx-scheduler-"+name, m.phalanx.Log)
	return m
}

// waitEstimators waits until the estimators of the member (phalanx's, and
// Karmada's if it runs one) answer a one-CPU question over TLS with the
// client certificate.
func (m *member) waitEstimators(t *testing.T, tls *estimatortest.TLS) {
	t.Helper()
	ports := []int{m.phalanxPort}
	if m.karmadaEstimate != nil {
		ports = append(ports, m.karmadaEstPort)
	}
	for _, port := range ports {
		client, conn, err := estimatortest.Dial(hostPort(port), tls, true)
		if err != nil {
			t.Fatal(err)
		}
		req := &karmadapb.MaxAvailableComponentSetsRequest{Cluster: m.name, Namespace: namespace, Components: []*karmadapb.Component{
			estimatortest.Component("probe", 1, v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}, nil)}}
		var sets int32
		err = testcluster.Eventually(context.Background(), 60*time.Second, func(ctx context.Context) (bool, error) {
			if port == m.karmadaEstPort && m.karmadaEstimate.exited() {
				t.Fatalf("%s exited:\n%s", m.karmadaEstimate, tail(m.karmadaEstimate.log, 30))
			}
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			resp, err := client.MaxAvailableComponentSets(ctx, req)
			if err != nil {
				return false, err
			}
			sets = resp.GetMaxSets()
			// Both count the nodes' CPUs once their informers synced.
			return sets > 0, nil
		})
		conn.Close()
		if err != nil {
			t.Fatalf("estimator of %s on port %d never answered (last maxSets %d): %v", m.name, port, sets, err)
		}
	}
}

// run does in the member what the PyTorchJob's propagation and
// training-operator would: a PodGroup (minMember = all replicas) and the
// pods of every replica spec, with the pod templates' annotations and
// requests, scheduled by phalanx-scheduler. It returns the pods' count.
func (m *member) run(t *testing.T, job *unstructured.Unstructured) int {
	t.Helper()
	ctx := context.Background()
	specs, _, _ := unstructured.NestedMap(job.Object, "spec", "pytorchReplicaSpecs")
	var pods []testcluster.PodSpec
	for _, role := range sortedKeys(specs) {
		spec := specs[role].(map[string]any)
		replicas, _, _ := unstructured.NestedInt64(spec, "replicas")
		annotations, _, _ := unstructured.NestedStringMap(spec, "template", "metadata", "annotations")
		containers, _, _ := unstructured.NestedSlice(spec, "template", "spec", "containers")
		requests, _, _ := unstructured.NestedStringMap(containers[0].(map[string]any), "resources", "requests")
		gpus, _ := strconv.ParseInt(requests[string(testcluster.GPU)], 10, 64)
		for i := range replicas {
			pods = append(pods, testcluster.PodSpec{
				Name: fmt.Sprintf("%s-%s-%d", job.GetName(), strings.ToLower(role), i), Namespace: namespace,
				CPU: requests["cpu"], Memory: requests["memory"], GPUs: gpus,
				PodGroup: job.GetName(), Annotations: annotations,
			})
		}
	}
	pg := testcluster.PodGroup(namespace, job.GetName(), int32(len(pods)))
	pg.Annotations = map[string]string{topologyRequired: ibLevel}
	if err := m.CreatePodGroup(ctx, pg); err != nil {
		t.Fatal(err)
	}
	if err := m.CreatePods(ctx, pods...); err != nil {
		t.Fatal(err)
	}
	return len(pods)
}

// waitBound waits until n pods of the job are bound in the member and
// returns how many are in each IB domain.
func (m *member) waitBound(t *testing.T, job string, n int, timeout time.Duration) map[string]int {
	t.Helper()
	ctx := context.Background()
	var bound []v1.Pod
	err := testcluster.Eventually(ctx, timeout, func(ctx context.Context) (bool, error) {
		var err error
		bound, err = m.BoundPods(ctx, namespace, pgv1alpha1.PodGroupLabel+"="+job)
		return len(bound) == n, err
	})
	if err != nil {
		t.Fatalf("%s: %d of %d pods of %s bound: %v", m.name, len(bound), n, job, err)
	}
	domains := map[string]int{}
	for _, p := range bound {
		node, err := m.Client.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		domains[node.Labels[ibLabel]]++
	}
	return domains
}

func freePort(t *testing.T) int {
	t.Helper()
	addr, err := estimatortest.FreeAddress()
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(port)
	return n
}

func hostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
