package side

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/phalanx-sched/phalanx/internal/bench"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// rawBind binds the pass's pods, RawBindWorkers at a time, round robin over
// the workload's nodes, and times it from the first request to the last
// bind the watch sees.
func rawBind(ctx context.Context, c *testcluster.Cluster, w bench.Workload, ns string, watch *bindWatch, pass Pass) (Pass, error) {
	start := time.Now()
	next := atomic.Int64{}
	errs := make(chan error, bench.RawBindWorkers)
	for range bench.RawBindWorkers {
		go func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= pass.Pods {
					errs <- nil
					return
				}
				binding := &v1.Binding{
					ObjectMeta: metav1.ObjectMeta{Name: w.PodName(i), Namespace: ns},
					Target:     v1.ObjectReference{Kind: "Node", Name: w.Node(i % w.Nodes).Name},
				}
				if err := c.Client.CoreV1().Pods(ns).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("binding %s: %w", binding.Name, err)
					return
				}
			}
		}()
	}
	for range bench.RawBindWorkers {
		if err := <-errs; err != nil {
			return pass, err
		}
	}
	select {
	case <-watch.done:
	case <-time.After(PassTimeout):
		pass.Failed = fmt.Sprintf("%d of %d binds seen after %v", watch.bound.Load(), pass.Pods, PassTimeout)
		return pass, errPassTimeout
	case <-ctx.Done():
		return pass, ctx.Err()
	}
	_, last := watch.span()
	pass.Seconds = last.Sub(start).Seconds()
	pass.EndToEnd = pass.Seconds
	return pass, nil
}

// bindWatch counts binds of a namespace's pods through an informer, which
// costs the shared API server far less than polling lists.
type bindWatch struct {
	bound  atomic.Int64
	done   chan struct{}
	stopCh chan struct{}
	mu     sync.Mutex
	seen   map[types.UID]bool
	lastAt time.Time
	// firstAt is the first bind: a scheduler may bind before /readyz says
	// it is ready.
	firstAt time.Time
}

func watchBinds(ctx context.Context, c *testcluster.Cluster, ns string, total int) (*bindWatch, error) {
	bw := &bindWatch{done: make(chan struct{}), stopCh: make(chan struct{}), seen: map[types.UID]bool{}}
	factory := informers.NewSharedInformerFactoryWithOptions(c.Client, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	observe := func(obj any) {
		pod, ok := obj.(*v1.Pod)
		if !ok || pod.Spec.NodeName == "" {
			return
		}
		bw.mu.Lock()
		defer bw.mu.Unlock()
		if bw.seen[pod.UID] {
			return
		}
		bw.seen[pod.UID] = true
		bw.lastAt = time.Now()
		if bw.firstAt.IsZero() {
			bw.firstAt = bw.lastAt
		}
		if int(bw.bound.Add(1)) == total {
			close(bw.done)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, n any) { observe(n) },
	}); err != nil {
		return nil, err
	}
	factory.Start(bw.stopCh)
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
		close(bw.stopCh)
		return nil, fmt.Errorf("pod informer of %s did not sync", ns)
	}
	return bw, nil
}

func (bw *bindWatch) span() (first, last time.Time) {
	bw.mu.Lock()
	defer bw.mu.Unlock()
	return bw.firstAt, bw.lastAt
}

func (bw *bindWatch) stop() { close(bw.stopCh) }
