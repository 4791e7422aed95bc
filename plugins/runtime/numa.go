package runtime

import (
	nrtv1alpha2 "github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/apis/topology/v1alpha2"
	nrtclientset "github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/generated/clientset/versioned"
	nrtinformers "github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/generated/informers/externalversions"
	"k8s.io/client-go/tools/cache"

	"github.com/phalanx-sched/phalanx/internal/informersync"
	"github.com/phalanx-sched/phalanx/internal/numa"
)

// NUMA is the NUMA view of the process (numa.Live), fed by the runtime's
// informers.
type NUMA = numa.Live

func newNUMA(r *Runtime) (*NUMA, error) {
	fw := r.ports()
	if err := r.require(nrtv1alpha2.SchemeGroupVersion.String(), "noderesourcetopologies"); err != nil {
		return nil, err
	}
	client := r.clients.NRT
	if client == nil {
		c, err := nrtclientset.NewForConfig(r.crdCfg)
		if err != nil {
			return nil, err
		}
		client = c
	}
	factory := nrtinformers.NewSharedInformerFactory(client, 0)
	inf := factory.Topology().V1alpha2().NodeResourceTopologies()
	if err := inf.Informer().SetTransform(numa.ParseNRT); err != nil {
		return nil, err
	}
	n := numa.NewLive(r.clock, inf.Informer().GetStore(), fw.Informers.Core().V1().Nodes().Lister(), r.Changed)
	// Objects created or changed at any time are picked up.
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    n.Reconcile,
		UpdateFunc: func(_, obj any) { n.Reconcile(obj) },
		DeleteFunc: n.OnDelete,
	}); err != nil {
		return nil, err
	}
	r.addPodHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: n.OnPodDelete})
	if _, err := fw.Informers.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: n.OnNodeDelete,
	}); err != nil {
		return nil, err
	}
	synced, err := r.syncs.CyclePart("NodeResourceTopologies", factory.Start, func(stop <-chan struct{}) []string {
		return informersync.Unsynced(factory.WaitForCacheSync(stop))
	})
	if err != nil {
		return nil, err
	}
	n.Listed(synced, r.ctx.Done())
	return n, nil
}
