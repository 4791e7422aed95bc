package gangs

import (
	"context"
	"time"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/phalanx-sched/phalanx/internal/informersync"
	"github.com/phalanx-sched/phalanx/internal/served"
	"github.com/phalanx-sched/phalanx/internal/workload"
)

// WorkloadAPIRecheck is how often the scheduler asks the API server whether
// it serves the Workload API (scheduling.k8s.io/v1beta1 PodGroups, and the
// v1alpha3 CompositePodGroups): an operator may turn it on (or off) while
// phalanx runs. --api-discovery-interval sets it.
var WorkloadAPIRecheck = 30 * time.Second

// parentIndex indexes upstream PodGroups by their CompositePodGroup.
const parentIndex = "phalanx.parent"

// workloadAPI reads the Workload API while the API server serves it: its
// informers (PodGroups, and Workloads and CompositePodGroups where served)
// run from the first look that finds it until a look that finds something
// else (served.Follower). They are the runtime's own (not the scheduler's
// shared factory), so they can stop.
type workloadAPI struct {
	g        *Gangs
	follower *served.Follower
	// stop ends the informers; nil while the API is not read. Only apply,
	// under the follower's lock, touches it.
	stop context.CancelFunc
}

func newWorkloadAPI(g *Gangs) *workloadAPI {
	w := &workloadAPI{g: g}
	w.follower = &served.Follower{Served: g.host.Served, Apply: w.apply}
	return w
}

// run looks again every WorkloadAPIRecheck until ctx ends.
func (w *workloadAPI) run(ctx context.Context) { w.follower.Run(ctx, WorkloadAPIRecheck) }

// check starts, restarts or stops reading the Workload API to match what
// the API server serves now.
func (w *workloadAPI) check(ctx context.Context) { w.follower.Check(ctx) }

// apply stops what is read and starts reading what is served now.
func (w *workloadAPI) apply(ctx context.Context, _, want served.WorkloadAPI) bool {
	logger := klog.FromContext(ctx)
	if w.stop != nil {
		w.stop()
		w.stop = nil
		w.g.ServeWorkloadAPI(nil, nil)
	}
	if !want.PodGroups {
		logger.Info("The API server no longer serves the Workload API; pods naming its PodGroups wait until it does again")
		return true
	}
	if err := w.start(ctx, want); err != nil {
		logger.Error(err, "Reading the Workload API; retrying", "retryIn", WorkloadAPIRecheck)
		return false
	}
	logger.Info("Reading gangs from the Workload API (scheduling.k8s.io/v1beta1 PodGroups)", "workloads", want.Workloads, "compositePodGroups", want.Composites)
	return true
}

func (w *workloadAPI) start(ctx context.Context, want served.WorkloadAPI) error {
	fw := w.g.fw
	ictx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(fw.Client, 0, informers.WithTransform(informersync.TrimManagedFields))
	pgInformer := factory.Scheduling().V1beta1().PodGroups()
	if err := pgInformer.Informer().AddIndexers(cache.Indexers{parentIndex: indexByParent}); err != nil {
		cancel()
		return err
	}
	up := &workload.Upstream{PodGroups: pgInformer.Lister()}
	if want.Workloads {
		up.Workloads = factory.Scheduling().V1beta1().Workloads().Lister()
	}
	var comp *workload.Composites
	var cpgInformer cache.SharedIndexInformer
	if want.Composites {
		inf := factory.Scheduling().V1alpha3().CompositePodGroups()
		cpgInformer = inf.Informer()
		indexer := pgInformer.Informer().GetIndexer()
		comp = &workload.Composites{Lister: inf.Lister(), Children: func(namespace, parent string) []*schedulingv1beta1.PodGroup {
			objs, _ := indexer.ByIndex(parentIndex, namespace+"/"+parent)
			out := make([]*schedulingv1beta1.PodGroup, 0, len(objs))
			for _, o := range objs {
				if pg, ok := o.(*schedulingv1beta1.PodGroup); ok {
					out = append(out, pg)
				}
			}
			return out
		}}
	}
	if _, err := pgInformer.Informer().AddEventHandler(w.g.groupEvents); err != nil {
		cancel()
		return err
	}
	if cpgInformer != nil {
		if _, err := cpgInformer.AddEventHandler(w.g.groupEvents); err != nil {
			cancel()
			return err
		}
	}
	// Readers see the adapters before their informers deliver anything:
	// each add wakes the pods that waited for that group (onGroup), and
	// they must then find it.
	w.g.ServeWorkloadAPI(up, comp)
	err := informersync.StartAndWait(ictx, "the Workload API", factory.Start, func(stop <-chan struct{}) []string {
		return informersync.Unsynced(factory.WaitForCacheSync(stop))
	})
	if err != nil {
		w.g.ServeWorkloadAPI(nil, nil)
		cancel()
		factory.Shutdown()
		return err
	}
	w.stop = func() {
		cancel()
		factory.Shutdown()
	}
	return nil
}

func indexByParent(obj any) ([]string, error) {
	pg, ok := obj.(*schedulingv1beta1.PodGroup)
	if !ok {
		return nil, nil
	}
	if p := workload.ParentOf(pg); p != "" {
		return []string{pg.Namespace + "/" + p}, nil
	}
	return nil, nil
}
