package runtime_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	nrtv1alpha2 "github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/apis/topology/v1alpha2"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/plugins/internal/plugintest"
	"github.com/phalanx-sched/phalanx/plugins/internal/ports"
	"github.com/phalanx-sched/phalanx/plugins/runtime"
)

// TestDeferredSyncsListTogether: built as the binary builds them (DeferSyncs,
// then AwaitSyncs), the parts' informers list together rather than one
// after another, and each part's post-sync step reads its synced lister.
// The Queues list is held until the NodeResourceTopology list has begun;
// a part that waited for its own sync before returning would hold it the
// whole time.
func TestDeferredSyncsListTogether(t *testing.T) {
	nrtListed := make(chan struct{})
	var once sync.Once
	var together atomic.Bool
	objs := plugintest.Objects{
		DeferSyncs: true,
		Queues:     []*phalanxv1alpha1.Queue{{ObjectMeta: metav1.ObjectMeta{Name: "default"}}},
		OnList: func(resource string) {
			switch resource {
			case "noderesourcetopologies":
				once.Do(func() { close(nrtListed) })
			case "queues":
				select {
				case <-nrtListed:
					together.Store(true)
				case <-time.After(10 * time.Second):
				}
			}
		},
	}
	e := plugintest.New(t, objs, plugintest.Plugin{Name: "Parts", Extensions: []string{"PreFilter"},
		New: func(ctx context.Context, h fwk.Handle, rt *runtime.Runtime) (fwk.Plugin, error) {
			if _, err := rt.Queues(ports.Of(h), h.ProfileName(), runtime.QueueOptions{DefaultQueue: "default"}); err != nil {
				return nil, err
			}
			_, err := rt.NUMA(ports.Of(h))
			return plugintest.Parts{}, err
		}})
	if !together.Load() {
		t.Errorf("the Queues informer listed and synced before the NodeResourceTopology informer started: the parts' syncs ran one after another")
	}
	for _, a := range e.Phalanx.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "queues" {
			t.Errorf("the default queue was created although it existed: the post-sync step ran before the Queues informer synced")
		}
	}
}

// TestDeferredSyncsRunPostSyncSteps: a deferred part's post-sync step still
// runs, once the syncs are awaited (here: the missing default queue made).
func TestDeferredSyncsRunPostSyncSteps(t *testing.T) {
	e := plugintest.New(t, plugintest.Objects{DeferSyncs: true}, plugintest.Plugin{Name: "Parts", Extensions: []string{"PreFilter"},
		New: func(ctx context.Context, h fwk.Handle, rt *runtime.Runtime) (fwk.Plugin, error) {
			_, err := rt.Queues(ports.Of(h), h.ProfileName(), runtime.QueueOptions{DefaultQueue: "default"})
			return plugintest.Parts{}, err
		}})
	if _, err := e.Phalanx.SchedulingV1alpha1().Queues().Get(e.Ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("the default queue was not made after AwaitSyncs: %v", err)
	}
}

// TestCycleOnlySyncsListBesideTheScheduler: built as the binary builds it,
// the NodeResourceTopology list (read only by scheduling cycles) runs beside
// kube-scheduler's own informers rather than before them, and a reader that
// asks for a node's zones before that list is in waits for it instead of
// finding none. The NRT list is held until the pod list has begun; were it
// awaited before kube-scheduler's informers start, it would be held the
// whole time.
func TestCycleOnlySyncsListBesideTheScheduler(t *testing.T) {
	podsListed := make(chan struct{})
	var once sync.Once
	var beside atomic.Bool
	var numa atomic.Pointer[runtime.NUMA]
	early := make(chan bool, 1)
	objs := plugintest.Objects{
		DeferSyncs: true,
		Nodes:      []*v1.Node{plugintest.Node("zoned", "16", 4, nil)},
		NRTs: []*nrtv1alpha2.NodeResourceTopology{plugintest.NRT("zoned", "single-numa-node",
			plugintest.Zone{Name: "node-0", CPU: "8", GPUs: 2})},
		OnList: func(resource string) {
			switch resource {
			case "pods":
				once.Do(func() {
					// Asked before the NRT list is in: the answer must wait for it.
					go func() {
						zn, _, err := numa.Load().Zones("zoned")
						early <- zn != nil && err == nil
					}()
					close(podsListed)
				})
			case "noderesourcetopologies":
				select {
				case <-podsListed:
					beside.Store(true)
				case <-time.After(10 * time.Second):
				}
			}
		},
	}
	plugintest.New(t, objs, plugintest.Plugin{Name: "Parts", Extensions: []string{"PreFilter"},
		New: func(ctx context.Context, h fwk.Handle, rt *runtime.Runtime) (fwk.Plugin, error) {
			n, err := rt.NUMA(ports.Of(h))
			numa.Store(n)
			return plugintest.Parts{}, err
		}})
	if !beside.Load() {
		t.Errorf("the NodeResourceTopology list ran before the scheduler's pod list began: it was awaited before kube-scheduler's informers started")
	}
	select {
	case ok := <-early:
		if !ok {
			t.Errorf("zones asked for before the NodeResourceTopology list was in were not the node's: the reader did not wait for the list")
		}
	case <-time.After(10 * time.Second):
		t.Errorf("zones asked for before the NodeResourceTopology list was in never came")
	}
}
