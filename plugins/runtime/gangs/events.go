package gangs

// The informers' events as the gang directory and lifecycle see them: pods
// (members arriving, starting, refused, deleted), nodes and group objects.

import (
	"maps"
	"reflect"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/cache"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/utils/ptr"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/gang"
	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/lifecycle"
	"github.com/phalanx-sched/phalanx/internal/metrics"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

func (g *Gangs) onPod(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	if pod.Spec.NodeName != "" {
		// Bound: it is sorted no more.
		g.order.forget(pod.UID)
	}
	ref, ok := g.RefOf(pod)
	if !ok {
		return
	}
	if pod.DeletionTimestamp != nil {
		g.Lifecycle.MemberDeleted(ref, pod.UID)
		return
	}
	g.Lifecycle.ObserveMember(ref, pod.UID, pod.Spec.NodeName)
	g.NoteMember(ref, pod)
	if pod.Spec.NodeName == "" && pod.Status.NominatedNodeName != "" && !g.Lifecycle.IsPlaced(ref, pod.UID) {
		g.clearNomination(pod)
	}
}

// onPodAdd: a member that completes its gang's quorum wakes the siblings
// that PreEnqueue turned away for lack of members. The scheduling queue
// replays an unscheduled pod's arrival to other pods only under the
// GenericWorkload gate (1.37; 1.36's GangScheduling, now folded into it),
// off by default, so without this they would wait for the queue's
// periodic flush (minutes) when the completing member cannot be scheduled
// itself. Counting starts from the index, which already holds every pod
// added so far, so a burst of adds still wakes.
func (g *Gangs) onPodAdd(obj any) {
	g.onPod(obj)
	pod, ok := obj.(*v1.Pod)
	if !ok || pod.DeletionTimestamp != nil {
		return
	}
	// Every pod the scheduler learns of, running or new, is a sample of the
	// workload whose shapes placement keeps room for.
	g.Manager.Workload.Observe(resources.PodRequests(pod), g.host.Clock.Now())
	if pod.Spec.NodeName == "" {
		g.implicitPGs.EnsureFor(pod)
		g.memberArrived(pod)
		return
	}
	// A bound member counts toward the quorum too: one listed after
	// siblings PreEnqueue turned away for lack of members (a restart) may
	// complete it. Coscheduling's hint does not see bound pods arrive
	// (EventsToRegister says why). The binds of a gang being placed find
	// no such siblings and wake nothing.
	if ref, ok := g.RefOf(pod); ok && g.wakes.TurnedAwayForQuorum(ref) {
		g.quorumMayBeMet(ref)
	}
}

// onPodUpdate: a member whose last scheduling gate is removed counts toward
// its gang's quorum from now on, and may complete it, as an added member does.
// A bound member that starts running may let the gangs that depend on its
// gang go.
func (g *Gangs) onPodUpdate(oldObj, newObj any) {
	g.onPod(newObj)
	old, ok1 := oldObj.(*v1.Pod)
	pod, ok2 := newObj.(*v1.Pod)
	if !ok1 || !ok2 {
		return
	}
	if pod.Spec.NodeName != "" && pod.Status.Phase == v1.PodRunning && old.Status.Phase != v1.PodRunning {
		g.dependencyStarted(pod)
	}
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil {
		return
	}
	if len(old.Spec.SchedulingGates) > 0 && len(pod.Spec.SchedulingGates) == 0 {
		g.memberArrived(pod)
	}
	if refusedAnew(old, pod) {
		// Refused before Coscheduling's PostFilter could see it (another
		// plugin's PreFilter rejected it, and an earlier PostFilter ended
		// the chain).
		g.Refused(pod)
	}
	if !slices.EqualFunc(old.Status.ResourceClaimStatuses, pod.Status.ResourceClaimStatuses, func(a, b v1.PodResourceClaimStatus) bool {
		return a.Name == b.Name && ptr.Equal(a.ResourceClaimName, b.ResourceClaimName)
	}) {
		g.claimsNamed(pod)
	}
}

// refusedAnew reports whether the scheduler has just written that it could
// not place the pod.
func refusedAnew(old, cur *v1.Pod) bool {
	_, c := podutil.GetPodCondition(&cur.Status, v1.PodScheduled)
	if c == nil || c.Status != v1.ConditionFalse {
		return false
	}
	_, o := podutil.GetPodCondition(&old.Status, v1.PodScheduled)
	return o == nil || o.Status != c.Status || o.Message != c.Message || !o.LastTransitionTime.Equal(&c.LastTransitionTime)
}

// claimsNamed runs when the resourceclaim controller names a pending
// member's claims made from templates: until then the member's devices
// cannot be planned, so a plan that failed, or ran, before it is retried.
func (g *Gangs) claimsNamed(pod *v1.Pod) {
	ref, ok := g.RefOf(pod)
	if !ok {
		return
	}
	g.Lifecycle.Changed()
	g.inFlight.Go("claims/"+ref.String(), func() { g.wakes.WakeOne(metrics.WokenClaimsNamed, ref) })
}

// memberArrived runs when a pending member is added or loses its last
// scheduling gate, while nothing of its gang is placed yet: a gang whose
// members now reach the quorum is woken; a gang still short says so anew
// (its members wait in PreEnqueue, which would not run again to update the
// count, e.g. for a member that arrives with a gate).
func (g *Gangs) memberArrived(pod *v1.Pod) {
	ref, ok := g.RefOf(pod)
	if !ok {
		return
	}
	if !g.Lifecycle.Untouched(ref) {
		// A started gang of sub-groups: members of a sub-group that waited
		// for the rest of it may plan it now.
		if spec, err := g.Spec(ref); err == nil && spec.SubGroups != nil && g.Lifecycle.Phase(ref) == lifecycle.PhaseStarted {
			g.inFlight.Go("wake/"+ref.String(), func() { g.wakes.Wake(metrics.WokenSubGroup, ref) })
		}
		return
	}
	g.quorumMayBeMet(ref)
}

// quorumMayBeMet wakes the gang's members turned away for lack of members
// once its quorum exists (a lead first), and otherwise updates its
// MembersPending condition.
func (g *Gangs) quorumMayBeMet(ref ident.Ref) {
	spec, err := g.Spec(ref)
	if err != nil {
		return
	}
	count, quorum := g.CountMembers(spec), gangspec.Quorum(spec)
	if count.Ready < quorum {
		g.wakes.QuorumShort(ref)
		if c, ok := g.Status.Get(ref); ok && c.Reason == gang.ReasonMembersPending {
			g.Status.Set(spec, g.MembersShort(spec, count, quorum))
		}
		return
	}
	g.ForgetStartup(ref)
	// Coalesce: when the informer lists a whole gang at once, every one of
	// its adds sees the quorum; one wake at a time per gang is enough.
	g.inFlight.Go("wake/"+ref.String(), func() {
		if _, failed := g.Lifecycle.Failed(ref); failed {
			g.wakes.WakeOne(metrics.WokenQuorum, ref)
			return
		}
		g.wakes.WakeAtQuorum(ref)
	})
}

func (g *Gangs) onPodDelete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	ref, member := g.RefOf(pod)
	if member {
		// Members asleep behind the pod (it led its gang, or stands for it
		// after a failed plan) must be tried themselves.
		rep := g.Lifecycle.Representative(ref)
		g.Lifecycle.MemberDeleted(ref, pod.UID)
		g.Lifecycle.ForgetIfEmpty(ref)
		if l, ok := g.wakes.LeadOf(ref); ok && (l.UID == pod.UID || rep == pod.UID) {
			g.wakes.Wake(metrics.WokenLeadDeleted, ref)
		}
	}
	if pod.Spec.NodeName != "" {
		// Its room is free (the scheduler's pod informer sees a finished
		// pod as deleted): void cached plan failures and wake the failed
		// gangs (paced), and at once the gangs that reserved its node:
		// their reserved room idles until they are planned on it. Waking
		// every reserving gang on every pod that finished anywhere
		// re-planned them for nothing, each failure with a pod status
		// write in the scheduling loop.
		// Counted from after the bump: a plan that began before it is the
		// paced wake's (or the in-flight activation's) to retry. Recorded
		// before the wakes, so the queue's event for the pod finds it.
		g.wakes.GoneBound(pod.UID, g.Lifecycle.Changed())
		g.wakes.Changed()
		for _, ref := range g.Lifecycle.ReservationsOn(pod.Spec.NodeName) {
			g.wakes.WakeOne(metrics.WokenRoomFreed, ref)
		}
	}
	g.order.forget(pod.UID)
	g.wakes.ForgetPod(ref, member, pod.UID)
	g.mu.Lock()
	delete(g.podEvents, pod.UID)
	g.mu.Unlock()
}

