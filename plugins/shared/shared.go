// Package shared holds the state that phalanx plugins share inside one
// scheduler process: CRD informers, the gang manager and the status writer.
// Every profile and plugin gets the same instance, so there is one view of the
// cluster and one set of holds.
package shared

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pgclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	pginformers "sigs.k8s.io/scheduler-plugins/pkg/generated/informers/externalversions"
	pglisters "sigs.k8s.io/scheduler-plugins/pkg/generated/listers/scheduling/v1alpha1"

	"github.com/phalanx-sched/phalanx/internal/gang"
)

// PodGroupLabel is the label by which a pod joins a gang.
const PodGroupLabel = pgv1alpha1.PodGroupLabel

// gangIndex indexes pods by "namespace/podgroup".
const gangIndex = "phalanx.gang"

// syncTimeout bounds the wait for CRD informers at start.
const syncTimeout = time.Minute

// State is the per-process state shared by the phalanx plugins.
type State struct {
	Gangs     *gang.Manager
	PodGroups pglisters.PodGroupLister
	PGClient  pgclientset.Interface
	Pods      corelisters.PodLister
	Status    *StatusWriter

	podIndexer cache.Indexer

	mu         sync.Mutex
	onCapacity []func()
	onPodGroup []func(*pgv1alpha1.PodGroup)
	topology   Topology
	queueOrder QueueOrder
	limiter    NodeLimiter
}

var (
	registryMu sync.Mutex
	registry   = map[*rest.Config]*State{}
)

// Get returns the State of the scheduler that owns h, creating and syncing it
// on first use. It fails with a clear message when a required CRD is missing.
func Get(ctx context.Context, h fwk.Handle) (*State, error) {
	registryMu.Lock()
	defer registryMu.Unlock()
	cfg := h.KubeConfig()
	if s, ok := registry[cfg]; ok {
		return s, nil
	}
	s, err := newState(ctx, h)
	if err != nil {
		return nil, err
	}
	registry[cfg] = s
	go func() {
		<-ctx.Done()
		registryMu.Lock()
		delete(registry, cfg)
		registryMu.Unlock()
	}()
	return s, nil
}

// CRDConfig returns a copy of the scheduler's client config that speaks JSON,
// as custom resources require.
func CRDConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.ContentType = "application/json"
	c.AcceptContentTypes = "application/json"
	return c
}

// RequireAPI fails unless the API server serves the resource in groupVersion.
func RequireAPI(cfg *rest.Config, groupVersion, resource string) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	list, err := dc.ServerResourcesForGroupVersion(groupVersion)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("the API server does not serve %s %s: install the CRDs (kubectl apply -f manifests/crds)", groupVersion, resource)
		}
		return fmt.Errorf("discovering %s: %w", groupVersion, err)
	}
	for _, r := range list.APIResources {
		if r.Name == resource {
			return nil
		}
	}
	return fmt.Errorf("the API server does not serve %s %s: install the CRDs (kubectl apply -f manifests/crds)", groupVersion, resource)
}

func newState(ctx context.Context, h fwk.Handle) (*State, error) {
	logger := klog.FromContext(ctx)
	cfg := CRDConfig(h.KubeConfig())
	if err := RequireAPI(cfg, pgv1alpha1.SchemeGroupVersion.String(), "podgroups"); err != nil {
		return nil, err
	}
	client, err := pgclientset.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	factory := pginformers.NewSharedInformerFactory(client, 0)
	pgInformer := factory.Scheduling().V1alpha1().PodGroups()

	podInformer := h.SharedInformerFactory().Core().V1().Pods()
	if err := podInformer.Informer().AddIndexers(cache.Indexers{gangIndex: indexByGang}); err != nil {
		return nil, fmt.Errorf("indexing pods by gang: %w", err)
	}

	s := &State{
		Gangs:      gang.NewManager(nil),
		PodGroups:  pgInformer.Lister(),
		PGClient:   client,
		Pods:       podInformer.Lister(),
		podIndexer: podInformer.Informer().GetIndexer(),
	}
	s.Status = NewStatusWriter(client, h.EventRecorder())
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) { s.onPodUpdate(oldObj, newObj) },
		DeleteFunc: s.onPodDelete,
	}); err != nil {
		return nil, err
	}
	if _, err := h.SharedInformerFactory().Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.Gangs.Bump(); s.CapacityFreed() },
		UpdateFunc: s.onNodeUpdate,
		DeleteFunc: func(any) { s.Gangs.Bump() },
	}); err != nil {
		return nil, err
	}
	if _, err := pgInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    s.podGroupChanged,
		UpdateFunc: func(_, newObj any) { s.podGroupChanged(newObj) },
		DeleteFunc: s.onPodGroupDelete,
	}); err != nil {
		return nil, err
	}

	factory.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	for typ, ok := range factory.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			return nil, fmt.Errorf("informer for %v did not sync within %v", typ, syncTimeout)
		}
	}
	go s.Status.Run(ctx)
	logger.V(2).Info("phalanx shared state ready")
	return s, nil
}

