// Package runtime is the state the phalanx plugins share inside one scheduler
// process, built once by the registry (plugins.Options) and handed to each
// plugin's factory: one informer owner per API group, the gang directory and
// lifecycle, the PodGroup status writer, the queue accounting, the network
// topology and the NUMA zone accounting. Every profile and plugin of the
// process uses the same instance, so there is one view of the cluster and one
// set of holds.
package runtime

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	nrtclientset "github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/generated/clientset/versioned"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pgclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	"github.com/phalanx-sched/phalanx/internal/informersync"
	"github.com/phalanx-sched/phalanx/internal/leadership"
	"github.com/phalanx-sched/phalanx/internal/metrics"
	"github.com/phalanx-sched/phalanx/internal/served"
	phalanxclientset "github.com/phalanx-sched/phalanx/pkg/generated/clientset/versioned"
	phalanxinformers "github.com/phalanx-sched/phalanx/pkg/generated/informers/externalversions"
	"github.com/phalanx-sched/phalanx/plugins/internal/ports"
	"github.com/phalanx-sched/phalanx/plugins/runtime/gangs"
)

// Clients are the runtime's clients of the custom resources, and how it
// asks the API server what it serves. Nil fields are made from the
// scheduler's own client config (tests pass fakes).
type Clients struct {
	PodGroups pgclientset.Interface
	Phalanx   phalanxclientset.Interface
	NRT       nrtclientset.Interface
	// Served reports whether the API server serves a resource.
	Served func(groupVersion, resource string) (bool, error)
	// Kube reads the scheduler's leader-election Lease (nil: the
	// scheduler's own client).
	Kube kubernetes.Interface
	// Dynamic reads workloads of other API groups (JobSet,
	// LeaderWorkerSet) whose startup policy can keep a gang from forming.
	Dynamic dynamic.Interface
}

// Runtime is the process-wide state of the phalanx plugins. Its parts are
// built on first use, by the first plugin that needs them, and then shared.
type Runtime struct {
	clock   clock.WithDelayedExecution
	clients Clients

	// ctx is the runtime's own: its informers and background work (status
	// writer, sweeper, implicit PodGroups, startup checks, nomination
	// clearing) run until it ends (Stop, or the end of the context New was
	// given).
	ctx    context.Context
	cancel context.CancelFunc

	// mu serialises building the parts; the parts themselves are read
	// without it (informer handlers run while a part is being built).
	mu sync.Mutex
	// fw are the framework's ports, set once by the first part built.
	fw     atomic.Pointer[ports.Framework]
	crdCfg *rest.Config

	gangs  atomic.Pointer[gangs.Gangs]
	queues atomic.Pointer[Queues]
	// queueProfiles are the profiles whose CapacityQueue was built: their
	// queue sort orders by queue share.
	queueProfiles sync.Map
	topology      atomic.Pointer[Topology]
	numa          atomic.Pointer[NUMA]

	// phalanxFactory is the one informer factory of the phalanx API group
	// (Queues, NetworkTopologies).
	phalanxFactory phalanxinformers.SharedInformerFactory

	// Leader tells whether this replica schedules (leader election) and
	// whether the scheduling loop has run.
	Leader *leadership.Leadership

	// podEvents fan the scheduler's pod events out to the parts.
	podEvents ports.PodEvents

	// syncs start the parts' informers and wait for their first lists.
	syncs *informersync.Syncs
}

// New returns an empty runtime whose background work runs until ctx ends or
// Stop is called; clk may be nil for the wall clock.
func New(ctx context.Context, clk clock.WithDelayedExecution) *Runtime {
	return NewWithClients(ctx, clk, Clients{})
}

// NewWithClients returns an empty runtime that uses the given clients.
func NewWithClients(ctx context.Context, clk clock.WithDelayedExecution, clients Clients) *Runtime {
	if clk == nil {
		clk = clock.RealClock{}
	}
	r := &Runtime{clock: clk, clients: clients}
	r.ctx, r.cancel = context.WithCancel(ctx)
	r.syncs = informersync.New(r.ctx)
	r.Leader = leadership.New(r.ctx, func() kubernetes.Interface {
		if fw := r.ports(); r.clients.Kube == nil && fw != nil {
			return fw.Client
		}
		return r.clients.Kube
	})
	return r
}

// Stop ends the runtime's informers and background work.
func (r *Runtime) Stop() { r.cancel() }

// Clock is the runtime's clock.
func (r *Runtime) Clock() clock.WithDelayedExecution { return r.clock }

