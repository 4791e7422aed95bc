// Package apifollow reads the upstream Workload API (scheduling.k8s.io
// v1beta1 PodGroups and Workloads, v1alpha3 CompositePodGroups) while the
// API server serves it, and publishes its adapters to the gang directory.
package apifollow

import (
	"context"
	"time"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/phalanx-sched/phalanx/internal/informersync"
	"github.com/phalanx-sched/phalanx/internal/served"
	"github.com/phalanx-sched/phalanx/internal/workload"
)

// Recheck is how often the scheduler asks the API server whether it serves
// the Workload API: an operator may turn it on (or off) while phalanx runs.
// --api-discovery-interval sets it.
var Recheck = 30 * time.Second

// parentIndex indexes upstream PodGroups by their CompositePodGroup.
const parentIndex = "phalanx.parent"

// Ports are what the follower takes from the process.
type Ports struct {
	Client kubernetes.Interface
	Served served.Func
	// Transform trims the objects the informers cache.
	Transform cache.TransformFunc
	// Publish hands the directory the adapters to read, or nil, nil to
	// withdraw them (workload.Directory.ServeWorkloadAPI).
	Publish func(*workload.Upstream, *workload.Composites)
	// Events handles the groups' events (PodGroups, CompositePodGroups).
	Events cache.ResourceEventHandler
}

// Follower reads the Workload API while the API server serves it: its
// informers (PodGroups, and Workloads and CompositePodGroups where served)
// run from the first look that finds it until a look that finds something
// else (served.Follower). They are its own (not the scheduler's shared
// factory), so they can stop.
type Follower struct {
	p        Ports
	follower *served.Follower
	// stop ends the informers; nil while the API is not read. Only apply,
	// under the follower's lock, touches it.
	stop context.CancelFunc
}

// New returns a follower that has read nothing yet.
func New(p Ports) *Follower {
	f := &Follower{p: p}
	f.follower = &served.Follower{Served: p.Served, Apply: f.apply}
	return f
}

// Run looks again every Recheck until ctx ends.
func (f *Follower) Run(ctx context.Context) { f.follower.Run(ctx, Recheck) }

// Check starts, restarts or stops reading the Workload API to match what
// the API server serves now.
func (f *Follower) Check(ctx context.Context) { f.follower.Check(ctx) }

// apply stops what is read and starts reading what is served now.
func (f *Follower) apply(ctx context.Context, _, want served.WorkloadAPI) bool {
	logger := klog.FromContext(ctx)
	if f.stop != nil {
		f.stop()
		f.stop = nil
		f.p.Publish(nil, nil)
	}
	if !want.PodGroups {
		logger.Info("The API server no longer serves the Workload API; pods naming its PodGroups wait until it does again")
		return true
	}
	if err := f.start(ctx, want); err != nil {
		logger.Error(err, "Reading the Workload API; retrying", "retryIn", Recheck)
		return false
	}
	logger.Info("Reading gangs from the Workload API (scheduling.k8s.io/v1beta1 PodGroups)", "workloads", want.Workloads, "compositePodGroups", want.Composites)
	return true
}

func (f *Follower) start(ctx context.Context, want served.WorkloadAPI) error {
	ictx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(f.p.Client, 0, informers.WithTransform(f.p.Transform))
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
	if _, err := pgInformer.Informer().AddEventHandler(f.p.Events); err != nil {
		cancel()
		return err
	}
	if cpgInformer != nil {
		if _, err := cpgInformer.AddEventHandler(f.p.Events); err != nil {
			cancel()
			return err
		}
	}
	// Readers see the adapters before their informers deliver anything:
	// each add wakes the pods that waited for that group, and they must
	// then find it.
	f.p.Publish(up, comp)
	err := informersync.StartAndWait(ictx, "the Workload API", factory.Start, func(stop <-chan struct{}) []string {
		return informersync.Unsynced(factory.WaitForCacheSync(stop))
	})
	if err != nil {
		f.p.Publish(nil, nil)
		cancel()
		factory.Shutdown()
		return err
	}
	f.stop = func() {
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
