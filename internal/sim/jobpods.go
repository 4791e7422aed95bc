package sim

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// jobPods is the replay's view of the jobs' pods, kept by one informer. A
// sample reads its cache: listing every pod from the API server at each
// 100 ms sample cost the machine the scheduler under test runs on a tenth
// of its CPU on the 512-node trace (the list, its decoding on both sides,
// and the garbage). It also remembers the pods deleted before they
// completed, which the replay resubmits as a training operator would: a
// pod missing from a cache may merely not have arrived yet.
type jobPods struct {
	lister corelisters.PodLister
	mu     sync.Mutex
	// evicted: namespace/name of the pods deleted before they succeeded,
	// not yet resubmitted.
	evicted map[string]*v1.Pod
}

// startJobPods runs the informer until ctx ends, feeding watch too when
// set, and waits for its first list.
func startJobPods(ctx context.Context, client kubernetes.Interface, watch *quorumWatch) *jobPods {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = jobLabel
	}))
	pods := factory.Core().V1().Pods()
	j := &jobPods{lister: pods.Lister(), evicted: map[string]*v1.Pod{}}
	inf := pods.Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: j.deleted})
	if watch != nil {
		_, _ = inf.AddEventHandler(watch.handler())
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return j
}

func (j *jobPods) deleted(obj any) {
	p, ok := finalState(obj).(*v1.Pod)
	if !ok || p.Status.Phase == v1.PodSucceeded {
		return
	}
	j.mu.Lock()
	j.evicted[p.Namespace+"/"+p.Name] = p
	j.mu.Unlock()
}

// list returns the cached pods; they are shared, never to be changed.
func (j *jobPods) list() ([]*v1.Pod, error) {
	return j.lister.List(labels.Everything())
}

// takeEvicted returns the pods deleted before they succeeded since the last
// call.
func (j *jobPods) takeEvicted() map[string]*v1.Pod {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := j.evicted
	j.evicted = map[string]*v1.Pod{}
	return out
}

// finalState unwraps a deletion the informer learned of from a relist.
func finalState(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}
