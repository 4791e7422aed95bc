package workload

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

func TestStatefulSetStartup(t *testing.T) {
	for _, tc := range []struct {
		name     string
		policy   appsv1.PodManagementPolicyType
		replicas *int32
		blocked  bool
	}{
		{name: "default policy is OrderedReady", replicas: ptr.To[int32](4), blocked: true},
		{name: "OrderedReady", policy: appsv1.OrderedReadyPodManagement, replicas: ptr.To[int32](2), blocked: true},
		{name: "Parallel", policy: appsv1.ParallelPodManagement, replicas: ptr.To[int32](4)},
		{name: "one replica has nothing to wait for", policy: appsv1.OrderedReadyPodManagement, replicas: ptr.To[int32](1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"},
				Spec: appsv1.StatefulSetSpec{PodManagementPolicy: tc.policy, Replicas: tc.replicas}}
			b, ok := StatefulSetStartup(sts)
			if ok != tc.blocked {
				t.Fatalf("blocked = %v, want %v", ok, tc.blocked)
			}
			if ok {
				msg := b.Message(1, 4)
				for _, want := range []string{"StatefulSet ns/db", "podManagementPolicy: OrderedReady", "podManagementPolicy: Parallel", "1 of 4 members"} {
					if !strings.Contains(msg, want) {
						t.Errorf("message %q lacks %q", msg, want)
					}
				}
			}
		})
	}
}

func jobSet(order string, rjobs int) *unstructured.Unstructured {
	var list []any
	for i := 0; i < rjobs; i++ {
		list = append(list, map[string]any{"name": "r" + string(rune('a'+i))})
	}
	spec := map[string]any{"replicatedJobs": list}
	if order != "" {
		spec["startupPolicy"] = map[string]any{"startupPolicyOrder": order}
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetNamespace("ns")
	u.SetName("train")
	return u
}

func TestJobSetStartup(t *testing.T) {
	for _, tc := range []struct {
		name    string
		js      *unstructured.Unstructured
		scope   string
		blocked bool
	}{
		{name: "InOrder over the whole JobSet", js: jobSet("InOrder", 2), blocked: true},
		{name: "InOrder with gang-name", js: jobSet("InOrder", 3), scope: phalanxv1alpha1.GangScopeWorkload, blocked: true},
		{name: "AnyOrder", js: jobSet("AnyOrder", 2)},
		{name: "no startup policy", js: jobSet("", 2)},
		{name: "InOrder, gang per replicated job", js: jobSet("InOrder", 2), scope: phalanxv1alpha1.GangScopeReplicatedJob},
		{name: "InOrder, gang per Job", js: jobSet("InOrder", 2), scope: phalanxv1alpha1.GangScopeJob},
		{name: "InOrder with one replicated job", js: jobSet("InOrder", 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, ok := JobSetStartup(tc.js, tc.scope)
			if ok != tc.blocked {
				t.Fatalf("blocked = %v, want %v", ok, tc.blocked)
			}
			if ok && (!strings.Contains(b.Fix, "AnyOrder") || !strings.Contains(b.Fix, phalanxv1alpha1.GangScopeReplicatedJob)) {
				t.Errorf("fix %q names neither AnyOrder nor gang-scope replicated-job", b.Fix)
			}
		})
	}
}

func TestLeaderWorkerSetStartup(t *testing.T) {
	lws := func(policy string, size int64) *unstructured.Unstructured {
		spec := map[string]any{"leaderWorkerTemplate": map[string]any{"size": size}}
		if policy != "" {
			spec["startupPolicy"] = policy
		}
		return &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	}
	if _, ok := LeaderWorkerSetStartup(lws("LeaderReady", 4)); !ok {
		t.Error("LeaderReady with workers: not reported")
	}
	if b, _ := LeaderWorkerSetStartup(lws("LeaderReady", 4)); !strings.Contains(b.Fix, "LeaderCreated") {
		t.Errorf("fix %q does not name LeaderCreated", b.Fix)
	}
	for _, u := range []*unstructured.Unstructured{lws("LeaderCreated", 4), lws("", 4), lws("LeaderReady", 1)} {
		if _, ok := LeaderWorkerSetStartup(u); ok {
			t.Errorf("%v reported as ordered", u.Object)
		}
	}
}

func TestStartupOwners(t *testing.T) {
	sts := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db-0",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", Controller: ptr.To(true)}}}}
	sts1 := sts.DeepCopy()
	sts1.Name = "db-1"
	js := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "js-0",
		Labels:          map[string]string{JobSetNameLabel: "train"},
		Annotations:     map[string]string{phalanxv1alpha1.GangScopeAnnotation: phalanxv1alpha1.GangScopeReplicatedJob},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train-a-0", Controller: ptr.To(true)}}}}
	// An LWS leader is owned by LWS's StatefulSet; the LWS's policy counts.
	leader := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lws-0",
		Labels:          map[string]string{LWSNameLabel: "serve"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "serve", Controller: ptr.To(true)}}}}
	job := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "j-0",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j", Controller: ptr.To(true)}}}}
	// In a fixed order, whatever the members' order.
	want := []Owner{
		{Kind: "JobSet", Namespace: "ns", Name: "train", GangScope: phalanxv1alpha1.GangScopeReplicatedJob},
		{Kind: "LeaderWorkerSet", Namespace: "ns", Name: "serve"},
		{Kind: "StatefulSet", Namespace: "ns", Name: "db"},
	}
	for _, members := range [][]*v1.Pod{{sts, sts1, js, leader, job}, {job, leader, js, sts1, sts}} {
		got := StartupOwners(members)
		if len(got) != len(want) {
			t.Fatalf("owners %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("owner %d: %v, want %v", i, got[i], want[i])
			}
		}
	}
}