// init records the framework's ports on first use. The first plugin's
// ports serve the whole process: clients, informers and the scheduling queue
// are shared by every profile. Callers hold r.mu.
func (r *Runtime) init(fw ports.Framework) error {
	if r.fw.Load() != nil {
		return nil
	}
	if cfg := fw.Config; cfg != nil {
		r.crdCfg = CRDConfig(cfg)
	}
	if r.clients.Dynamic == nil && r.crdCfg != nil {
		d, err := dynamic.NewForConfig(r.crdCfg)
		if err != nil {
			return err
		}
		r.clients.Dynamic = d
	}
	if r.clients.Served == nil {
		if r.crdCfg == nil {
			return fmt.Errorf("no client config to discover the API server's resources")
		}
		r.clients.Served = served.For(r.crdCfg)
	}
	if _, err := fw.Informers.Core().V1().Pods().Informer().AddEventHandler(r.podEvents.Handler()); err != nil {
		return err
	}
	r.fw.Store(&fw)
	return nil
}

// ports are the framework's ports; nil before the first part is built.
func (r *Runtime) ports() *ports.Framework { return r.fw.Load() }

// addPodHandler adds a handler of the scheduler's pod events.
func (r *Runtime) addPodHandler(h cache.ResourceEventHandler) { r.podEvents.Add(h) }

// Gangs returns the gang directory and lifecycle, building it on first use
// over the framework's ports (the first ports given serve the process). It
// fails with a clear message when the PodGroup CRD is not installed.
func (r *Runtime) Gangs(fw ports.Framework) (*gangs.Gangs, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.init(fw); err != nil {
		return nil, err
	}
	if r.gangs.Load() == nil {
		g, err := r.newGangs()
		if err != nil {
			return nil, err
		}
		r.gangs.Store(g)
	}
	return r.gangs.Load(), nil
}

// newGangs builds the gang part over the runtime. Callers hold r.mu.
func (r *Runtime) newGangs() (*gangs.Gangs, error) {
	if err := r.require(pgv1alpha1.SchemeGroupVersion.String(), "podgroups"); err != nil {
		return nil, err
	}
	pgClient := r.clients.PodGroups
	if pgClient == nil {
		c, err := pgclientset.NewForConfig(r.crdCfg)
		if err != nil {
			return nil, err
		}
		pgClient = c
	}
	return gangs.New(gangs.Host{Ctx: r.ctx, Clock: r.clock, Framework: r.ports(), PodGroups: pgClient,
		Dynamic: r.clients.Dynamic, Served: r.clients.Served, Leader: r.Leader, Syncs: r.syncs,
		PodEvents: &r.podEvents, Queues: r.queues.Load, Activate: r.Activate, AwaitQueue: r.awaitQueue})
}

// Queues returns the queue accounting, building it on first use; the
// profile's queue sort orders by queue share from then on. It fails with a
// clear message when the Queue CRD is not installed.
func (r *Runtime) Queues(fw ports.Framework, profile string, opts QueueOptions) (*Queues, error) {
	gangs, err := r.Gangs(fw)
	if err != nil {
		return nil, err
	}
	r.queueProfiles.Store(profile, true)
	r.mu.Lock()
	defer r.mu.Unlock()
	if q := r.queues.Load(); q != nil {
		if q.Options().DefaultQueue != opts.DefaultQueue {
			return nil, fmt.Errorf("defaultQueue %q differs from %q set by another profile; one process has one default queue", opts.DefaultQueue, q.Options().DefaultQueue)
		}
		if q.Options().UsageHalfLife != opts.UsageHalfLife {
			return nil, fmt.Errorf("usageHalfLifeSeconds %v differs from %v set by another profile; one process keeps one usage history", opts.UsageHalfLife.Seconds(), q.Options().UsageHalfLife.Seconds())
		}
		return q, nil
	}
	q, err := newQueues(r, gangs, opts)
	if err != nil {
		return nil, err
	}
	r.queues.Store(q)
	return q, nil
}

// Topology returns the network topology, building it on first use. It fails
// with a clear message when the NetworkTopology CRD is not installed.
func (r *Runtime) Topology(fw ports.Framework, name string, useHyperNodes bool) (*Topology, error) {
	if _, err := r.Gangs(fw); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if t := r.topology.Load(); t != nil {
		return t, nil
	}
	t, err := newTopology(r, name, useHyperNodes)
	if err != nil {
		return nil, err
	}
	r.topology.Store(t)
	return t, nil
}

// NUMA returns the NUMA zone accounting, building it on first use. It fails
// with a clear message when the NodeResourceTopology CRD is not installed.
func (r *Runtime) NUMA(fw ports.Framework) (*NUMA, error) {
	if _, err := r.Gangs(fw); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := r.numa.Load(); n != nil {
		return n, nil
	}
	n, err := newNUMA(r)
	if err != nil {
		return nil, err
	}
	r.numa.Store(n)
	return n, nil
}

