package gangs

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/metrics"
	"github.com/phalanx-sched/phalanx/internal/status"
)

// Started records that the gang reached its quorum: its members go through
// together.
func (g *Gangs) Started(ctx context.Context, spec *gangspec.Spec, placed int) {
	metrics.GangWait.Observe(g.host.Clock.Since(spec.Created).Seconds())
	g.Status.Set(spec, status.Condition{Status: metav1.ConditionTrue, Reason: status.ReasonScheduled,
		Message: fmt.Sprintf("%d of %d members placed; the gang starts", placed, gangspec.Quorum(spec))})
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

// SkipFailedGang reports whether capacity events leave the member where it
// is (requeue.Waker.SkipFailedGang).
func (g *Gangs) SkipFailedGang(pod *v1.Pod) bool { return g.wakes.SkipFailedGang(pod) }

// CapacityHint is the queueing hint of the events that free capacity
// (requeue.Waker.CapacityHint).
func (g *Gangs) CapacityHint(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	return g.wakes.CapacityHint(logger, pod, oldObj, newObj)
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
