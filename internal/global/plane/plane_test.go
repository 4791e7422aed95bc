package plane

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/clock"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/estimator"
	"github.com/phalanx-sched/phalanx/internal/global"
	"github.com/phalanx-sched/phalanx/internal/global/estimators"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// cannedAsker answers from a table: member -> sets, and records the
// assumed workloads it was told of.
type cannedAsker struct {
	mu      sync.Mutex
	sets    map[string]int32
	assumed map[string]int
}

func (a *cannedAsker) SetsEach(_ context.Context, questions map[string]estimators.Question) map[string]estimators.Result {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]estimators.Result{}
	for cluster, q := range questions {
		a.assumed[cluster] = max(a.assumed[cluster], len(q.Assumed))
		if n, ok := a.sets[cluster]; ok {
			out[cluster] = estimators.Result{Sets: n}
		} else {
			out[cluster] = estimators.Result{Err: fmt.Errorf("no estimator for %s", cluster)}
		}
	}
	return out
}

type staticTemplates map[string]*estimator.Template

func (s staticTemplates) Of(_ context.Context, _, kind, namespace, name string) (*estimator.Template, error) {
	if t, ok := s[namespace+"/"+name]; ok {
		return t, nil
	}
	return nil, fmt.Errorf("%s %s/%s not found", kind, namespace, name)
}

