package workload

import (
	"fmt"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
)

const (
	gangIndex      = "phalanx.gang"
	dependsOnIndex = "phalanx.dependsOn"
)

// Directory is the scheduler's gang directory over its informers: which
// gang a pod belongs to (GangOf, the one precedence of gang sources), each
// gang's definition from the adapter of its source (scheduler-plugins
// PodGroups, Workload API PodGroups, CompositePodGroups; sub-groups from
// annotations), its members and the gangs that depend on it. It only reads.
type Directory struct {
	podGroups PodGroups
	// upstream and composites: nil while the API server does not serve
	// them (the Workload API follower sets them at run time).
	upstream   atomic.Pointer[Upstream]
	composites atomic.Pointer[Composites]
	pgIndexer  cache.Indexer
	podIndex   cache.Indexer
	// placed lists a gang's members this scheduler placed (not pending).
	placed func(ident.Ref) sets.Set[types.UID]

	mu sync.Mutex
	// memberAnnotations: a member's annotations, for gangs whose pods (not
	// their group object) declare sub-groups.
	memberAnnotations map[ident.Ref]map[string]string
}

// NewDirectory returns a directory over the pod informer (indexed here by
// gang) and the scheduler-plugins PodGroup informer (indexed by the gangs
// they depend on). placed lists the members placed but not bound yet.
func NewDirectory(pods, podGroups cache.SharedIndexInformer, lister PodGroups, placed func(ident.Ref) sets.Set[types.UID]) (*Directory, error) {
	d := &Directory{podGroups: lister, placed: placed, memberAnnotations: map[ident.Ref]map[string]string{}}
	if err := pods.AddIndexers(cache.Indexers{gangIndex: d.indexByGang}); err != nil {
		return nil, fmt.Errorf("indexing pods by gang: %w", err)
	}
	if err := podGroups.AddIndexers(cache.Indexers{dependsOnIndex: indexByDependency}); err != nil {
		return nil, err
	}
	d.podIndex, d.pgIndexer = pods.GetIndexer(), podGroups.GetIndexer()
	return d, nil
}

// ServeWorkloadAPI sets the adapters of the Workload API's PodGroups and of
// CompositePodGroups; nil while the API server does not serve them.
func (d *Directory) ServeWorkloadAPI(up *Upstream, comp *Composites) {
	d.upstream.Store(up)
	d.composites.Store(comp)
}

// Upstream is the adapter of the Workload API's PodGroups, nil while not served.
func (d *Directory) Upstream() *Upstream { return d.upstream.Load() }

// Composites is the adapter of CompositePodGroups, nil while not served.
func (d *Directory) Composites() *Composites { return d.composites.Load() }

// WatchesWorkloadAPI reports whether the API server serves the upstream
// Workload API now (as far as the last look found).
func (d *Directory) WatchesWorkloadAPI() bool { return d.upstream.Load() != nil }

// PodIndex is the pod informer's store; PodGroupIndex the PodGroups'. Tests
// deliver events through them as the informers do.
func (d *Directory) PodIndex() cache.Indexer      { return d.podIndex }
func (d *Directory) PodGroupIndex() cache.Indexer { return d.pgIndexer }

// Resolve finds a pod's gang with GangOf — the one precedence of gang
// sources, shared with the controller: the scheduler-plugins PodGroup
// label, else spec.schedulingGroup (upstream Workload API; filed under its
// CompositePodGroup when it has one), else the implicit-gang annotations.
// An invalid annotation is an error: the pod belongs to a gang that cannot
// be formed.
func (d *Directory) Resolve(pod *v1.Pod) (ident.Ref, *Implicit, bool, error) {
	ref, implicit, ok, err := d.leafRef(pod)
	if ok && err == nil && ref.Source == ident.SourceWorkload {
		if root, isComposite := d.CompositeOf(ref); isComposite {
			return root, nil, true, nil
		}
	}
	return ref, implicit, ok, err
}

// leafRef is the group object a pod names itself (the PodGroup of a
// CompositePodGroup's sub-group, not the composite): the key the member
// index keeps pods under, whatever informer event comes first.
func (d *Directory) leafRef(pod *v1.Pod) (ident.Ref, *Implicit, bool, error) {
	r, err := GangOf(pod)
	if err != nil {
		return ident.Ref{}, nil, true, err
	}
	switch r.Source {
	case SourceNone:
		return ident.Ref{}, nil, false, nil
	case SourceWorkloadAPI:
		return ident.Ref{Source: ident.SourceWorkload, Namespace: r.Namespace, Name: r.Name}, nil, true, nil
	}
	return ident.Ref{Namespace: r.Namespace, Name: r.Name}, r.Implicit, true, nil
}

