package kcm_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/internal/testcluster"
	"github.com/phalanx-sched/phalanx/internal/testcluster/kcm"
)

func pause(labels map[string]string) v1.PodTemplateSpec {
	return v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyNever,
			Containers:    []v1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
}

// TestControllers: each controller does its part of a real cluster, and
// asking for one again is a no-op.
func TestControllers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := testcluster.Start(t, testcluster.Options{SkipCRDs: true})
	if err != nil {
		t.Fatal(err)
	}
	m := kcm.New(c.Config)
	defer m.Stop()
	for _, start := range []func() error{
		m.StartJobController, m.StartStatefulSetController, m.StartGarbageCollector, m.StartClusterRoleAggregation, m.StartResourceClaimController,
	} {
		for range 2 {
			if err := start(); err != nil {
				t.Fatal(err)
			}
		}
	}
	ns := metav1.NamespaceDefault
	pods := func(selector string, want int) {
		t.Helper()
		err := testcluster.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
			return err == nil && len(list.Items) == want, err
		})
		if err != nil {
			t.Fatalf("pods %s: want %d: %v", selector, want, err)
		}
	}

	t.Run("Job", func(t *testing.T) {
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "job"},
			Spec:       batchv1.JobSpec{Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](2), Template: pause(nil)},
		}
		if _, err := c.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pods(batchv1.JobNameLabel+"=job", 2)
	})

	t.Run("StatefulSet", func(t *testing.T) {
		labels := map[string]string{"app": "web"}
		sts := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: pause(labels)},
		}
		sts.Spec.Template.Spec.RestartPolicy = v1.RestartPolicyAlways
		if _, err := c.Client.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pods("app=web", 1)
	})

	t.Run("GarbageCollector", func(t *testing.T) {
		owner, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dependent := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dependent", OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}}}
		if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, dependent, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := c.Client.CoreV1().ConfigMaps(ns).Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		err = testcluster.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			_, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, "dependent", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		})
		if err != nil {
			t.Fatalf("the dependent outlived its owner: %v", err)
		}
	})

	t.Run("ResourceClaim", func(t *testing.T) {
		tmpl := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourcev1.ResourceClaimTemplateSpec{
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
				{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com"}}}}}}}
		if _, err := c.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "claims"}, Spec: pause(nil).Spec}
		pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")}}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		err := testcluster.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			claims, err := c.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
			return err == nil && slices.ContainsFunc(claims.Items, func(rc resourcev1.ResourceClaim) bool {
				return len(rc.OwnerReferences) == 1 && rc.OwnerReferences[0].Name == "claims"
			}), err
		})
		if err != nil {
			t.Fatalf("no claim was made for the pod from its template: %v", err)
		}
	})

	t.Run("ClusterRoleAggregation", func(t *testing.T) {
		const label = "example.com/aggregate-to-widgets"
		rule := rbacv1.PolicyRule{APIGroups: []string{"example.com"}, Resources: []string{"widgets"}, Verbs: []string{"get"}}
		roles := c.Client.RbacV1().ClusterRoles()
		aggregate := &rbacv1.ClusterRole{
			ObjectMeta:      metav1.ObjectMeta{Name: "widgets"},
			AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{label: "true"}}}},
		}
		part := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "widgets-get", Labels: map[string]string{label: "true"}}, Rules: []rbacv1.PolicyRule{rule}}
		for _, r := range []*rbacv1.ClusterRole{aggregate, part} {
			if _, err := roles.Create(ctx, r, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		var got []rbacv1.PolicyRule
		err := testcluster.Eventually(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			r, err := roles.Get(ctx, "widgets", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			got = r.Rules
			return slices.ContainsFunc(got, func(r rbacv1.PolicyRule) bool {
				return slices.Equal(r.Resources, rule.Resources) && slices.Equal(r.APIGroups, rule.APIGroups)
			}), nil
		})
		if err != nil {
			t.Fatalf("widgets did not aggregate widgets-get: rules %v: %v", got, err)
		}
	})
}

// TestJobControllerNeedsTheWorkloadAPI: with WorkloadWithJob on, a server
// that does not serve scheduling.k8s.io/v1beta1 is an error, not a
// controller waiting forever.
func TestJobControllerNeedsTheWorkloadAPI(t *testing.T) {
	c, err := testcluster.Start(t, testcluster.Options{SkipCRDs: true})
	if err != nil {
		t.Fatal(err)
	}
	featuregatetesting.SetFeatureGatesDuringTest(t, utilfeature.DefaultFeatureGate, featuregatetesting.FeatureOverrides{
		features.GenericWorkload: true, features.WorkloadWithJob: true,
	})
	m := kcm.New(c.Config)
	defer m.Stop()
	err = m.StartJobController()
	if err == nil || !strings.Contains(err.Error(), "does not serve scheduling.k8s.io/v1beta1") {
		t.Fatalf("StartJobController: %v", err)
	}
}