func create(t *testing.T, client dynamic.Interface, gvr schema.GroupVersionResource, obj map[string]any) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: obj}
	ri := client.Resource(gvr).Namespace(u.GetNamespace())
	got, err := ri.Create(context.Background(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if status, ok := obj["status"]; ok {
		got.Object["status"] = status
		if got, err = ri.UpdateStatus(context.Background(), got, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

func clusterObj(name string, gpus int) map[string]any {
	return map[string]any{"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "metadata": map[string]any{"name": name},
		"spec":   map[string]any{"syncMode": "Push", "apiEndpoint": "https://" + name},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "ClusterReady", "message": "", "lastTransitionTime": "2026-12-07T00:00:00Z"}}, "resourceSummary": map[string]any{"allocatable": map[string]any{"nvidia.com/gpu": fmt.Sprint(gpus), "cpu": "256"}}}}
}

func bindingObj(name, scheduler string, replicas int, placement map[string]any) map[string]any {
	return bindingIn("ml", name, scheduler, replicas, placement)
}

func bindingIn(ns, name, scheduler string, replicas int, placement map[string]any) map[string]any {
	spec := map[string]any{"resource": map[string]any{"apiVersion": "batch/v1", "kind": "Job", "namespace": ns, "name": name, "resourceVersion": "1"},
		"replicas": int64(replicas), "replicaRequirements": map[string]any{"resourceRequest": map[string]any{"nvidia.com/gpu": "4"}}, "schedulerName": scheduler}
	if placement != nil {
		spec["placement"] = placement
	}
	return map[string]any{"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
		"metadata": map[string]any{"name": name + "-job", "namespace": ns}, "spec": spec}
}

// The adapter on a real API server: it dispatches a binding of its
// schedulerName whole to the member the estimators choose (spec.clusters,
// the applied placement, Scheduled=True, an event), refuses one its
// placement would divide, and leaves karmada-scheduler's bindings alone.
func testPlaneWritesVerdicts(t *testing.T, c *testcluster.Cluster) {
	ctx, cancel := testContext(t)
	defer cancel()
	namespace(t, c, "ml", nil)
	create(t, c.Dynamic, Clusters, clusterObj("m1", 32))
	create(t, c.Dynamic, Clusters, clusterObj("m2", 16))
	create(t, c.Dynamic, ResourceBindings, bindingObj("train", "phalanx-global", 4, nil))
	create(t, c.Dynamic, ResourceBindings, bindingObj("spread", "phalanx-global", 4, map[string]any{
		"spreadConstraints": []any{map[string]any{"spreadByField": "cluster", "minGroups": int64(2)}}}))
	create(t, c.Dynamic, ResourceBindings, bindingObj("other", "default-scheduler", 4, nil))

	asker := &cannedAsker{sets: map[string]int32{"m1": 2, "m2": 1}, assumed: map[string]int{}}
	queued := &estimator.Template{Labels: map[string]string{phalanxv1alpha1.QueueLabel: "team-a"}}
	p := New(Options{SchedulerName: "phalanx-global", DefaultQueue: "team-a", Interval: 200 * time.Millisecond},
		c.Dynamic, c.Client, staticTemplates{"ml/train": queued, "ml/spread": queued, "ml/other": queued}, Estimator(asker), clock.RealClock{})
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	get := func(ctx context.Context, name string) (*binding, error) {
		u, err := c.Dynamic.Resource(ResourceBindings).Namespace("ml").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		b := &binding{}
		return b, fromUnstructured(u, b)
	}
	var train *binding
	if err := testcluster.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		var err error
		train, err = get(ctx, "train-job")
		return err == nil && apimeta.IsStatusConditionTrue(train.Status.Conditions, ScheduledCondition), err
	}); err != nil {
		t.Fatalf("train was never dispatched: %v (%+v)", err, train)
	}
	if len(train.Spec.Clusters) != 1 || train.Spec.Clusters[0] != (targetCluster{Name: "m2", Replicas: 4}) {
		t.Fatalf("spec.clusters %+v, want all 4 replicas on m2 (the tightest fit)", train.Spec.Clusters)
	}
	if train.Status.SchedulerObservedGeneration != train.Generation || train.Annotations[appliedPlacementAnnotation] == "" || train.Status.LastScheduledTime == nil {
		t.Fatalf("karmada-scheduler's bookkeeping missing: observed %d of %d, annotations %v", train.Status.SchedulerObservedGeneration, train.Generation, train.Annotations)
	}
	var spread *binding
	if err := testcluster.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		var err error
		spread, err = get(ctx, "spread-job")
		return err == nil && apimeta.FindStatusCondition(spread.Status.Conditions, ScheduledCondition) != nil, err
	}); err != nil {
		t.Fatal(err)
	}
	cond := apimeta.FindStatusCondition(spread.Status.Conditions, ScheduledCondition)
	if cond.Status != metav1.ConditionFalse || cond.Reason != string(global.WouldDivide) || !strings.Contains(cond.Message, "at least 2 groups by cluster") || len(spread.Spec.Clusters) != 0 {
		t.Fatalf("spread: %+v, clusters %v; want Scheduled=False WouldDivide, nothing dispatched", cond, spread.Spec.Clusters)
	}
	if err := testcluster.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		evs, err := c.Client.CoreV1().Events("ml").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		seen := map[string]bool{}
		for _, e := range evs.Items {
			seen[e.InvolvedObject.Name+"/"+e.Type+"/"+e.Reason] = true
		}
		return seen["train-job/Normal/Success"] && seen["spread-job/Warning/WouldDivide"], nil
	}); err != nil {
		t.Fatalf("events for the dispatch and the refusal: %v", err)
	}
	other, err := get(ctx, "other-job")
	if err != nil {
		t.Fatal(err)
	}
	if len(other.Spec.Clusters) != 0 || len(other.Status.Conditions) != 0 {
		t.Fatalf("karmada-scheduler's binding was written: %+v", other)
	}
	// A restarted tier reads the decision back: nothing is dispatched
	// again, and the dispatched job is told to the estimators as assumed.
	cancel()
	<-done
	ctx2, cancel2 := testContext(t)
	defer cancel2()
	asker2 := &cannedAsker{sets: map[string]int32{"m1": 2, "m2": 1}, assumed: map[string]int{}}
	create(t, c.Dynamic, ResourceBindings, bindingObj("next", "phalanx-global", 4, nil))
	p2 := New(Options{SchedulerName: "phalanx-global", DefaultQueue: "team-a", Interval: 200 * time.Millisecond},
		c.Dynamic, c.Client, staticTemplates{"ml/train": queued, "ml/spread": queued, "ml/next": queued}, Estimator(asker2), clock.RealClock{})
	go func() { _ = p2.Run(ctx2) }()
	if err := testcluster.Eventually(ctx2, 30*time.Second, func(ctx context.Context) (bool, error) {
		b, err := get(ctx, "next-job")
		return err == nil && len(b.Spec.Clusters) == 1, err
	}); err != nil {
		t.Fatal(err)
	}
	asker2.mu.Lock()
	defer asker2.mu.Unlock()
	if asker2.assumed["m2"] != 1 {
		t.Fatalf("the restarted tier told m2's estimator of %d assumed workloads, want 1 (train, dispatched, not started)", asker2.assumed["m2"])
	}
	if b, _ := get(ctx2, "train-job"); b.Generation != train.Generation {
		t.Fatalf("the restarted tier wrote train's spec again (generation %d → %d)", train.Generation, b.Generation)
	}
}
