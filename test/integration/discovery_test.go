package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/internal/testcluster"
	"github.com/phalanx-sched/phalanx/manifests"
)

// workloadAPIFlags serve scheduling.k8s.io/v1beta1 (1.37: beta, off by
// default, and its storage exists only under the GenericWorkload gate).
var workloadAPIFlags = []string{
	"--runtime-config=scheduling.k8s.io/v1beta1=true",
	"--feature-gates=GenericWorkload=true",
}

// TestWorkloadAPIFoundAtRunTime: phalanx-scheduler starts on an API server
// that does not serve the Workload API; the API is turned on (the API server
// restarted with it), and with no restart of phalanx a v1beta1 gang is
// scheduled whole; turned off again, phalanx says it no longer reads it.
func TestWorkloadAPIFoundAtRunTime(t *testing.T) {
	c, err := testcluster.Start(t, testcluster.Options{Restartable: true})
	if err != nil {
		t.Fatalf("starting cluster: %v", err)
	}
	ctx := ctxFor(t)
	if err := c.CreateNodes(ctx, nodes("n", 3, testcluster.NodeSpec{CPU: "4", Memory: "16Gi"})...); err != nil {
		t.Fatal(err)
	}
	sched, err := c.StartSchedulerBinary(schedulerBinary, manifests.SchedulerConfig, "--api-discovery-interval=1s")
	if err != nil {
		t.Fatal(err)
	}
	// The scheduler is up once it binds a pod.
	if err := c.CreatePods(ctx, testcluster.PodSpec{Name: "probe", CPU: "100m"}); err != nil {
		t.Fatal(err)
	}
	waitBound(t, c, "default", "probe")
	if err := c.Client.CoreV1().Pods("default").Delete(ctx, "probe", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(readLog(t, sched.Log), "Reading gangs from the Workload API") {
		t.Fatal("phalanx read the Workload API before the API server served it")
	}

	if err := c.RestartAPIServer(ctx, workloadAPIFlags...); err != nil {
		t.Fatal(err)
	}
	waitLog(t, sched.Log, "Reading gangs from the Workload API")
	const ns = "default"
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "later", Namespace: ns},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 3}}},
	}
	if _, err := c.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A gang that needs all three nodes: members of a gang phalanx did not
	// read would bind one by one as plain pods (they fit alone).
	for i := 0; i < 3; i++ {
		p := testcluster.PodSpec{Name: fmt.Sprintf("later-%d", i), Namespace: ns, CPU: "3", Labels: map[string]string{"app": "later"}}.Pod()
		p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(pg.Name)}
		created, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if created.Spec.SchedulingGroup == nil {
			t.Fatal("the API server dropped spec.schedulingGroup: the Workload API is not on after the restart")
		}
	}
	waitJobBound(t, c, ns, "app=later", 3)
	// The gang went through phalanx as a gang: it wrote the upstream
	// condition on the PodGroup.
	err = testcluster.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		got, err := c.Client.SchedulingV1beta1().PodGroups(ns).Get(ctx, pg.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == schedulingv1beta1.PodGroupInitiallyScheduled && cond.Status == metav1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the PodGroup never said PodGroupInitiallyScheduled=True: %v", err)
	}

	if err := c.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	waitLog(t, sched.Log, "no longer serves the Workload API")
}

func readLog(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitLog waits until a scheduler binary's log contains part.
func waitLog(t *testing.T, path, part string) {
	t.Helper()
	err := testcluster.Eventually(ctxFor(t), 60*time.Second, func(context.Context) (bool, error) {
		return strings.Contains(readLog(t, path), part), nil
	})
	if err != nil {
		log := readLog(t, path)
		if len(log) > 4000 {
			log = log[len(log)-4000:]
		}
		t.Fatalf("the scheduler never logged %q: %v\n...%s", part, err, log)
	}
}
