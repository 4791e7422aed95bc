package plane

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/estimator"
	"github.com/phalanx-sched/phalanx/internal/global"
	"github.com/phalanx-sched/phalanx/internal/queue"
)

// Queues are phalanx's Queue objects, applied on the Karmada plane with
// their CRD (and the QueuePositions CRD, for positions).
var Queues = phalanxv1alpha1.SchemeGroupVersion.WithResource("queues")

// Templates reads a binding's resource template.
type Templates interface {
	Of(ctx context.Context, apiVersion, kind, namespace, name string) (*estimator.Template, error)
}

// Options configure a Plane.
type Options struct {
	// SchedulerName is the schedulerName of the bindings the tier decides
	// (PropagationPolicy spec.schedulerName).
	SchedulerName string
	// DefaultQueue takes jobs whose template and namespace name none.
	DefaultQueue string
	// Interval is the longest time between passes; events trigger them
	// sooner.
	Interval time.Duration
	Tier     global.Config
}

// Plane runs the tier on one Karmada control plane.
type Plane struct {
	opts      Options
	client    dynamic.Interface
	templates Templates
	estimator global.Estimator
	tier      *global.Tier
	writer    *writer
	positions *positionsWriter
	clock     clock.Clock

	bindings, clusters, queues cache.SharedIndexInformer
	namespaces                 cache.SharedIndexInformer
	// dyn makes the Queue informer once the plane is seen to serve
	// Queues; queueResource is what it reads.
	dyn           dynamicinformer.DynamicSharedInformerFactory
	queueResource schema.GroupVersionResource
	factories     []interface{ Start(<-chan struct{}) }
	kick          chan struct{}

	mu        sync.Mutex
	tmplCache map[types.UID]cachedTemplate
}

type cachedTemplate struct {
	version string
	t       *estimator.Template
	err     error
}

// New builds a Plane over the plane's clients.
func New(opts Options, client dynamic.Interface, kube kubernetes.Interface, templates Templates, est global.Estimator, clk clock.Clock) *Plane {
	dyn := dynamicinformer.NewDynamicSharedInformerFactory(client, 10*time.Minute)
	core := informers.NewSharedInformerFactory(kube, 10*time.Minute)
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	p := &Plane{
		opts: opts, client: client, templates: templates, estimator: est, clock: clk,
		tier:          global.New(opts.Tier, clk),
		writer:        &writer{client: client, recorder: broadcaster.NewRecorder(clientscheme.Scheme, v1.EventSource{Component: FieldManager}), clock: clk},
		positions:     &positionsWriter{client: client, resource: QueuePositionsResource, clock: clk},
		bindings:      dyn.ForResource(ResourceBindings).Informer(),
		clusters:      dyn.ForResource(Clusters).Informer(),
		namespaces:    core.Core().V1().Namespaces().Informer(),
		dyn:           dyn,
		queueResource: Queues,
		factories:     []interface{ Start(<-chan struct{}) }{dyn, core},
		kick:          make(chan struct{}, 1),
		tmplCache:     map[types.UID]cachedTemplate{},
	}
	for _, inf := range []cache.SharedIndexInformer{p.bindings, p.clusters, p.namespaces} {
		p.watch(inf)
	}
	return p
}

func (p *Plane) watch(inf cache.SharedIndexInformer) {
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { p.trigger() },
		UpdateFunc: func(_, _ any) { p.trigger() },
		DeleteFunc: func(any) { p.trigger() },
	})
}

func (p *Plane) trigger() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Run starts the informers and decides a pass on every change (coalesced)
// and at least every Interval, until ctx ends.
func (p *Plane) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	if err := p.start(ctx); err != nil {
		return err
	}
	logger.Info("Deciding bindings", "schedulerName", p.opts.SchedulerName)
	tick := time.NewTicker(p.opts.Interval)
	defer tick.Stop()
	for {
		p.Pass(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-p.kick:
		case <-tick.C:
		}
	}
}

