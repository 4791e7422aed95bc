// Package implicitpg makes the scheduler-plugins PodGroups of implicit gangs
// (pod-template annotations): from the pod informer's handler and when this
// replica starts leading, never from a scheduling cycle.
package implicitpg

import (
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	pgclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	pglisters "sigs.k8s.io/scheduler-plugins/pkg/generated/listers/scheduling/v1alpha1"

	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/inflight"
	"github.com/phalanx-sched/phalanx/internal/status"
	"github.com/phalanx-sched/phalanx/internal/workload"
)

// Directory is what the maker reads of the gang directory: which gang a pod
// belongs to (its implicit gang, if any), and whether that gang's group exists.
type Directory interface {
	Resolve(pod *v1.Pod) (ident.Ref, *workload.Implicit, bool, error)
	Spec(ref ident.Ref) (*gangspec.Spec, error)
}

// Ports are what the maker takes from the process.
type Ports struct {
	// Ctx bounds the API writes.
	Ctx context.Context
	// Leading reports whether this replica leads: only the leader writes.
	Leading   func() bool
	Directory Directory
	Pods      corelisters.PodLister
	Client    pgclientset.Interface
	// PodGroups is the informer's view, read before asking the API server.
	PodGroups pglisters.PodGroupLister
	// PodEvent records a warning on a pod whose PodGroup could not be made.
	PodEvent func(pod *v1.Pod, reason, msg string)
}

// Maker creates implicit gangs' PodGroups, each once at a time.
type Maker struct {
	p Ports
	// inFlight: the PodGroups made or being made ("namespace/name", and
	// "namespace/name@<owner UID>" per owner added).
	inFlight inflight.Keys
}

// New returns a maker over p.
func New(p Ports) *Maker { return &Maker{p: p} }

// EnsureFor makes (or gives an owner to) the PodGroup of a pending
// implicit-gang member, when this replica leads.
func (m *Maker) EnsureFor(pod *v1.Pod) {
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || !m.p.Leading() {
		return
	}
	ref, implicit, ok, err := m.p.Directory.Resolve(pod)
	if !ok || err != nil || implicit == nil {
		return
	}
	_, err = m.p.Directory.Spec(ref)
	m.ensure(pod, *implicit, err == nil)
}

// EnsureAll makes the PodGroups of implicit gangs whose members arrived
// while this replica stood by.
func (m *Maker) EnsureAll() {
	pods, err := m.p.Pods.List(labels.Everything())
	if err != nil {
		return
	}
	// The oldest member of a gang makes its PodGroup, as on arrival; never
	// the informer's list order.
	slices.SortFunc(pods, ident.CompareMembers)
	for _, p := range pods {
		m.EnsureFor(p)
	}
}

// ensure creates the PodGroup of an implicit gang, owned by the workload
// (garbage-collected with it), once; for a gang-name gang that spans
// workloads, each workload becomes an owner. It runs in the background: the
// pods wait (PreEnqueue) until the informer has it.
func (m *Maker) ensure(pod *v1.Pod, im workload.Implicit, exists bool) {
	ref := ident.Ref{Namespace: pod.Namespace, Name: im.Name}
	owner := im.Owner
	if owner == nil && im.OwnerPod != "" {
		// An LeaderWorkerSet worker names its leader pod, not its UID.
		if leader, err := m.p.Pods.Pods(pod.Namespace).Get(im.OwnerPod); err == nil {
			owner = &metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: leader.Name, UID: leader.UID}
		}
	}
	key := ref.String()
	if owner != nil {
		key += "@" + string(owner.UID)
	}
	// Claimed for good once made; released to try again after a failure.
	if !m.inFlight.Claim(key) {
		return
	}
	go func() {
		if !m.write(pod, im, ref, owner, exists) {
			m.inFlight.Release(key)
		}
	}()
}

// write creates the PodGroup (unless it exists) and adds owner to it; false
// when it failed and may be tried again.
func (m *Maker) write(pod *v1.Pod, im workload.Implicit, ref ident.Ref, owner *metav1.OwnerReference, exists bool) bool {
	ctx := m.p.Ctx
	client := m.p.Client.SchedulingV1alpha1().PodGroups(pod.Namespace)
	if !exists {
		pg := workload.PodGroupFor(pod, im)
		if owner != nil {
			pg.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		_, err := client.Create(ctx, pg, metav1.CreateOptions{})
		switch {
		case err == nil:
			klog.FromContext(ctx).V(2).Info("Created the PodGroup of an implicit gang", "gang", ref, "workload", im.Workload, "minMember", im.MinMember)
			return true
		case !apierrors.IsAlreadyExists(err):
			klog.FromContext(ctx).Error(err, "Creating the PodGroup of an implicit gang", "gang", ref, "workload", im.Workload)
			m.p.PodEvent(pod, status.ReasonPodGroupMissing, fmt.Sprintf("creating PodGroup %s for %s: %v", im.Name, im.Workload, err))
			return false
		}
		// Made meanwhile, for a member of another workload of the same
		// gang-name: this workload becomes an owner too.
	}
	if owner == nil {
		return true
	}
	pg, err := m.p.PodGroups.PodGroups(pod.Namespace).Get(im.Name)
	if err != nil {
		// The informer may not have it yet.
		pg, err = client.Get(ctx, im.Name, metav1.GetOptions{})
	}
	if err != nil {
		return false
	}
	pg = pg.DeepCopy()
	if workload.AddOwner(pg, *owner) {
		if _, err := client.Update(ctx, pg, metav1.UpdateOptions{}); err != nil {
			return false
		}
	}
	return true
}

// Forget drops the keys of a deleted gang, so that the next event of a
// member still there makes its PodGroup again.
func (m *Maker) Forget(ref ident.Ref) {
	if ref.Source != ident.SourcePodGroup {
		return
	}
	key := ref.String()
	m.inFlight.ReleaseMatching(func(k string) bool { return k == key || strings.HasPrefix(k, key+"@") })
}

// Tracked is how many PodGroups are held as made or being made; a deleted
// gang's are forgotten.
func (m *Maker) Tracked() int { return m.inFlight.Len() }
