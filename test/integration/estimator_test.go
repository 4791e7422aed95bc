package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/estimator/estimatortest"
	"github.com/phalanx-sched/phalanx/internal/estimator/karmadapb"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
	"github.com/phalanx-sched/phalanx/internal/testcluster/objects"
	"github.com/phalanx-sched/phalanx/manifests"
)

// TestKarmadaEstimator: phalanx-scheduler, run as users run it with
// --karmada-estimator-address and TLS, answers Karmada's estimator calls
// with what the scheduler then does, case by case: a whole-gang count under
// the workload's topology requirement (read from its template through the
// ResourceBinding), multi-component sets, single replicas, the queue's
// capability and Karmada's in-flight placements; bad calls are refused with
// the field named.
func TestKarmadaEstimator(t *testing.T) {
	gpuNode := func(name, leaf, role string, gpus int64) testcluster.NodeSpec {
		return testcluster.NodeSpec{Name: name, CPU: "16", Memory: "64Gi", GPUs: gpus,
			Labels: map[string]string{"leaf": leaf, "role": role}}
	}
	// Leaf a: 4 nodes × 6 GPUs; leaf b: 2 nodes × 8 GPUs; one CPU node.
	c := startCluster(t,
		gpuNode("a0", "a", "gpu", 6), gpuNode("a1", "a", "gpu", 6), gpuNode("a2", "a", "gpu", 6), gpuNode("a3", "a", "gpu", 6),
		gpuNode("b0", "b", "gpu", 8), gpuNode("b1", "b", "gpu", 8),
		testcluster.NodeSpec{Name: "c0", CPU: "8", Memory: "16Gi", Labels: map[string]string{"leaf": "c", "role": "cpu"}})
	ctx := ctxFor(t)
	nt := &phalanxv1alpha1.NetworkTopology{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: phalanxv1alpha1.NetworkTopologySpec{Levels: []phalanxv1alpha1.TopologyLevel{
			{Name: "leaf", NodeLabel: "leaf"}, {Name: "host", NodeLabel: v1.LabelHostname},
		}},
	}
	if _, err := c.Phalanx.SchedulingV1alpha1().NetworkTopologies().Create(ctx, nt, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.InstallCRDYAML(ctx, objects.ResourceBindingCRD); err != nil {
		t.Fatal(err)
	}
	certs, err := estimatortest.WriteTLS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	addr, err := estimatortest.FreeAddress()
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.StartSchedulerBinary(schedulerBinary, manifests.SchedulerConfig,
		"--karmada-estimator-address="+addr, "--karmada-cluster-name=member-1", "--karmada-kubeconfig="+c.Kubeconfig,
		"--karmada-estimator-cert-file="+certs.ServerCert, "--karmada-estimator-key-file="+certs.ServerKey,
		"--karmada-estimator-client-ca-file="+certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logTail(t, s.Log, 80)
		}
	})
	est, conn, err := estimatortest.Dial(addr, certs, true)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	gpu := func(cpu string, gpus int64) v1.ResourceList {
		l := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}
		if gpus > 0 {
			l[testcluster.GPU] = *resource.NewQuantity(gpus, resource.DecimalSI)
		}
		return l
	}
	sets := func(ctx context.Context, ns string, comps ...*karmadapb.Component) (int32, error) {
		resp, err := est.MaxAvailableComponentSets(ctx, &karmadapb.MaxAvailableComponentSetsRequest{Cluster: "member-1", Namespace: ns, Components: comps})
		return resp.GetMaxSets(), err
	}
	// The first answer waits for the estimator to serve (informers synced).
	workers5 := estimatortest.Component("worker", 5, gpu("1", 6), nil)
	var plain int32
	var callErr error
	err = testcluster.Eventually(ctx, 60*time.Second, func(ctx context.Context) (bool, error) {
		plain, callErr = sets(ctx, "default", workers5)
		return callErr == nil && plain == 1, nil
	})
	if err != nil {
		t.Fatalf("5 × 6 GPUs without topology: %d sets (%v), want 1 (one 6-GPU member per GPU node)", plain, callErr)
	}

	t.Run("a client without a certificate is refused", func(t *testing.T) {
		bare, conn, err := estimatortest.Dial(addr, certs, false)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_, err = bare.MaxAvailableComponentSets(ctx, &karmadapb.MaxAvailableComponentSetsRequest{Namespace: "default", Components: []*karmadapb.Component{workers5}})
		if err == nil {
			t.Fatal("answered a client without a certificate")
		}
	})

	t.Run("the template's topology requirement: no leaf holds the gang", func(t *testing.T) {
		// The workload's template (a suspended Job) carries the annotation
		// on its pod template; its ResourceBinding names its apiVersion.
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "default"},
			Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{phalanxv1alpha1.TopologyRequiredAnnotation: "leaf"}},
				Spec:       v1.PodSpec{RestartPolicy: v1.RestartPolicyNever, Containers: []v1.Container{{Name: "c", Image: "x"}}},
			}},
		}
		if _, err := c.Client.BatchV1().Jobs("default").Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rb := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
			"metadata": map[string]any{"name": "train-job", "namespace": "default"},
			"spec":     map[string]any{"resource": map[string]any{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "namespace": "default"}},
		}}
		gvr := schema.GroupVersionResource{Group: "work.karmada.io", Version: "v1alpha2", Resource: "resourcebindings"}
		if _, err := c.Dynamic.Resource(gvr).Namespace("default").Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := sets(estimatortest.WithObject(ctx, "Job", "default", "train"), "default", workers5)
		if err != nil || got != 0 {
			t.Fatalf("5 × 6 GPUs, required leaf: %d sets (%v), want 0 (leaf a holds 4, leaf b 2)", got, err)
		}
		// The scheduler agrees: the gang is refused whole.
		createGang(t, c, testcluster.PodGroup("default", "train", 5), gangPods("default", "train", 5, testcluster.PodSpec{
			CPU: "1", GPUs: 6, Annotations: map[string]string{phalanxv1alpha1.TopologyRequiredAnnotation: "leaf"}}))
		waitCondition(t, c, "default", "train", "Unschedulable")
		assertBound(t, c, "default", "train", 0)
		deleteGang(t, c, "train")
	})

	t.Run("the template's sub-groups: a set counts when each sub-group fits in one leaf", func(t *testing.T) {
		// 6 × 6 GPUs fit one per GPU node (flat: 1 set). In sub-groups of 3
		// per leaf, leaf a holds one and leaf b none: 0 sets; in
		// sub-groups of 2, a holds two and b one: 1 set.
		workers6 := estimatortest.Component("worker", 6, gpu("1", 6), nil)
		for _, tc := range []struct {
			size string
			want int32
		}{{"3", 0}, {"2", 1}} {
			name := "tp" + tc.size
			job := &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
				Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: v1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
						phalanxv1alpha1.SubGroupSizeAnnotation:             tc.size,
						phalanxv1alpha1.SubGroupTopologyRequiredAnnotation: "leaf",
					}},
					Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyNever, Containers: []v1.Container{{Name: "c", Image: "x"}}},
				}},
			}
			if _, err := c.Client.BatchV1().Jobs("default").Create(ctx, job, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			rb := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
				"metadata": map[string]any{"name": name + "-job", "namespace": "default"},
				"spec":     map[string]any{"resource": map[string]any{"apiVersion": "batch/v1", "kind": "Job", "name": name, "namespace": "default"}},
			}}
			gvr := schema.GroupVersionResource{Group: "work.karmada.io", Version: "v1alpha2", Resource: "resourcebindings"}
			if _, err := c.Dynamic.Resource(gvr).Namespace("default").Create(ctx, rb, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			var flat, got int32
			err := testcluster.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
				// The refused gang's pods are leaving.
				flat, err = sets(ctx, "default", workers6)
				return err == nil && flat == 1, nil
			})
			if err != nil {
				t.Fatalf("6 × 6 GPUs without a template: %d sets (%v), want 1", flat, err)
			}
			got, err = sets(estimatortest.WithObject(ctx, "Job", "default", name), "default", workers6)
			if err != nil || got != tc.want {
				t.Fatalf("6 × 6 GPUs in sub-groups of %s per leaf: %d sets (%v), want %d", tc.size, got, err, tc.want)
			}
		}
	})

	t.Run("master and workers: whole sets, then the scheduler binds exactly that", func(t *testing.T) {
		master := estimatortest.Component("master", 1, gpu("1", 0), map[string]string{"role": "cpu"})
		workers := estimatortest.Component("worker", 4, gpu("1", 6), map[string]string{"role": "gpu"})
		var got int32
		err := testcluster.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
			// The refused gang's pods are leaving.
			got, err = sets(ctx, "default", master, workers)
			return err == nil && got == 1, nil
		})
		if err != nil {
			t.Fatalf("master + 4 × 6 GPUs: %d sets (%v), want 1", got, err)
		}
		pods := gangPods("default", "pt", 4, testcluster.PodSpec{CPU: "1", GPUs: 6, NodeSelector: map[string]string{"role": "gpu"}})
		pods = append(pods, testcluster.PodSpec{Name: "pt-master", Namespace: "default", PodGroup: "pt", CPU: "1", NodeSelector: map[string]string{"role": "cpu"}})
		createGang(t, c, testcluster.PodGroup("default", "pt", 5), pods)
		waitBoundCount(t, c, "default", "pt", 5)
		err = testcluster.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
			got, err = sets(ctx, "default", master, workers)
			return err == nil && got == 0, nil
		})
		if err != nil {
			t.Fatalf("after the set bound: %d sets (%v), want 0 (two GPU nodes left)", got, err)
		}
	})

	replicas := func(ctx context.Context, ns string, gpus int64, assumed ...*karmadapb.AssumedWorkload) (int32, error) {
		resp, err := est.MaxAvailableReplicas(ctx, &karmadapb.MaxAvailableReplicasRequest{Cluster: "member-1",
			ReplicaRequirements: estimatortest.Replicas(ns, gpu("100m", gpus)), AssumedWorkloads: assumed})
		return resp.GetMaxReplicas(), err
	}

	t.Run("a queue's capability caps the answer", func(t *testing.T) {
		q := queue("capped", 1)
		q.Spec.Capability = v1.ResourceList{testcluster.GPU: resource.MustParse("2")}
		createQueue(t, c, q)
		ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "capped", Labels: map[string]string{phalanxv1alpha1.QueueLabel: "capped"}}}
		if _, err := c.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var got int32
		err := testcluster.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
			got, err = replicas(ctx, "capped", 1)
			return err == nil && got == 2, nil
		})
		if err != nil {
			t.Fatalf("1-GPU replicas in queue capped (capability 2 GPUs): %d (%v), want 2", got, err)
		}
		for i := range 3 {
			if err := c.CreatePods(ctx, testcluster.PodSpec{Name: fmt.Sprintf("capped-%d", i), Namespace: "capped", CPU: "100m", GPUs: 1,
				Labels: map[string]string{"app": "capped"}}); err != nil {
				t.Fatal(err)
			}
		}
		waitBoundExactly(t, c, "capped", "app=capped", 2)
	})

	t.Run("single replicas: every free GPU, less Karmada's in-flight placements", func(t *testing.T) {
		// 40 GPUs, 24 taken by the set, 2 by the capped queue.
		var got int32
		err := testcluster.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
			got, err = replicas(ctx, "default", 1)
			return err == nil && got == 14, nil
		})
		if err != nil {
			t.Fatalf("1-GPU replicas: %d (%v), want 14 free GPUs", got, err)
		}
		inflight := &karmadapb.AssumedWorkload{Namespace: "default", Components: []*karmadapb.Component{estimatortest.Component("w", 4, gpu("100m", 1), nil)}}
		if got, err := replicas(ctx, "default", 1, inflight); err != nil || got != 10 {
			t.Fatalf("1-GPU replicas with 4 in flight: %d (%v), want 10", got, err)
		}
		for i := range 15 {
			if err := c.CreatePods(ctx, testcluster.PodSpec{Name: fmt.Sprintf("one-%d", i), CPU: "100m", GPUs: 1,
				Labels: map[string]string{"app": "one"}}); err != nil {
				t.Fatal(err)
			}
		}
		waitBoundExactly(t, c, "default", "app=one", 14)
		if got, err := replicas(ctx, "default", 1); err != nil || got != 0 {
			t.Fatalf("1-GPU replicas once the cluster is full: %d (%v), want 0", got, err)
		}
	})

	t.Run("bad calls are refused, naming the field", func(t *testing.T) {
		_, err := est.MaxAvailableComponentSets(ctx, &karmadapb.MaxAvailableComponentSetsRequest{Cluster: "member-2", Namespace: "default", Components: []*karmadapb.Component{workers5}})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `member "member-1", not "member-2"`) {
			t.Errorf("another cluster's call: %v, want InvalidArgument naming both clusters", err)
		}
		bad := estimatortest.Component("worker", 1, gpu("1", 0), nil)
		bad.ReplicaRequirements.ResourceRequestBytes["cpu"] = []byte{0xff, 0xff}
		_, err = est.MaxAvailableComponentSets(ctx, &karmadapb.MaxAvailableComponentSetsRequest{Namespace: "default", Components: []*karmadapb.Component{bad}})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "components[0] (worker): resourceRequestBytes[cpu]") {
			t.Errorf("an unreadable quantity: %v, want InvalidArgument naming components[0] (worker): resourceRequestBytes[cpu]", err)
		}
	})
}

