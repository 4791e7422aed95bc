package integration

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/internal/testcluster"
	"github.com/phalanx-sched/phalanx/manifests"
)

// TestConsolidation: two IB clusters of two 4-CPU nodes. Job "old" runs one
// pod in one of them, Job "pinned" (node affinity to the other one) one pod
// there: neither IB cluster has room for "wide", two pods of 4 CPU required
// in one IB cluster. With consolidation on, the scheduler binary moves the
// one gang that fits elsewhere — "old", though it has run longer than
// "pinned" and costs more — out of its IB cluster: the Job controller
// recreates its pod, which lands in the other IB cluster, and "wide" starts
// whole in the freed one. "pinned" is never touched; no gang is ever
// partial.
func TestConsolidation(t *testing.T) {
	spec := testcluster.NodeSpec{CPU: "4", Memory: "16Gi"}
	c := startJobCluster(t, append(inIB("ib-x", nodes("ib-x", 2, spec)), inIB("ib-y", nodes("ib-y", 2, spec))...)...)
	consolidationScenario(t, c, nil)
}

// TestConsolidationEvictionRequest: TestConsolidation on an API server that
// serves Kubernetes 1.37's EvictionRequest API, "old"'s pods naming a
// responder (a training operator that checkpoints before its pods go). The
// scheduler does not delete "old"'s pod: it asks it to leave with an
// EvictionRequest; the test, as the responder, finds the pod still running,
// and lets it go. Then the move completes as before, and the request is
// removed once the pod is gone.
func TestConsolidationEvictionRequest(t *testing.T) {
	spec := testcluster.NodeSpec{CPU: "4", Memory: "16Gi"}
	c := startGatedCluster(t, "lifecycle.k8s.io/v1alpha1=true", "EvictionRequestAPI=true",
		append(inIB("ib-x", nodes("ib-x", 2, spec)), inIB("ib-y", nodes("ib-y", 2, spec))...)...)
	startJobControllers(t, c)
	consolidationScenario(t, c, func(ctx context.Context, ns string, old *v1.Pod) {
		var asked *lifecyclev1alpha1.EvictionRequest
		err := testcluster.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			list, err := c.Client.LifecycleV1alpha1().EvictionRequests(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for i, r := range list.Items {
				if r.Spec.Target.Pod != nil && r.Spec.Target.Pod.UID == old.UID {
					asked = &list.Items[i]
				}
			}
			return asked != nil, nil
		})
		if err != nil {
			t.Fatalf("no EvictionRequest for %s: %v", old.Name, err)
		}
		if asked.Spec.Requester != "scheduling.phalanx.dev/consolidation" || asked.Spec.Intent != lifecyclev1alpha1.EvictionRequestIntentEviction {
			t.Errorf("request %s: requester %q, intent %q", asked.Name, asked.Spec.Requester, asked.Spec.Intent)
		}
		now, err := c.Client.CoreV1().Pods(ns).Get(ctx, old.Name, metav1.GetOptions{})
		if err != nil || now.UID != old.UID || now.DeletionTimestamp != nil {
			t.Fatalf("%s was not left running for its responder (err %v)", old.Name, err)
		}
		// The responder has checkpointed: it lets the pod go.
		if err := c.Client.CoreV1().Pods(ns).Delete(ctx, old.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
		err = testcluster.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			_, err := c.Client.LifecycleV1alpha1().EvictionRequests(ns).Get(ctx, asked.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Errorf("EvictionRequest %s not removed after its pod went: %v", asked.Name, err)
		}
	})
}

// consolidationScenario runs TestConsolidation's jobs on c with the
// scheduler binary; respond, when set, plays the moved pod's responder once
// "wide" is created ("old"'s pods then name one).
func consolidationScenario(t *testing.T, c *testcluster.Cluster, respond func(ctx context.Context, ns string, old *v1.Pod)) {
	t.Helper()
	config := bytes.Replace(manifests.SchedulerConfig, []byte("consolidationAfterSeconds: 0"), []byte("consolidationAfterSeconds: 2"), 1)
	config = bytes.Replace(config, []byte("consolidationMinRuntimeSeconds: 600"), []byte("consolidationMinRuntimeSeconds: 0"), 1)
	if !bytes.Contains(config, []byte("consolidationAfterSeconds: 2")) || !bytes.Contains(config, []byte("consolidationMinRuntimeSeconds: 0")) {
		t.Fatal("the canonical profile does not set the consolidation args")
	}
	if _, err := c.StartSchedulerBinary(schedulerBinary, config); err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	const ns = "consolidate"
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	create := func(job *batchv1.Job) {
		t.Helper()
		if _, err := c.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	selector := func(job string) string { return batchv1.JobNameLabel + "=" + job }

	old := gangJob(ns, "old", 1)
	if respond != nil {
		old.Spec.Template.Spec.EvictionResponders = []v1.EvictionResponder{{Name: "trainer.example.com/checkpoint", Priority: ptr.To[int32](10000)}}
	}
	create(old)
	oldPod := waitJobBound(t, c, ns, selector("old"), 1)[0]
	if respond != nil && len(oldPod.Spec.EvictionResponders) == 0 {
		t.Fatal("the API server dropped spec.evictionResponders: is the EvictionRequestAPI gate on?")
	}
	oldIB := nodeIB(t, c, oldPod.Spec.NodeName)
	otherIB := map[string]string{"ib-x": "ib-y", "ib-y": "ib-x"}[oldIB]

	pinned := gangJob(ns, "pinned", 1)
	pinned.Spec.Template.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
		NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{
			Key: ibLabel, Operator: v1.NodeSelectorOpIn, Values: []string{otherIB}}}}},
	}}}
	create(pinned)
	pinnedPod := waitJobBound(t, c, ns, selector("pinned"), 1)[0]

	create(gangJob(ns, "wide", 2))
	if respond != nil {
		respond(ctx, ns, &oldPod)
	}
	wide := waitJobBound(t, c, ns, selector("wide"), 2)
	for _, p := range wide {
		if ib := nodeIB(t, c, p.Spec.NodeName); ib != oldIB {
			t.Errorf("wide's %s is in %s, want both in %s (the IB cluster freed)", p.Name, ib, oldIB)
		}
	}
	moved := waitJobBound(t, c, ns, selector("old"), 1)[0]
	if moved.UID == oldPod.UID || nodeIB(t, c, moved.Spec.NodeName) != otherIB {
		t.Errorf("old's pod %s on %s, want a new pod in %s", moved.Name, moved.Spec.NodeName, otherIB)
	}
	if now := waitJobBound(t, c, ns, selector("pinned"), 1)[0]; now.UID != pinnedPod.UID {
		t.Errorf("pinned was moved: pod %s, was %s", now.Name, pinnedPod.Name)
	}
	// The moved pod was told why.
	err := testcluster.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		events, err := c.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Reason == "Consolidated" && e.Regarding.Name == oldPod.Name {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("no Consolidated event on %s: %v", oldPod.Name, err)
	}
	if err := c.Client.BatchV1().Jobs(ns).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}, metav1.ListOptions{}); err != nil {
		t.Log(fmt.Errorf("cleanup: %w", err))
	}
}