// phalanxInformers returns the informer factory of the phalanx API group,
// creating it on first use. Callers hold r.mu.
func (r *Runtime) phalanxInformers() (phalanxinformers.SharedInformerFactory, error) {
	if r.phalanxFactory == nil {
		client, err := r.phalanxClient()
		if err != nil {
			return nil, err
		}
		r.phalanxFactory = phalanxinformers.NewSharedInformerFactoryWithOptions(client, 0, phalanxinformers.WithTransform(informersync.TrimManagedFields))
	}
	return r.phalanxFactory, nil
}

// phalanxClient is the client of the phalanx API group.
func (r *Runtime) phalanxClient() (phalanxclientset.Interface, error) {
	if r.clients.Phalanx == nil {
		c, err := phalanxclientset.NewForConfig(r.crdCfg)
		if err != nil {
			return nil, err
		}
		r.clients.Phalanx = c
	}
	return r.clients.Phalanx, nil
}

// require fails unless the API server serves the resource, naming the fix.
func (r *Runtime) require(groupVersion, resource string) error {
	ok, err := r.clients.Served(groupVersion, resource)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("the API server does not serve %s %s: install the CRDs (kubectl apply -f manifests/crds)", groupVersion, resource)
	}
	return nil
}

// QueuesIfBuilt returns the queue accounting if a plugin built it, else nil.
func (r *Runtime) QueuesIfBuilt() *Queues { return r.queues.Load() }

// TopologyIfBuilt returns the network topology if a plugin built it, else nil.
func (r *Runtime) TopologyIfBuilt() *Topology { return r.topology.Load() }

// GangsIfBuilt returns the gang directory and manager once a plugin built
// them, else nil.
func (r *Runtime) GangsIfBuilt() *gangs.Gangs { return r.gangs.Load() }

// QueuesOrdering returns the queues when the profile orders by queue share
// (its CapacityQueue is built), else nil.
func (r *Runtime) QueuesOrdering(profile string) *Queues {
	if _, ok := r.queueProfiles.Load(profile); !ok {
		return nil
	}
	return r.queues.Load()
}

// CRDConfig returns a copy of the scheduler's client config that speaks JSON,
// as custom resources require.
func CRDConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.ContentType = "application/json"
	c.AcceptContentTypes = "application/json"
	return c
}

// DeferSyncs makes the parts built from now on start their informers and
// leave the wait for AwaitSyncs, so that the first lists of every part run
// together (informersync.Syncs.Defer).
func (r *Runtime) DeferSyncs() { r.syncs.Defer() }

// AwaitSyncs waits for the informers the parts started since DeferSyncs,
// then runs their post-sync steps; the scheduler's own informers must not
// start before it returns. Parts only cycles read are left to AwaitCycleSyncs.
func (r *Runtime) AwaitSyncs(ctx context.Context) error { return r.syncs.Await(ctx) }

// AwaitCycleSyncs waits for the parts that only scheduling cycles read.
func (r *Runtime) AwaitCycleSyncs(ctx context.Context) error { return r.syncs.AwaitCycle(ctx) }

// Activate moves pods back to the scheduling queue, past any backoff.
func (r *Runtime) Activate(reason string, pods map[string]*v1.Pod) {
	fw := r.ports()
	if len(pods) == 0 || fw == nil || fw.Activator == nil {
		return
	}
	metrics.PodsWoken.WithLabelValues(reason).Add(float64(len(pods)))
	fw.Activator.Activate(klog.Background(), pods)
}

// awaitQueue returns once the scheduling queue's lock is free: the
// queue's Activate takes it even for no pods, so the event pass (or an
// in-flight pod's requeue) that held it when awaitQueue was called is over.
func (r *Runtime) awaitQueue() {
	if fw := r.ports(); fw != nil && fw.Activator != nil {
		fw.Activator.Activate(klog.Background(), map[string]*v1.Pod{})
	}
}

// Changed records that capacity or constraints may have changed without an
// event the scheduling queue sees (holds dropped, topology or NUMA data
// changed): cached plan failures are void and gangs that failed to plan are
// woken. It is the one change signal of the plugins.
func (r *Runtime) Changed() {
	if g := r.gangs.Load(); g != nil {
		g.CapacityChanged()
	}
}

// UpstreamPodGroup is the Workload API PodGroup namespace/name as the
// runtime's informer has it: nil while the API is not served, before the
// gangs are built, or when the group is not known.
func (r *Runtime) UpstreamPodGroup(namespace, name string) *schedulingv1beta1.PodGroup {
	g := r.gangs.Load()
	if g == nil {
		return nil
	}
	up := g.Upstream()
	if up == nil {
		return nil
	}
	pg, err := up.PodGroups.PodGroups(namespace).Get(name)
	if err != nil {
		return nil
	}
	return pg
}
