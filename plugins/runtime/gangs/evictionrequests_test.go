package gangs_test

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/internal/eviction"
	"github.com/phalanx-sched/phalanx/internal/gang"
	"github.com/phalanx-sched/phalanx/plugins/internal/plugintest"
)

// movedGang is a running gang of three whose pods name a responder (a
// training operator that checkpoints before it lets them go).
func movedGang(responders bool) []*v1.Pod {
	var pods []*v1.Pod
	for _, name := range []string{"m-0", "m-1", "m-2"} {
		p := plugintest.Pod(name, "m", "1", 0)
		p.Spec.NodeName = "n0"
		p.Status.Phase = v1.PodRunning
		if responders {
			p.Spec.EvictionResponders = []v1.EvictionResponder{{Name: "trainer.example.com/checkpoint", Priority: ptr.To[int32](10000)}}
		}
		pods = append(pods, p)
	}
	return pods
}

// TestEvictionRequests: a gang moved by consolidation, on a server that
// serves EvictionRequests, whose pods name a responder, is asked to leave
// (one request per pod, none deleted); once one member has left, or once
// the grace has passed, the rest are deleted; the requests go once every pod
// is gone. Without responders, without the API, or with a grace of 0, the
// pods are deleted at once; other evictions (reclaim) are never asked.
func TestEvictionRequests(t *testing.T) {
	const grace = time.Minute
	tests := []struct {
		name       string
		served     bool
		responders bool
		grace      time.Duration
		reason     string
		// then, after the request: "member left" or "grace over".
		then string
		// asked: requests made; left: pods deleted by the sweep at the end.
		asked bool
	}{
		{name: "a member leaves, the rest follow", served: true, responders: true, grace: grace, reason: gang.ReasonConsolidated, then: "member left", asked: true},
		{name: "nobody answers within the grace", served: true, responders: true, grace: grace, reason: gang.ReasonConsolidated, then: "grace over", asked: true},
		{name: "no responders", served: true, grace: grace, reason: gang.ReasonConsolidated},
		{name: "API not served", responders: true, grace: grace, reason: gang.ReasonConsolidated},
		{name: "grace 0", served: true, responders: true, reason: gang.ReasonConsolidated},
		{name: "reclaim deletes", served: true, responders: true, grace: grace, reason: "Reclaimed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := movedGang(tt.responders)
			e, gangs, _ := plugintest.BuildParts(t, plugintest.Objects{Pods: pods, EvictionRequests: tt.served})
			gangs.Manager.Consolidation.EvictionGrace = tt.grace
			present := func(name string) bool {
				p, err := e.Client.CoreV1().Pods("default").Get(e.Ctx, name, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					return false
				}
				if err != nil {
					t.Fatal(err)
				}
				return p.DeletionTimestamp == nil
			}
			requests := func() int {
				list, err := e.Client.LifecycleV1alpha1().EvictionRequests("default").List(e.Ctx, metav1.ListOptions{LabelSelector: eviction.GroupLabel})
				if err != nil {
					t.Fatal(err)
				}
				return len(list.Items)
			}
			gangs.Evict(e.Ctx, pods, tt.reason, "moved for gang default/wide")
			if !tt.asked {
				if requests() != 0 {
					t.Fatalf("%d EvictionRequests made, want none", requests())
				}
				for _, p := range pods {
					if present(p.Name) {
						t.Fatalf("%s still running, want it deleted at once", p.Name)
					}
				}
				return
			}
			if got := requests(); got != len(pods) {
				t.Fatalf("%d EvictionRequests, want one per pod (%d)", got, len(pods))
			}
			list, _ := e.Client.LifecycleV1alpha1().EvictionRequests("default").List(e.Ctx, metav1.ListOptions{})
			for _, r := range list.Items {
				if r.Spec.Requester != eviction.Requester || r.Spec.Target.Pod == nil || r.Spec.Target.Pod.UID == "" {
					t.Fatalf("request %s: requester %q, target %v", r.Name, r.Spec.Requester, r.Spec.Target.Pod)
				}
			}
			gangs.Sweep()
			for _, p := range pods {
				if !present(p.Name) {
					t.Fatalf("%s deleted before any member left or the grace ended", p.Name)
				}
			}
			switch tt.then {
			case "member left":
				// The responder checkpointed and let m-0 go.
				if err := e.Client.CoreV1().Pods("default").Delete(e.Ctx, "m-0", metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				e.Eventually("the informer sees m-0 gone", func() bool {
					_, err := gangs.PodLister().Pods("default").Get("m-0")
					return apierrors.IsNotFound(err)
				})
			case "grace over":
				e.Clock.Step(grace - time.Second)
				gangs.Sweep()
				if !present("m-0") {
					t.Fatal("m-0 deleted before the grace ended")
				}
				e.Clock.Step(time.Second)
			}
			gangs.Sweep()
			for _, p := range pods {
				if present(p.Name) {
					t.Fatalf("%s still running after %s", p.Name, tt.then)
				}
			}
			e.Eventually("the informer sees every pod gone", func() bool {
				list, _ := gangs.PodLister().List(labels.Everything())
				return len(list) == 0
			})
			gangs.Sweep()
			if got := requests(); got != 0 {
				t.Fatalf("%d EvictionRequests left after every pod went", got)
			}
		})
	}
}
