package kwok_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/internal/testcluster"
	"github.com/phalanx-sched/phalanx/internal/testcluster/kwok"
)

// TestStages: the embedded stages load, one for nodes and three for pods,
// and the run time is read from RunForAnnotation.
func TestStages(t *testing.T) {
	stages, err := kwok.Stages()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string][]string{}
	for ref, list := range stages {
		for _, s := range list {
			names[ref.Kind] = append(names[ref.Kind], s.Name)
		}
	}
	for _, l := range names {
		sort.Strings(l)
	}
	if got := strings.Join(names["Node"], ","); got != "node-ready" {
		t.Errorf("Node stages %s", got)
	}
	if got := strings.Join(names["Pod"], ","); got != "pod-deleted,pod-running,pod-succeeded" {
		t.Errorf("Pod stages %s", got)
	}
	for ref, list := range stages {
		for _, s := range list {
			if s.Name != "pod-succeeded" {
				continue
			}
			if s.Spec.Delay == nil || s.Spec.Delay.DurationFrom == nil || s.Spec.Delay.DurationFrom.JQ == nil || !strings.Contains(s.Spec.Delay.DurationFrom.JQ.Expression, kwok.RunForAnnotation) {
				t.Errorf("%s %s: delay %+v does not read %s", ref.Kind, s.Name, s.Spec.Delay, kwok.RunForAnnotation)
			}
		}
	}
}

// TestKubelet: under kwok a bound pod runs, a pod with a run time
// completes, and a deleted pod goes away at once.
func TestKubelet(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := testcluster.Start(t, testcluster.Options{SkipCRDs: true})
	if err != nil {
		t.Fatal(err)
	}
	stop, err := kwok.Start(c.Kubeconfig, "")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := c.CreateNodes(ctx, testcluster.NodeSpec{Name: "n", CPU: "4", Memory: "8Gi"}); err != nil {
		t.Fatal(err)
	}
	pods := c.Client.CoreV1().Pods(metav1.NamespaceDefault)
	bound := func(name string, annotations map[string]string) {
		t.Helper()
		p := testcluster.PodSpec{Name: name, CPU: "1", Annotations: annotations}.Pod()
		p.Spec.NodeName = "n"
		// A grace period, so that deletion waits for the kubelet.
		p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](600)
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	phase := func(name string, want v1.PodPhase) {
		t.Helper()
		var got v1.PodPhase
		err := testcluster.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			p, err := pods.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			got = p.Status.Phase
			return got == want, nil
		})
		if err != nil {
			t.Fatalf("pod %s is %s, want %s: %v", name, got, want, err)
		}
	}
	bound("runs", nil)
	bound("completes", map[string]string{kwok.RunForAnnotation: "1s"})
	phase("runs", v1.PodRunning)
	phase("completes", v1.PodSucceeded)

	if err := pods.Delete(ctx, "runs", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if p, err := pods.Get(ctx, "runs", metav1.GetOptions{}); err == nil && p.DeletionTimestamp == nil {
		t.Fatal("the pod was not deleted gracefully")
	}
	err = testcluster.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		_, err := pods.Get(ctx, "runs", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		t.Fatalf("the deleted pod is still there: %v", err)
	}
}
