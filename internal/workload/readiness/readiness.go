// Package readiness decides whether a gang's pod may enter the active queue
// (PreEnqueue): its group object exists, its dependencies run, its
// sub-groups are valid and its quorum of members exists. It also says what
// a gang short of members waits for: MembersPending, or OrderedStartup when
// the workload that creates its members starts them in order and so never
// creates the rest. It reads the directory and writes only conditions and
// events, through its ports; it never reads the API in a scheduling cycle.
package readiness

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/phalanx-sched/phalanx/internal/gang"
	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/status"
)

// Directory is what the gate reads of the gang directory.
type Directory interface {
	GangOf(pod *v1.Pod) (ref ident.Ref, spec *gangspec.Spec, ok bool, err error)
	Spec(ref ident.Ref) (*gangspec.Spec, error)
	Members(ref ident.Ref) []*v1.Pod
	DependencyProgress(dep *gangspec.Spec) (done, need int)
	WatchesWorkloadAPI() bool
}

// Lifecycle tells whether anything of a gang is planned, held or bound.
type Lifecycle interface {
	Untouched(ref ident.Ref) bool
}

// Conditions sets a gang's condition (the status writer).
type Conditions interface {
	Set(spec *gangspec.Spec, c status.Condition) bool
}

// Quorum is the waker's memory of the members offered to a gang's quorum.
type Quorum interface {
	Offered(ref ident.Ref, pod *v1.Pod)
	QuorumMet(ref ident.Ref, uid types.UID) bool
	QuorumShort(ref ident.Ref)
}

// Ports are what the gate takes from the process.
type Ports struct {
	Directory  Directory
	Lifecycle  Lifecycle
	Conditions Conditions
	Quorum     Quorum
	// Workloads reads the workloads behind a short gang.
	Workloads Workloads
	// PodEvent records a warning on a pod, once per distinct message.
	PodEvent func(pod *v1.Pod, reason, msg string)
	// InBackground runs f in a goroutine unless a run under key is still going.
	InBackground func(key string, f func())
	// WorkloadAPIRecheck is how often the Workload API is looked for.
	WorkloadAPIRecheck func() time.Duration
	Clock              clock.WithDelayedExecution
	// Ctx bounds the background checks.
	Ctx context.Context
}

// Gate holds what the last startup checks found, under its own lock.
type Gate struct {
	p Ports

	mu      sync.Mutex
	startup map[ident.Ref]startupVerdict
}

// New returns a gate over the ports.
func New(p Ports) *Gate {
	return &Gate{p: p, startup: map[ident.Ref]startupVerdict{}}
}

// Ready says whether a pod may enter the active queue: a gang's pods wait
// until its group object exists, its dependencies run, and minMember
// members exist. The reason a pod waits is on its gang's condition (or, for
// a missing group object, an event on the pod) and in the message.
func (g *Gate) Ready(pod *v1.Pod) (string, bool) {
	ref, spec, ok, err := g.p.Directory.GangOf(pod)
	if !ok {
		return "", true
	}
	if err != nil {
		msg := g.Missing(ref, err)
		g.p.PodEvent(pod, status.ReasonPodGroupMissing, msg)
		return msg, false
	}
	if msg, ok := g.dependenciesReady(spec); !ok {
		return msg, false
	}
	if msg := spec.InvalidSubGroups(); msg != "" {
		// Before the quorum: a quorum read from invalid sub-groups would
		// count members toward a size the gang does not have.
		if g.p.Lifecycle.Untouched(ref) {
			g.p.Conditions.Set(spec, status.Condition{Status: metav1.ConditionFalse, Reason: gang.ReasonInvalidSubGroups, Message: msg})
		}
		return msg, false
	}
	g.p.Quorum.Offered(ref, pod)
	members := g.CountMembers(spec)
	if members.Ready >= gangspec.Quorum(spec) {
		if !g.p.Quorum.QuorumMet(ref, pod.UID) {
			return "waiting behind the member that leads the gang's plan; the plan wakes the others", false
		}
		return "", true
	}
	// Short: the next quorum wakes a lead anew (this pod, if it led, is
	// turned away).
	g.p.Quorum.QuorumShort(ref)
	cond := g.MembersShort(spec, members, gangspec.Quorum(spec))
	// A member the informer shows late must not put a gang that already
	// started (or is being placed) back to MembersPending.
	if g.p.Lifecycle.Untouched(ref) {
		g.p.Conditions.Set(spec, cond)
	}
	return cond.Message, false
}