func (g *Gangs) onNodeUpdate(oldObj, newObj any) {
	o, ok1 := oldObj.(*v1.Node)
	n, ok2 := newObj.(*v1.Node)
	if !ok1 || !ok2 {
		return
	}
	if o.Spec.Unschedulable != n.Spec.Unschedulable ||
		!equality.Semantic.DeepEqual(o.Status.Allocatable, n.Status.Allocatable) ||
		!equality.Semantic.DeepEqual(o.Labels, n.Labels) ||
		!equality.Semantic.DeepEqual(o.Spec.Taints, n.Spec.Taints) {
		g.nodeChanged(n)
	}
}

// nodeChanged: a node was added or changed what it offers. Cached plan
// failures are void and the failed gangs are woken (CapacityChanged); the
// node's version is recorded first, with the capacity version after the
// bump, so that the scheduling queue's event for the node, which comes once
// the scheduler's cache has it, finds a plan that this wake started on a
// snapshot without it (requeue.Waker.NodeChanged).
func (g *Gangs) nodeChanged(obj any) {
	v := g.Lifecycle.Changed()
	if n, ok := obj.(*v1.Node); ok {
		g.wakes.NodeChanged(n, v)
	}
	g.wakes.Changed()
}

// onGroup runs once this process's listers have the group object (the
// scheduler's own event for the same change may come first, while they are
// stale): it records the quorum and wakes the gang and its dependents.
func (g *Gangs) onGroup(old, spec *gangspec.Spec) {
	if spec == nil {
		return
	}
	if old != nil && sameInputs(old, spec) {
		// A write that changed nothing phalanx reads (its own conditions
		// and held annotation, the controller's phase). Waking the gang for it
		// re-ran every pending member of a gang that did not fit, each
		// refused again with a pod status write in the scheduling loop,
		// and the refusal wrote the group's status again: on a busy
		// cluster the loop spent its time there while jobs that fit
		// waited (docs/benchmarks.md).
		return
	}
	g.regroup(spec.Ref)
	if spec.Ref.Source == ident.SourceWorkload {
		if root, ok := g.CompositeOf(spec.Ref); ok {
			// A sub-group of a composite gang: the gang is the composite's.
			g.order.changed()
			g.wakes.Wake(metrics.WokenGroupChanged, root)
			return
		}
	}
	g.Lifecycle.SetSpec(spec.Ref, gangspec.Quorum(spec), spec.Timeout)
	if old != nil && planInputsChanged(old, spec) {
		// A resized gang (minCount), a new constraint or priority: the
		// cached plan failure no longer holds.
		g.Lifecycle.Retry(spec.Ref)
	}
	g.order.changed()
	// Members name their queue through the group's label: charge them again.
	if old == nil || old.Labels[queueLabel] != spec.Labels[queueLabel] {
		if q := g.host.Queues(); q != nil {
			q.Recharge(spec.Namespace, &spec.Ref)
		}
	}
	refs := append([]ident.Ref{spec.Ref}, g.Dependents(spec.Ref)...)
	g.wakes.Wake(metrics.WokenGroupChanged, refs...)
}

