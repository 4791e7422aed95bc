package runtime

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/internal/gang"
	"github.com/phalanx-sched/phalanx/internal/metrics"
	"github.com/phalanx-sched/phalanx/internal/status"
)

// Ready says whether a pod may enter the active queue: a gang's pods wait
// until its group object exists, its dependencies run, and minMember
// members exist. The reason a pod waits is on its gang's condition (or, for
// a missing group object, an event on the pod) and in the message.
func (g *Gangs) Ready(pod *v1.Pod) (string, bool) {
	ref, spec, ok, err := g.GangOf(pod)
	if !ok {
		return "", true
	}
	if err != nil {
		msg := g.Missing(ref, err)
		g.PodEvent(pod, status.ReasonPodGroupMissing, msg)
		return msg, false
	}
	if msg, ok := g.dependenciesReady(spec); !ok {
		return msg, false
	}
	if msg := spec.InvalidSubGroups(); msg != "" {
		// Before the quorum: a quorum read from invalid sub-groups would
		// count members toward a size the gang does not have.
		if g.Lifecycle.Untouched(ref) {
			g.Status.Set(spec, status.Condition{Status: metav1.ConditionFalse, Reason: gang.ReasonInvalidSubGroups, Message: msg})
		}
		return msg, false
	}
	g.wakes.Offered(ref, pod)
	members := g.CountMembers(spec)
	if members.Ready >= gang.Quorum(spec) {
		if !g.wakes.QuorumMet(ref, pod.UID) {
			return "waiting behind the member that leads the gang's plan; the plan wakes the others", false
		}
		return "", true
	}
	// Short: the next quorum wakes a lead anew (this pod, if it led, is
	// turned away).
	g.wakes.QuorumShort(ref)
	cond := g.MembersShort(spec, members, gang.Quorum(spec))
	// A member the informer shows late must not put a gang that already
	// started (or is being placed) back to MembersPending.
	if g.Lifecycle.Untouched(ref) {
		g.Status.Set(spec, cond)
	}
	return cond.Message, false
}

// Missing says why a pod's gang cannot be read: its group object does not
// exist (yet), or the pod's gang annotations are invalid.
func (g *Gangs) Missing(ref gang.Ref, err error) string {
	if apierrors.IsNotFound(err) {
		if ref.Source == gang.SourceWorkload && !g.WatchesWorkloadAPI() {
			return fmt.Sprintf("PodGroup %s/%s (scheduling.k8s.io): the API server does not serve the Workload API "+
				"(scheduling.k8s.io/v1beta1 needs --runtime-config and the GenericWorkload gate); phalanx-scheduler looks for it again every %v",
				ref.Namespace, ref.Name, WorkloadAPIRecheck)
		}
		if ref.Source == gang.SourceWorkload {
			return fmt.Sprintf("PodGroup %s/%s (scheduling.k8s.io) does not exist; the pod waits until it is created", ref.Namespace, ref.Name)
		}
		return fmt.Sprintf("PodGroup %s/%s does not exist; the pod waits until it is created", ref.Namespace, ref.Name)
	}
	return err.Error() + "; the pod is not scheduled until this is fixed"
}

func (g *Gangs) dependenciesReady(spec *gang.Spec) (string, bool) {
	for _, dep := range spec.DependsOn() {
		set := func(reason, msg string) (string, bool) {
			g.Status.Set(spec, status.Condition{Status: metav1.ConditionFalse, Reason: reason, Message: msg})
			return msg, false
		}
		if dep == spec.Name && spec.Ref.Source == gang.SourcePodGroup {
			return set(status.ReasonDependencyMissing, fmt.Sprintf("PodGroup depends on itself (%v)", spec.DependsOn()))
		}
		dspec, err := g.Spec(gang.Ref{Namespace: spec.Namespace, Name: dep})
		if err != nil {
			return set(status.ReasonDependencyMissing, fmt.Sprintf("dependency PodGroup %s/%s does not exist", spec.Namespace, dep))
		}
		if done, need := g.DependencyProgress(dspec); done < need {
			return set(status.ReasonDependencyPending, fmt.Sprintf("waiting for gang %s: %d of %d members running or succeeded", dep, done, need))
		}
	}
	return "", true
}

