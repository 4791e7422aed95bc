package dryrun

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/phalanx-sched/phalanx/internal/estimator/karmadapb"
)

func TestUnschedulable(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	owned := func(kind, name string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{Kind: kind, Name: name}}
	}
	pod := func(name string, owners []metav1.OwnerReference, node string, unschedulableFor time.Duration) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", OwnerReferences: owners}, Spec: v1.PodSpec{NodeName: node}}
		if unschedulableFor > 0 {
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable,
				LastTransitionTime: metav1.NewTime(now.Add(-unschedulableFor))}}
		}
		return p
	}
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	rss := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	_ = rss.Add(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-abc", Namespace: "ns", OwnerReferences: owned("Deployment", "web")}})
	for _, p := range []*v1.Pod{
		pod("web-1", owned("ReplicaSet", "web-abc"), "", 10*time.Minute), // counts
		pod("web-2", owned("ReplicaSet", "web-abc"), "", 30*time.Second), // too recent
		pod("web-3", owned("ReplicaSet", "web-abc"), "n1", 0),            // bound
		pod("other", owned("ReplicaSet", "other-x"), "", 10*time.Minute), // another workload
		pod("job-1", owned("Job", "web"), "", 10*time.Minute),            // another kind
	} {
		_ = pods.Add(p)
	}
	u := &Unschedulable{Pods: corelisters.NewPodLister(pods), ReplicaSets: appslisters.NewReplicaSetLister(rss), Now: func() time.Time { return now }}
	n, err := u.Unschedulable(context.Background(), &karmadapb.ObjectReference{ApiVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: "web"}, time.Minute)
	if err != nil || n != 1 {
		t.Fatalf("Unschedulable = %d (%v), want 1", n, err)
	}
}