// Missing says why a pod's gang cannot be read: its group object does not
// exist (yet), or the pod's gang annotations are invalid.
func (g *Gate) Missing(ref ident.Ref, err error) string {
	if apierrors.IsNotFound(err) {
		if ref.Source == ident.SourceWorkload && !g.p.Directory.WatchesWorkloadAPI() {
			return fmt.Sprintf("PodGroup %s/%s (scheduling.k8s.io): the API server does not serve the Workload API "+
				"(scheduling.k8s.io/v1beta1 needs --runtime-config and the GenericWorkload gate); phalanx-scheduler looks for it again every %v",
				ref.Namespace, ref.Name, g.p.WorkloadAPIRecheck())
		}
		if ref.Source == ident.SourceWorkload {
			return fmt.Sprintf("PodGroup %s/%s (scheduling.k8s.io) does not exist; the pod waits until it is created", ref.Namespace, ref.Name)
		}
		return fmt.Sprintf("PodGroup %s/%s does not exist; the pod waits until it is created", ref.Namespace, ref.Name)
	}
	return err.Error() + "; the pod is not scheduled until this is fixed"
}

func (g *Gate) dependenciesReady(spec *gangspec.Spec) (string, bool) {
	for _, dep := range spec.DependsOn() {
		set := func(reason, msg string) (string, bool) {
			g.p.Conditions.Set(spec, status.Condition{Status: metav1.ConditionFalse, Reason: reason, Message: msg})
			return msg, false
		}
		if dep == spec.Name && spec.Ref.Source == ident.SourcePodGroup {
			return set(status.ReasonDependencyMissing, fmt.Sprintf("PodGroup depends on itself (%v)", spec.DependsOn()))
		}
		dspec, err := g.p.Directory.Spec(ident.Ref{Namespace: spec.Namespace, Name: dep})
		if err != nil {
			return set(status.ReasonDependencyMissing, fmt.Sprintf("dependency PodGroup %s/%s does not exist", spec.Namespace, dep))
		}
		if done, need := g.p.Directory.DependencyProgress(dspec); done < need {
			return set(status.ReasonDependencyPending, fmt.Sprintf("waiting for gang %s: %d of %d members running or succeeded", dep, done, need))
		}
	}
	return "", true
}

// MemberCount is a gang's members as its quorum sees them.
type MemberCount struct {
	// Ready: members that exist, are not terminating and carry no
	// scheduling gate, plus those that finished.
	Ready int
	// Gated: members held back by scheduling gates; Gates: the gates' names.
	Gated int
	Gates []string
}

// CountMembers counts the gang's members toward its quorum: a member with a
// scheduling gate cannot be placed, so it counts only once its gates are
// removed, and until then the gang holds nothing.
func (g *Gate) CountMembers(spec *gangspec.Spec) MemberCount {
	return countMembers(spec.Succeeded, g.p.Directory.Members(spec.Ref))
}

func countMembers(succeeded int, members []*v1.Pod) MemberCount {
	c := MemberCount{Ready: succeeded}
	seen := map[string]bool{}
	for _, m := range members {
		switch {
		case m.DeletionTimestamp != nil:
		case len(m.Spec.SchedulingGates) > 0 && m.Spec.NodeName == "":
			c.Gated++
			for _, gate := range m.Spec.SchedulingGates {
				if !seen[gate.Name] {
					seen[gate.Name] = true
					c.Gates = append(c.Gates, gate.Name)
				}
			}
		default:
			c.Ready++
		}
	}
	sort.Strings(c.Gates)
	return c
}
