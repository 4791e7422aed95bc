package gangs

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/status"
	"github.com/phalanx-sched/phalanx/internal/workload"
)

// The PodGroups of implicit gangs (pod-template annotations) are made here,
// from the pod informer's handler and when this replica starts leading,
// never from a scheduling cycle.

// ensureImplicitFor makes (or gives an owner to) the PodGroup of a pending
// implicit-gang member, when this replica leads. It runs from the pod
// informer's handler, never from a scheduling cycle.
func (g *Gangs) ensureImplicitFor(pod *v1.Pod) {
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || !g.host.Leader.Leading() {
		return
	}
	ref, implicit, ok, err := g.Resolve(pod)
	if !ok || err != nil || implicit == nil {
		return
	}
	_, err = g.Spec(ref)
	g.ensureImplicit(pod, *implicit, err == nil)
}

// ensureAllImplicit makes the PodGroups of implicit gangs whose members
// arrived while this replica stood by.
func (g *Gangs) ensureAllImplicit() {
	pods, err := g.pods.List(labels.Everything())
	if err != nil {
		return
	}
	// The oldest member of a gang makes its PodGroup, as on arrival; never
	// the informer's list order.
	slices.SortFunc(pods, ident.CompareMembers)
	for _, p := range pods {
		g.ensureImplicitFor(p)
	}
}

// ensureImplicit creates the PodGroup of an implicit gang, owned by the
// workload (garbage-collected with it), once; for a gang-name gang that
// spans workloads, each workload becomes an owner. It runs in the
// background: the pods wait (PreEnqueue) until the informer has it.
func (g *Gangs) ensureImplicit(pod *v1.Pod, im workload.Implicit, exists bool) {
	ref := ident.Ref{Namespace: pod.Namespace, Name: im.Name}
	owner := im.Owner
	if owner == nil && im.OwnerPod != "" {
		// An LeaderWorkerSet worker names its leader pod, not its UID.
		if leader, err := g.pods.Pods(pod.Namespace).Get(im.OwnerPod); err == nil {
			owner = &metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: leader.Name, UID: leader.UID}
		}
	}
	key := ref.String()
	if owner != nil {
		key += "@" + string(owner.UID)
	}
	// Claimed for good once made; released to try again after a failure.
	if !g.claim(key) {
		return
	}
	retry := func() { g.release(key) }
	go func() {
		ctx := g.host.Ctx
		client := g.pgClient.SchedulingV1alpha1().PodGroups(pod.Namespace)
		if !exists {
			pg := workload.PodGroupFor(pod, im)
			if owner != nil {
				pg.OwnerReferences = []metav1.OwnerReference{*owner}
			}
			_, err := client.Create(ctx, pg, metav1.CreateOptions{})
			switch {
			case err == nil:
				klog.FromContext(ctx).V(2).Info("Created the PodGroup of an implicit gang", "gang", ref, "workload", im.Workload, "minMember", im.MinMember)
				return
			case !apierrors.IsAlreadyExists(err):
				klog.FromContext(ctx).Error(err, "Creating the PodGroup of an implicit gang", "gang", ref, "workload", im.Workload)
				g.PodEvent(pod, status.ReasonPodGroupMissing, fmt.Sprintf("creating PodGroup %s for %s: %v", im.Name, im.Workload, err))
				retry()
				return
			}
			// Made meanwhile, for a member of another workload of the same
			// gang-name: this workload becomes an owner too.
		}
		if owner == nil {
			return
		}
		pg, err := g.PodGroups().Lister.PodGroups(pod.Namespace).Get(im.Name)
		if err != nil {
			// The informer may not have it yet.
			pg, err = client.Get(ctx, im.Name, metav1.GetOptions{})
		}
		if err != nil {
			retry()
			return
		}
		pg = pg.DeepCopy()
		if workload.AddOwner(pg, *owner) {
			if _, err := client.Update(ctx, pg, metav1.UpdateOptions{}); err != nil {
				retry()
			}
		}
	}()
}

// forgetImplicit drops ensureImplicit's keys of a deleted gang
// ("namespace/name", and "namespace/name@<owner UID>" per owner added), so
// that the next GangOf of a member still there creates the PodGroup again.
func (g *Gangs) forgetImplicit(ref ident.Ref) {
	if ref.Source != ident.SourcePodGroup {
		return
	}
	key := ref.String()
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.implicit, key)
	for k := range g.implicit {
		if strings.HasPrefix(k, key+"@") {
			delete(g.implicit, k)
		}
	}
}
