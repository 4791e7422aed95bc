package controller

import (
	"context"
	"github.com/phalanx-sched/phalanx/internal/served"

	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// Options configure the controller manager.
type Options struct {
	LeaderElect      bool
	LeaderElectionNS string
	MetricsAddr      string // "0" disables
	HealthProbeAddr  string // "0" disables
	LeaderElectionID string
	// DefaultQueue is the queue of pods that name none (as in CapacityQueueArgs).
	DefaultQueue string
	// UsageHalfLife turns decayed fair share on, as CapacityQueueArgs'
	// usageHalfLifeSeconds does in the scheduler (0: off).
	UsageHalfLife time.Duration
	// Repeatable allows several managers in one process one after another
	// (the test harness); controller-runtime otherwise rejects reused names.
	Repeatable bool
	// SkipDevices leaves DRA devices out of Queue.status (the scheduler
	// counts them either way); by default they are counted as the
	// scheduler counts them, where the API server serves ResourceClaims.
	SkipDevices bool
	// WorkloadAPIRecheck is how often discovery is asked whether the
	// Workload API is served (0: every 30 s).
	WorkloadAPIRecheck time.Duration
}

// Scheme knows core, PodGroup and phalanx types.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(pgv1alpha1.AddToScheme(s))
	utilruntime.Must(phalanxv1alpha1.AddToScheme(s))
	return s
}

// NewManager builds the controller manager with every reconciler registered.
func NewManager(cfg *rest.Config, o Options) (ctrl.Manager, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = "application/json"
	id := o.LeaderElectionID
	if id == "" {
		id = "phalanx-controller"
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  Scheme(),
		LeaderElection:          o.LeaderElect,
		LeaderElectionID:        id,
		LeaderElectionNamespace: o.LeaderElectionNS,
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:  o.HealthProbeAddr,
		Controller:              ctrlconfig.Controller{SkipNameValidation: &o.Repeatable},
	})
	if err != nil {
		return nil, err
	}
	if err := SetupPodGroups(mgr); err != nil {
		return nil, err
	}
	// Queue shares depend on every pod (each pod is in a queue), so the
	// cache holds all pods; the updater keeps the scheduler's accounting
	// (internal/queue.Cache) from their watch events.
	defaultQueue := o.DefaultQueue
	if defaultQueue == "" {
		defaultQueue = phalanxv1alpha1.DefaultQueueName
	}
	// DRA (resource.k8s.io/v1), where served: claims' devices count in
	// queues, as in the scheduler.
	dra := !o.SkipDevices && servedKind(mgr.GetRESTMapper(), resourceapi.SchemeGroupVersion.WithKind("ResourceClaim"))
	if dra {
		if err := indexClaims(mgr); err != nil {
			return nil, err
		}
	}
	// Queue positions, where the QueuePositions CRD is installed (an older
	// install lacks it: say so once, and keep the rest working).
	positions := servedKind(mgr.GetRESTMapper(), phalanxv1alpha1.SchemeGroupVersion.WithKind("QueuePositions"))
	if !positions {
		ctrl.Log.WithName("setup").Info("The API server does not serve QueuePositions (scheduling.phalanx.dev/v1alpha1): queue positions are not written; apply manifests/crds to get them")
	}
	if err := mgr.Add(&QueueStatusUpdater{Client: mgr.GetClient(), Cache: mgr.GetCache(), DefaultQueue: defaultQueue, MinInterval: 500 * time.Millisecond,
		UsageHalfLife: o.UsageHalfLife,
		// The upstream Workload API (beta in 1.37 but off by default) is
		// watched while the API server serves it, as in the scheduler.
		Served:             served.For(cfg),
		WorkloadAPIRecheck: o.WorkloadAPIRecheck,
		DRA:                dra,
		Positions:          positions}); err != nil {
		return nil, err
	}
	if o.HealthProbeAddr != "0" && o.HealthProbeAddr != "" {
		if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
			return nil, err
		}
		if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}

// servedKind reports whether the API server serves a kind (discovery through
// the manager's REST mapper). A failure other than "not served" is logged
// once and counts as not served.
func servedKind(mapper meta.RESTMapper, gvk schema.GroupVersionKind) bool {
	_, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil && !meta.IsNoMatchError(err) {
		ctrl.Log.WithName("setup").Info("Could not tell whether the API server serves a kind; it is not watched", "kind", gvk.String(), "err", err.Error())
	}
	return err == nil
}

// Run builds the manager and runs it until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, o Options) error {
	mgr, err := NewManager(cfg, o)
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}