func (g *Gangs) onGroupDelete(spec *gangspec.Spec) {
	if spec == nil {
		return
	}
	// Members waiting in Permit are released with the plan: without their
	// group they would hold their nodes until Permit's own timeout.
	g.Lifecycle.Release(spec.Ref, lifecycle.ReasonGroupDeleted, "the gang's group object was deleted; its members were released")
	g.Lifecycle.Forget(spec.Ref)
	g.order.changed()
	g.Status.Forget(spec.Ref)
	g.ForgetStartup(spec.Ref)
	g.implicitPGs.Forget(spec.Ref)
	g.Directory.Forget(spec.Ref)
	g.wakes.ForgetGang(spec.Ref) // all woken below
	// An implicit gang's PodGroup deleted while members remain is made again.
	members := g.Members(spec.Ref)
	slices.SortFunc(members, ident.CompareMembers)
	for _, m := range members {
		g.implicitPGs.EnsureFor(m)
	}
	if q := g.host.Queues(); q != nil {
		q.Unblock(spec.Ref, nil)
	}
	g.wakes.Wake(metrics.WokenGroupChanged, spec.Ref)
	g.CapacityChanged()
}

// sameInputs reports whether two versions of a gang's group object say the
// same to the scheduler: everything read from them but the held annotation,
// which phalanx itself writes as holds change.
func sameInputs(old, cur *gangspec.Spec) bool {
	withoutHeld := func(a map[string]string) map[string]string {
		out := maps.Clone(a)
		delete(out, phalanxv1alpha1.HeldAnnotation)
		if len(out) == 0 {
			return nil
		}
		return out
	}
	o, c := *old, *cur
	o.Annotations, c.Annotations = withoutHeld(old.Annotations), withoutHeld(cur.Annotations)
	return reflect.DeepEqual(&o, &c)
}