// CompositeOf is the gang CompositePodGroup an upstream PodGroup belongs
// to, where the API server serves CompositePodGroups: its PodGroups are
// that gang's sub-groups.
func (d *Directory) CompositeOf(leaf ident.Ref) (ident.Ref, bool) {
	up, comp := d.upstream.Load(), d.composites.Load()
	if up == nil || comp == nil {
		return ident.Ref{}, false
	}
	pg, err := up.PodGroups.PodGroups(leaf.Namespace).Get(leaf.Name)
	if err != nil {
		return ident.Ref{}, false
	}
	parent := ParentOf(pg)
	if parent == "" {
		return ident.Ref{}, false
	}
	cpg, err := comp.Lister.CompositePodGroups(leaf.Namespace).Get(parent)
	if err != nil || !IsGang(cpg) {
		return ident.Ref{}, false
	}
	return ident.Ref{Source: ident.SourceComposite, Namespace: leaf.Namespace, Name: parent}, true
}

// RefOf returns the gang a pod belongs to (false for pods outside gangs and
// for pods whose gang annotations are invalid).
func (d *Directory) RefOf(pod *v1.Pod) (ident.Ref, bool) {
	ref, _, ok, err := d.Resolve(pod)
	return ref, ok && err == nil
}

// GangOf returns a pod's gang and its definition. ok is false for pods
// outside gangs; err is set when the group object is missing (NotFound) —
// for an implicit gang it is being made, outside the scheduling cycle — or
// the pod's gang annotations are invalid. It never writes to the API: the
// queue sort, PreEnqueue, PreFilter and Filter call it.
func (d *Directory) GangOf(pod *v1.Pod) (ref ident.Ref, spec *gangspec.Spec, ok bool, err error) {
	ref, _, ok, err = d.Resolve(pod)
	if !ok || err != nil {
		return ref, nil, ok, err
	}
	spec, err = d.Spec(ref)
	return ref, spec, true, err
}

// Spec returns the gang's definition; a NotFound error when its group object
// does not exist (yet), or its API is not served.
func (d *Directory) Spec(ref ident.Ref) (*gangspec.Spec, error) {
	spec, err := d.adapter(ref.Source).Spec(ref.Namespace, ref.Name)
	if err != nil {
		return nil, err
	}
	d.addSubGroups(spec)
	return spec, nil
}

// SpecOf reads a group object any adapter's informer delivered.
func (d *Directory) SpecOf(obj any) *gangspec.Spec {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	for _, source := range []ident.Source{ident.SourcePodGroup, ident.SourceWorkload, ident.SourceComposite} {
		if s := d.adapter(source).SpecOf(obj); s != nil {
			d.addSubGroups(s)
			return s
		}
	}
	return nil
}

// adapter reads the gangs of a source.
func (d *Directory) adapter(source ident.Source) Adapter {
	switch source {
	case ident.SourceWorkload:
		if up := d.upstream.Load(); up != nil {
			return *up
		}
		return Upstream{}
	case ident.SourceComposite:
		if c := d.composites.Load(); c != nil {
			return *c
		}
		return Composites{}
	}
	return d.podGroups
}

// addSubGroups reads a gang's sub-group annotations: on its group object,
// else on its members' pod template (operators that make the PodGroup
// themselves copy nothing of ours onto it). Invalid ones are kept as an
// error the planner reports.
func (d *Directory) addSubGroups(spec *gangspec.Spec) {
	if spec.SubGroups != nil {
		return
	}
	d.mu.Lock()
	podAnnotations := d.memberAnnotations[spec.Ref]
	d.mu.Unlock()
	sg, err := SubGroupsByRank(spec.Annotations, podAnnotations, spec.MinMember)
	if err != nil {
		sg = &gangspec.SubGroups{Err: err.Error()}
	}
	spec.SubGroups = sg
}

