package runtime

import (
	"context"
	"sync"
	"time"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/klog/v2"

	"github.com/phalanx-sched/phalanx/internal/workload"
)

// WorkloadAPIRecheck is how often the scheduler asks the API server whether
// it serves the Workload API (scheduling.k8s.io/v1beta1 PodGroups): an
// operator may turn the API on (or off) while phalanx runs.
var WorkloadAPIRecheck = 30 * time.Second

// workloadAPI reads the Workload API while the API server serves it: its
// informers (PodGroups, and Workloads where served) run from the first look
// that finds it until a look that no longer does. They are the runtime's own
// (not the scheduler's shared factory), so they can stop.
type workloadAPI struct {
	g *Gangs

	mu sync.Mutex
	// stop ends the informers; nil while the API is not read.
	stop context.CancelFunc
}

func newWorkloadAPI(g *Gangs) *workloadAPI { return &workloadAPI{g: g} }

// run looks again every WorkloadAPIRecheck until ctx ends.
func (w *workloadAPI) run(ctx context.Context) {
	wait.UntilWithContext(ctx, w.check, WorkloadAPIRecheck)
}

// check starts or stops reading the Workload API to match what the API
// server serves now. A discovery error changes nothing.
func (w *workloadAPI) check(ctx context.Context) {
	logger := klog.FromContext(ctx)
	served := w.g.rt.clients.Served
	gv := schedulingv1beta1.SchemeGroupVersion.String()
	podGroups, err := served(gv, "podgroups")
	if err != nil {
		logger.V(2).Info("Could not tell whether the Workload API is served; keeping what was found before", "err", err)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case podGroups && w.stop == nil:
		workloads, _ := served(gv, "workloads")
		if err := w.startLocked(ctx, workloads); err != nil {
			logger.Error(err, "Reading the Workload API; retrying", "retryIn", WorkloadAPIRecheck)
			return
		}
		logger.Info("Reading gangs from the Workload API (scheduling.k8s.io/v1beta1 PodGroups)", "workloads", workloads)
	case !podGroups && w.stop != nil:
		w.stop()
		w.stop = nil
		w.g.upstream.Store(nil)
		logger.Info("The API server no longer serves the Workload API; pods naming its PodGroups wait until it does again")
	}
}

func (w *workloadAPI) startLocked(ctx context.Context, workloads bool) error {
	fw := w.g.fw
	ictx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(fw.Client, 0, informers.WithTransform(trimManagedFields))
	pgInformer := factory.Scheduling().V1beta1().PodGroups()
	up := &workload.Upstream{PodGroups: pgInformer.Lister()}
	if workloads {
		up.Workloads = factory.Scheduling().V1beta1().Workloads().Lister()
	}
	if _, err := pgInformer.Informer().AddEventHandler(w.g.groupEvents); err != nil {
		cancel()
		return err
	}
	// Readers see the adapter before its informer delivers anything: each
	// add wakes the pods that waited for that PodGroup (onGroup), and they
	// must then find it.
	w.g.upstream.Store(up)
	err := startAndSync(ictx, "the Workload API", factory.Start, func(stop <-chan struct{}) []string {
		return unsynced(factory.WaitForCacheSync(stop))
	})
	if err != nil {
		w.g.upstream.Store(nil)
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
