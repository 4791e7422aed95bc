package readiness

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/phalanx-sched/phalanx/internal/gang"
	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/status"
	"github.com/phalanx-sched/phalanx/internal/workload"
)

const (
	// StartupCheckDelay: a gang short of members is checked for an ordered
	// startup only once it has waited this long, so a workload that is
	// still creating its pods in parallel costs no API read.
	StartupCheckDelay = 5 * time.Second
	// StartupRecheck: a verdict is checked again after this long (the user
	// may have recreated the workload with another policy).
	StartupRecheck = 30 * time.Second
)

// startupVerdict is what the last check found about a short gang.
type startupVerdict struct {
	uid     types.UID
	checked time.Time
	// blocker is nil when no startup policy holds the gang back.
	blocker *workload.OrderedStartup
}

// MembersShort is the condition of a gang that waits for members to exist
// or to lose their scheduling gates: MembersPending, or OrderedStartup when
// the workload that creates them starts its pods in order and so will never
// create the rest. Checking the workload reads it from the API server, in
// the background and at most once per gang at a time.
//
// A gang whose sub-groups are invalid says that instead: its size, and so
// how many members it lacks, is not known.
func (g *Gate) MembersShort(spec *gangspec.Spec, members MemberCount, quorum int) status.Condition {
	if msg := spec.InvalidSubGroups(); msg != "" {
		return status.Condition{Status: metav1.ConditionFalse, Reason: gang.ReasonInvalidSubGroups, Message: msg}
	}
	g.mu.Lock()
	v, ok := g.startup[spec.Ref]
	g.mu.Unlock()
	if !ok || v.uid != spec.UID || g.p.Clock.Since(v.checked) >= StartupRecheck {
		g.checkStartupLater(spec.Ref)
	}
	if ok && v.uid == spec.UID && v.blocker != nil {
		return status.Condition{Status: metav1.ConditionFalse, Reason: status.ReasonOrderedStartup, Message: v.blocker.Message(members.Ready, quorum)}
	}
	if members.Gated > 0 {
		return status.Condition{Status: metav1.ConditionFalse, Reason: gang.ReasonMembersPending,
			Message: fmt.Sprintf("%d of %d members can be scheduled; %d more wait on scheduling gates (%s); nothing is held until enough are released",
				members.Ready, quorum, members.Gated, strings.Join(members.Gates, ", "))}
	}
	return status.Condition{Status: metav1.ConditionFalse, Reason: gang.ReasonMembersPending,
		Message: fmt.Sprintf("%d of %d members exist; waiting for the rest before scheduling any", members.Ready, quorum)}
}

func (g *Gate) checkStartupLater(ref ident.Ref) {
	g.p.InBackground("startup/"+ref.String(), func() {
		select {
		case <-g.p.Ctx.Done():
			return
		case <-g.p.Clock.After(StartupCheckDelay):
		}
		g.checkStartup(g.p.Ctx, ref)
	})
}

// checkStartup looks for a startup policy that keeps the gang short for
// good, records the verdict, and says it in the gang's condition (the status
// writer emits a Warning event when the reason changes).
func (g *Gate) checkStartup(ctx context.Context, ref ident.Ref) {
	spec, err := g.p.Directory.Spec(ref)
	if err != nil {
		return
	}
	members, quorum := g.CountMembers(spec), max(spec.MinMember, 1)
	if members.Ready+members.Gated >= quorum || !g.p.Lifecycle.Untouched(ref) {
		g.ForgetStartup(ref)
		return
	}
	var blocker *workload.OrderedStartup
	for _, o := range workload.StartupOwners(g.p.Directory.Members(ref)) {
		b, ok, err := g.p.Workloads.OrderedStartup(ctx, o)
		if err != nil {
			klog.FromContext(ctx).V(2).Info("Reading a gang's workload for its startup policy", "gang", ref, "workload", o, "err", err)
			continue
		}
		if ok {
			blocker = &b
			break
		}
	}
	g.mu.Lock()
	old := g.startup[ref]
	g.startup[ref] = startupVerdict{uid: spec.UID, checked: g.p.Clock.Now(), blocker: blocker}
	g.mu.Unlock()
	if blocker != nil || old.blocker != nil {
		g.p.Conditions.Set(spec, g.MembersShort(spec, members, quorum))
	}
}

// ForgetStartup drops what was found of a gang's startup: its quorum
// exists, or its group object is gone.
func (g *Gate) ForgetStartup(ref ident.Ref) {
	g.mu.Lock()
	delete(g.startup, ref)
	g.mu.Unlock()
}

// StartupsTracked counts the gangs whose startup verdict is kept.
func (g *Gate) StartupsTracked() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.startup)
}

// Workloads reads the startup policy of the workload behind a gang.
type Workloads interface {
	// OrderedStartup reports the policy that keeps the workload from
	// creating its pods together; false when none does (or the workload is gone).
	OrderedStartup(ctx context.Context, o workload.Owner) (workload.OrderedStartup, bool, error)
}

// APIWorkloads reads workloads from the API server: StatefulSets through
// Kube, JobSets and LeaderWorkerSets through Dynamic (nil: not read).
type APIWorkloads struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
}

// OrderedStartup implements Workloads.
func (a APIWorkloads) OrderedStartup(ctx context.Context, o workload.Owner) (workload.OrderedStartup, bool, error) {
	switch o.Kind {
	case "StatefulSet":
		sts, err := a.Kube.AppsV1().StatefulSets(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
		if err != nil {
			return workload.OrderedStartup{}, false, ignoreNotFound(err)
		}
		b, ok := workload.StatefulSetStartup(sts)
		return b, ok, nil
	case "JobSet", "LeaderWorkerSet":
		if a.Dynamic == nil {
			return workload.OrderedStartup{}, false, nil
		}
		res := workload.JobSetResource
		if o.Kind == "LeaderWorkerSet" {
			res = workload.LeaderWorkerSetResource
		}
		obj, err := a.Dynamic.Resource(res).Namespace(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
		if err != nil {
			return workload.OrderedStartup{}, false, ignoreNotFound(err)
		}
		if o.Kind == "JobSet" {
			b, ok := workload.JobSetStartup(obj, o.GangScope)
			return b, ok, nil
		}
		b, ok := workload.LeaderWorkerSetStartup(obj)
		return b, ok, nil
	}
	return workload.OrderedStartup{}, false, nil
}

// ignoreNotFound: a workload that is gone (or whose API is not served) holds
// nothing back.
func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