// NoteMember keeps a member's annotations when they declare sub-groups.
func (d *Directory) NoteMember(ref ident.Ref, pod *v1.Pod) {
	if pod.Annotations[phalanxv1alpha1.SubGroupSizeAnnotation] == "" {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.memberAnnotations[ref]; !ok {
		d.memberAnnotations[ref] = pod.Annotations
	}
}

// Forget drops what the directory keeps of a gang whose group object went.
func (d *Directory) Forget(ref ident.Ref) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.memberAnnotations, ref)
}

// Tracked counts what the directory keeps per gang, for tests that check
// nothing outlives its gang.
func (d *Directory) Tracked() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.memberAnnotations)
}

func (d *Directory) indexByGang(obj any) ([]string, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return nil, nil
	}
	if ref, _, ok, err := d.leafRef(pod); ok && err == nil {
		return []string{ref.String()}, nil
	}
	return nil, nil
}

func indexByDependency(obj any) ([]string, error) {
	pg, ok := obj.(*pgv1alpha1.PodGroup)
	if !ok {
		return nil, nil
	}
	spec := gangspec.SpecFromPodGroup(pg)
	var out []string
	for _, d := range spec.DependsOn() {
		out = append(out, pg.Namespace+"/"+d)
	}
	return out, nil
}

// Members lists the gang's pods known to the scheduler (terminal pods are
// not: the scheduler's pod informer drops them).
func (d *Directory) Members(ref ident.Ref) []*v1.Pod {
	if ref.Source == ident.SourceComposite {
		// The pods of its PodGroups: each names its own.
		var out []*v1.Pod
		if comp := d.composites.Load(); comp != nil {
			for _, child := range comp.Children(ref.Namespace, ref.Name) {
				out = append(out, d.Members(ident.Ref{Source: ident.SourceWorkload, Namespace: child.Namespace, Name: child.Name})...)
			}
		}
		return out
	}
	objs, err := d.podIndex.ByIndex(gangIndex, ref.String())
	if err != nil {
		return nil
	}
	pods := make([]*v1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*v1.Pod); ok {
			pods = append(pods, p)
		}
	}
	return pods
}

// Pending lists the gang's members that wait for a node: not bound, not
// reserved by this scheduler, not terminating, and free of scheduling gates
// (a gated member cannot be placed, so no plan counts on it).
func (d *Directory) Pending(ref ident.Ref) []*v1.Pod {
	placed := d.placed(ref)
	var out []*v1.Pod
	for _, m := range d.Members(ref) {
		if m.Spec.NodeName == "" && m.DeletionTimestamp == nil && len(m.Spec.SchedulingGates) == 0 && !placed.Has(m.UID) {
			out = append(out, m)
		}
	}
	return out
}

// Dependents lists the gangs (PodGroups of the same namespace) that depend
// on ref.
func (d *Directory) Dependents(ref ident.Ref) []ident.Ref {
	objs, err := d.pgIndexer.ByIndex(dependsOnIndex, ref.Namespace+"/"+ref.Name)
	if err != nil {
		return nil
	}
	var out []ident.Ref
	for _, o := range objs {
		if pg, ok := o.(*pgv1alpha1.PodGroup); ok {
			out = append(out, ident.Ref{Namespace: pg.Namespace, Name: pg.Name})
		}
	}
	return out
}

// DependentsOfPodGroup lists the gangs that depend on ref without an index
// lookup for other sources: only scheduler-plugins PodGroups (and the
// implicit ones phalanx makes) carry the depends-on annotation.
func (d *Directory) DependentsOfPodGroup(ref ident.Ref) []ident.Ref {
	if ref.Source != ident.SourcePodGroup {
		return nil
	}
	return d.Dependents(ref)
}

// DependencyProgress counts a dependency's members running (from the
// informer, which is fresh) or succeeded (from the group's status: the
// scheduler does not watch finished pods), against its quorum.
func (d *Directory) DependencyProgress(dep *gangspec.Spec) (done, need int) {
	if dep.Finished {
		return dep.MinMember, dep.MinMember
	}
	running := 0
	for _, m := range d.Members(dep.Ref) {
		if m.Status.Phase == v1.PodRunning {
			running++
		}
	}
	return max(running, dep.Running) + dep.Succeeded, dep.MinMember
}

// PodGroups is the adapter of scheduler-plugins PodGroups.
func (d *Directory) PodGroups() PodGroups { return d.podGroups }