// start starts the informers and waits for them. Queues are read only
// where the plane serves them: without the Queue CRD the tier still runs
// (every job's queue is missing, so each waits as QueueRefused), and says
// so once.
func (p *Plane) start(ctx context.Context) error {
	synced := []cache.InformerSynced{p.bindings.HasSynced, p.clusters.HasSynced, p.namespaces.HasSynced}
	_, err := p.client.Resource(p.queueResource).List(ctx, metav1.ListOptions{Limit: 1})
	switch {
	case apierrors.IsNotFound(err):
		klog.FromContext(ctx).Info("The Karmada plane does not serve Queues: every binding waits as QueueRefused; apply manifests/crds/scheduling.phalanx.dev_queues.yaml on the plane",
			"resource", p.queueResource.String())
	default:
		// Any other error is the informer's to retry.
		p.queues = p.dyn.ForResource(p.queueResource).Informer()
		p.watch(p.queues)
		synced = append(synced, p.queues.HasSynced)
	}
	for _, f := range p.factories {
		f.Start(ctx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("the Karmada plane's ResourceBindings, Clusters, Queues and Namespaces never synced")
	}
	return nil
}

// Pass decides every binding of the tier once and writes the verdicts.
func (p *Plane) Pass(ctx context.Context) {
	logger := klog.FromContext(ctx)
	world, bindings := p.world(ctx)
	start := p.clock.Now()
	verdicts := p.tier.Pass(ctx, world, p.estimator)
	decided := make(map[types.UID]bool, len(verdicts))
	for _, v := range verdicts {
		decided[v.Job.UID] = true
		if err := p.writer.apply(ctx, bindings[v.Job.UID], v); err != nil {
			logger.Error(err, "Writing a verdict; it is decided again on the next pass", "job", v.Job.Key)
		}
	}
	for _, j := range world.Jobs {
		if j.Member != "" && !decided[j.UID] {
			if err := p.writer.confirm(ctx, bindings[j.UID]); err != nil {
				logger.Error(err, "Confirming a dispatch; tried again on the next pass", "job", j.Key)
			}
		}
	}
	p.positions.write(ctx, positionsOf(verdicts))
	observePass(p.clock.Since(start), verdicts)
}

// world reads the informers' objects into the tier's types.
func (p *Plane) world(ctx context.Context) (global.World, map[types.UID]*binding) {
	logger := klog.FromContext(ctx)
	var w global.World
	var queues []any
	if p.queues != nil {
		queues = p.queues.GetStore().List()
	}
	for _, obj := range queues {
		var q phalanxv1alpha1.Queue
		if err := fromUnstructured(obj, &q); err != nil {
			logger.Error(err, "Reading a Queue")
			continue
		}
		w.Queues = append(w.Queues, queue.FromAPI(&q))
	}
	for _, obj := range p.clusters.GetStore().List() {
		var c cluster
		if err := fromUnstructured(obj, &c); err != nil {
			logger.Error(err, "Reading a Cluster")
			continue
		}
		w.Members = append(w.Members, memberOf(&c))
	}
	sort.Slice(w.Members, func(a, b int) bool { return w.Members[a].Name < w.Members[b].Name })
	bindings := map[types.UID]*binding{}
	seen := map[types.UID]bool{}
	for _, obj := range p.bindings.GetStore().List() {
		b := &binding{}
		if err := fromUnstructured(obj, b); err != nil {
			logger.Error(err, "Reading a ResourceBinding")
			continue
		}
		if b.Spec.SchedulerName != p.opts.SchedulerName || b.DeletionTimestamp != nil {
			continue
		}
		seen[b.UID] = true
		tmpl, err := p.template(ctx, b)
		var nsLabels map[string]string
		if ns, ok, _ := p.namespaces.GetStore().GetByKey(b.Namespace); ok {
			nsLabels = ns.(*v1.Namespace).Labels
		}
		j := jobOf(b, tmpl, nsLabels, p.opts.DefaultQueue)
		if err != nil && j.Invalid == "" {
			j.Invalid = fmt.Sprintf("reading its resource template %s %s/%s: %v", b.Spec.Resource.Kind, b.Namespace, b.Spec.Resource.Name, err)
		}
		bindings[b.UID] = b
		w.Jobs = append(w.Jobs, j)
	}
	p.forgetTemplates(seen)
	return w, bindings
}

// template reads a binding's template once per template version.
func (p *Plane) template(ctx context.Context, b *binding) (*estimator.Template, error) {
	r := b.Spec.Resource
	p.mu.Lock()
	c, ok := p.tmplCache[b.UID]
	p.mu.Unlock()
	if ok && c.version == r.ResourceVersion && r.ResourceVersion != "" && c.err == nil {
		return c.t, nil
	}
	t, err := p.templates.Of(ctx, r.APIVersion, r.Kind, b.Namespace, r.Name)
	p.mu.Lock()
	p.tmplCache[b.UID] = cachedTemplate{version: r.ResourceVersion, t: t, err: err}
	p.mu.Unlock()
	return t, err
}

func (p *Plane) forgetTemplates(seen map[types.UID]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for uid := range p.tmplCache {
		if !seen[uid] {
			delete(p.tmplCache, uid)
		}
	}
}

func fromUnstructured(obj any, into any) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("unexpected object %T", obj)
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into)
}