func indexByGang(obj any) ([]string, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return nil, nil
	}
	if name := pod.Labels[PodGroupLabel]; name != "" {
		return []string{pod.Namespace + "/" + name}, nil
	}
	return nil, nil
}

// GangKey returns "namespace/podgroup" for a gang member, "" otherwise.
func GangKey(pod *v1.Pod) string {
	if name := pod.Labels[PodGroupLabel]; name != "" {
		return pod.Namespace + "/" + name
	}
	return ""
}

// Members lists the pods of a gang known to the scheduler (terminal pods are
// not: the scheduler's pod informer drops them).
func (s *State) Members(key string) []*v1.Pod {
	objs, err := s.podIndexer.ByIndex(gangIndex, key)
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

// PodGroup returns the gang's PodGroup.
func (s *State) PodGroup(key string) (*pgv1alpha1.PodGroup, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, err
	}
	return s.PodGroups.PodGroups(ns).Get(name)
}

// OnCapacityFreed registers a callback for when capacity may have been freed:
// a pod left a node, or a gang's holds were dropped.
func (s *State) OnCapacityFreed(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onCapacity = append(s.onCapacity, f)
}

// OnPodGroupChange registers a callback for PodGroups added or updated, run
// once this process's lister has them (the scheduler's own event for the same
// change may come first, while the lister is still stale).
func (s *State) OnPodGroupChange(f func(*pgv1alpha1.PodGroup)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onPodGroup = append(s.onPodGroup, f)
}

func (s *State) podGroupChanged(obj any) {
	pg, ok := obj.(*pgv1alpha1.PodGroup)
	if !ok {
		return
	}
	s.mu.Lock()
	fs := append([]func(*pgv1alpha1.PodGroup){}, s.onPodGroup...)
	s.mu.Unlock()
	for _, f := range fs {
		f(pg)
	}
}

// CapacityFreed runs the registered callbacks.
func (s *State) CapacityFreed() {
	s.mu.Lock()
	fs := append([]func(){}, s.onCapacity...)
	s.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

func (s *State) onPodUpdate(oldObj, newObj any) {
	oldPod, ok1 := oldObj.(*v1.Pod)
	newPod, ok2 := newObj.(*v1.Pod)
	if !ok1 || !ok2 {
		return
	}
	// A bound member is now counted from the informer; its reservation is done.
	if oldPod.Spec.NodeName == "" && newPod.Spec.NodeName != "" {
		if key := GangKey(newPod); key != "" {
			s.Gangs.Bound(key, newPod.UID)
		}
	}
}

func (s *State) onPodDelete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	if key := GangKey(pod); key != "" {
		s.Gangs.Bound(key, pod.UID)
	}
	if pod.Spec.NodeName != "" {
		s.Gangs.Bump()
		s.CapacityFreed()
	}
}

func (s *State) onNodeUpdate(oldObj, newObj any) {
	oldNode, ok1 := oldObj.(*v1.Node)
	newNode, ok2 := newObj.(*v1.Node)
	if !ok1 || !ok2 {
		return
	}
	if oldNode.Spec.Unschedulable != newNode.Spec.Unschedulable ||
		!equality.Semantic.DeepEqual(oldNode.Status.Allocatable, newNode.Status.Allocatable) ||
		!equality.Semantic.DeepEqual(oldNode.Labels, newNode.Labels) ||
		!equality.Semantic.DeepEqual(oldNode.Spec.Taints, newNode.Spec.Taints) {
		s.Gangs.Bump()
		s.CapacityFreed()
	}
}

func (s *State) onPodGroupDelete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if pg, ok := obj.(*pgv1alpha1.PodGroup); ok {
		key := pg.Namespace + "/" + pg.Name
		s.Gangs.Forget(key)
		s.Status.Forget(types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name})
		s.CapacityFreed()
	}
}