// Started records that the gang reached its quorum: its members go through
// together.
func (g *Gangs) Started(ctx context.Context, spec *gang.Spec, placed int) {
	metrics.GangWait.Observe(g.rt.clock.Since(spec.Created).Seconds())
	g.Status.Set(spec, status.Condition{Status: metav1.ConditionTrue, Reason: status.ReasonScheduled,
		Message: fmt.Sprintf("%d of %d members placed; the gang starts", placed, gang.Quorum(spec))})
	klog.FromContext(ctx).V(3).Info("Gang reached its quorum", "gang", spec.Ref, "placed", placed)
	// The room its plan (or reservation) held is its members' now: gangs
	// refused because that room was held for a gang ahead ("held for gangs
	// ahead of it") may fit, or reserve, when they look again. Nothing
	// else wakes them: no capacity was freed and no pod left.
	go g.wakes.CapacityChanged()
	if spec.SubGroups != nil {
		// Members of other sub-groups waited for this plan: theirs are
		// planned next.
		g.wakes.Wake(metrics.WokenSubGroup, spec.Ref)
	}
}

// --- queueing hints: which cluster events may make a rejected member
// schedulable.

// SkipFailedGang: capacity events do not retry the members of a gang whose
// plan failed, its representative included. The runtime's own handlers of
// the same events (pods gone, nodes and devices changed, holds given up)
// void the cached failure and wake the representative, paced by what the
// failed plans cost (failedWakes); its new plan wakes the others. Retried
// by the queue on every event besides, a few dozen gangs that did not fit
// were planned again for each pod that finished, each failure with a pod
// status write in the scheduling loop, and jobs behind them that fit
// waited (docs/benchmarks.md).
// Members asleep behind their gang's lead (quorumWaiters) are skipped too:
// its plan wakes them.
func (g *Gangs) SkipFailedGang(pod *v1.Pod) bool {
	ref, ok := g.RefOf(pod)
	if !ok {
		return false
	}
	// A gang paused after a timed-out plan is woken when the pause ends
	// (Resumed); moved by every pod that finishes meanwhile, each member
	// was refused again, a status write each.
	_, paused := g.Lifecycle.Paused(ref)
	return paused || g.Lifecycle.Representative(ref) != "" || g.wakes.Asleep(ref, pod.UID)
}

// CapacityHint is the queueing hint of the events that free capacity:
// members SkipFailedGang names stay where they are (a member whose gang's
// failure missed the room a pod freed is woken apart: retryStaleFailure).
func (g *Gangs) CapacityHint(_ klog.Logger, pod *v1.Pod, oldObj, _ any) (fwk.QueueingHint, error) {
	if g.SkipFailedGang(pod) {
		g.wakes.RetryStaleFailure(pod, oldObj)
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}

// dependencyStarted runs when a bound pod starts running: if it is a member
// of a gang others depend on and that gang now has its quorum running, the
// dependents' pending members are moved to the scheduling queue, where
// PreEnqueue decides again (members asleep behind a lead stay asleep). A
// queueing hint on assigned pods' updates did this before; every bound pod's
// status update anywhere in the cluster then made the scheduling queue check
// every pod it holds back, under its lock, for nothing in most clusters.
// (A dependency that finished is read from its group's status: its
// object's update wakes the dependents.)
func (g *Gangs) dependencyStarted(pod *v1.Pod) {
	ref, ok := g.RefOf(pod)
	if !ok {
		return
	}
	dependents := g.DependentsOfPodGroup(ref)
	if len(dependents) == 0 {
		return
	}
	spec, err := g.Spec(ref)
	if err != nil {
		return
	}
	if done, need := g.DependencyProgress(spec); done < need {
		return
	}
	pending := map[types.UID]*v1.Pod{}
	for _, d := range dependents {
		for _, m := range g.Pending(d) {
			pending[m.UID] = m
		}
	}
	g.wakes.WakePods(metrics.WokenDependencyRunning, pending)
}
