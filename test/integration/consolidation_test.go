package integration

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
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

	create(gangJob(ns, "old", 1))
	oldPod := waitJobBound(t, c, ns, selector("old"), 1)[0]
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
