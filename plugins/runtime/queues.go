package runtime

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/admission"
	"github.com/phalanx-sched/phalanx/internal/devices"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/informersync"
	"github.com/phalanx-sched/phalanx/plugins/internal/ports"
	"github.com/phalanx-sched/phalanx/plugins/runtime/gangs"
)

// Queues is the queue accounting of the process (admission.Queues), fed by
// the runtime's informers.
type Queues = admission.Queues

// QueueOptions are the CapacityQueue args the process's queues are built
// with; every profile must give the same.
type QueueOptions = admission.Options

func newQueues(r *Runtime, g *gangs.Gangs, opts QueueOptions) (*Queues, error) {
	ctx, fw := r.ctx, r.ports()
	if err := r.require(phalanxv1alpha1.SchemeGroupVersion.String(), "queues"); err != nil {
		return nil, err
	}
	client, err := r.phalanxClient()
	if err != nil {
		return nil, err
	}
	factory, err := r.phalanxInformers()
	if err != nil {
		return nil, err
	}
	queues := factory.Scheduling().V1alpha1().Queues()
	// Devices published in ResourceSlices count in the cluster total as
	// their classes' queue resources (without a DRA manager, none).
	var slices *devices.NodeSlices
	if g.Devices != nil {
		slices = devices.NewNodeSlices(g.Devices)
	}
	q := admission.New(admission.Ports{
		Gangs: g, Holds: g.Lifecycle, Demand: g.Manager.Demand,
		Order: func(pod *v1.Pod, q *Queues) ident.Order {
			return g.OrderKey(pod, pod.CreationTimestamp.Time, q).Order
		},
		OrderChanged: g.OrderChanged,
		WakeLead:     g.WakeLead,
		Activate:     r.Activate,
		Namespaces:   fw.Informers.Core().V1().Namespaces().Lister(),
		Pods:         fw.Informers.Core().V1().Pods().Lister(),
		Queues:       queues.Lister(),
		Client:       client,
		Slices:       slices,
		Node:         fw.Informers.Core().V1().Nodes().Lister().Get,
		Clock:        r.clock,
	}, opts)
	r.addPodHandler(q.PodHandler())
	for inf, h := range map[cache.SharedIndexInformer]cache.ResourceEventHandler{
		fw.Informers.Core().V1().Nodes().Informer():      q.NodeHandler(),
		fw.Informers.Core().V1().Namespaces().Informer(): q.NamespaceHandler(),
		queues.Informer(): q.QueueHandler(),
	} {
		if _, err := inf.AddEventHandler(h); err != nil {
			return nil, err
		}
	}
	if g.Devices != nil {
		if err := watchQueueDevices(r, fw, q, g.Devices); err != nil {
			return nil, err
		}
	}
	if err := r.syncs.Part("Queues", factory.Start, func(stop <-chan struct{}) []string {
		return informersync.Unsynced(factory.WaitForCacheSync(stop))
	}); err != nil {
		return nil, err
	}
	r.syncs.After(func() { q.EnsureDefaultQueue(ctx) })
	q.Run(ctx)
	return q, nil
}

// watchQueueDevices counts devices in the queues' totals and demands: slices,
// classes (a change recounts every slice and device pod), claims made from a
// template after their pod.
func watchQueueDevices(r *Runtime, fw *ports.Framework, q *Queues, d *devices.Devices) error {
	slices := fw.Informers.Resource().V1().ResourceSlices()
	if _, err := slices.Informer().AddEventHandler(q.SliceHandler(r.ctx)); err != nil {
		return err
	}
	recount := func(any) {
		if list, err := slices.Lister().List(labels.Everything()); err == nil {
			q.Recount(r.ctx, list, d.Asks)
		}
	}
	if _, err := fw.Informers.Resource().V1().DeviceClasses().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: recount, UpdateFunc: func(_, n any) { recount(n) }, DeleteFunc: recount,
	}); err != nil {
		return err
	}
	_, err := fw.Informers.Resource().V1().ResourceClaims().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: q.ClaimMade})
	return err
}