// logTail logs the last lines of a file.
func logTail(t *testing.T, path string, lines int) {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Logf("reading %s: %v", path, err)
		return
	}
	all := strings.Split(string(raw), "\n")
	t.Logf("last lines of %s:\n%s", path, strings.Join(all[max(0, len(all)-lines):], "\n"))
}

// waitBoundExactly waits until exactly want pods matching selector are bound, and
// stay so while the scheduler has had the chance to bind one more.
func waitBoundExactly(t *testing.T, c *testcluster.Cluster, ns, selector string, want int) {
	t.Helper()
	var n int
	err := testcluster.Eventually(ctxFor(t), 60*time.Second, func(ctx context.Context) (bool, error) {
		b, err := c.BoundPods(ctx, ns, selector)
		n = len(b)
		return n >= want, err
	})
	if err != nil || n != want {
		t.Fatalf("%s in %s: %d pods bound, want %d: %v", selector, ns, n, want, err)
	}
	// The rest are refused (their PodScheduled condition says so), not late.
	err = testcluster.Eventually(ctxFor(t), 60*time.Second, func(ctx context.Context) (bool, error) {
		list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		bound, refused := 0, 0
		for _, p := range list.Items {
			if p.Spec.NodeName != "" {
				bound++
				continue
			}
			for _, cond := range p.Status.Conditions {
				if cond.Type == v1.PodScheduled && cond.Status == v1.ConditionFalse {
					refused++
				}
			}
		}
		n = bound
		return bound+refused == len(list.Items), nil
	})
	if err != nil || n != want {
		t.Fatalf("%s in %s: %d pods bound once the rest were refused, want %d: %v", selector, ns, n, want, err)
	}
}
