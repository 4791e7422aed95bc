package runtime

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/informersync"
	"github.com/phalanx-sched/phalanx/internal/topology"
)

// Topology is the network topology of the process (topology.Live), fed by
// the runtime's informers.
type Topology = topology.Live

func newTopology(r *Runtime, name string, useHyperNodes bool) (*Topology, error) {
	ctx, fw := r.ctx, r.ports()
	if err := r.require(phalanxv1alpha1.SchemeGroupVersion.String(), "networktopologies"); err != nil {
		return nil, err
	}
	factory, err := r.phalanxInformers()
	if err != nil {
		return nil, err
	}
	inf := factory.Scheduling().V1alpha1().NetworkTopologies()
	var hyperNodes cache.GenericLister
	var hyperInformer cache.SharedIndexInformer
	var dyn dynamicinformer.DynamicSharedInformerFactory
	if useHyperNodes {
		if served, _ := r.clients.Served(topology.HyperNodeGVR.GroupVersion().String(), topology.HyperNodeGVR.Resource); served && r.crdCfg != nil {
			dc, err := dynamic.NewForConfig(r.crdCfg)
			if err != nil {
				return nil, err
			}
			dyn = dynamicinformer.NewDynamicSharedInformerFactory(dc, 0)
			hn := dyn.ForResource(topology.HyperNodeGVR)
			hyperNodes, hyperInformer = hn.Lister(), hn.Informer()
		}
	}
	t := topology.NewLive(name, fw.Informers.Core().V1().Nodes().Lister(), inf.Lister(), hyperNodes, r.Changed)
	changed := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { t.Invalidate() },
		UpdateFunc: func(any, any) { t.Invalidate() },
		DeleteFunc: func(any) { t.Invalidate() },
	}
	if _, err := inf.Informer().AddEventHandler(changed); err != nil {
		return nil, err
	}
	if err := r.syncs.Part("NetworkTopologies", factory.Start, func(stop <-chan struct{}) []string {
		return informersync.Unsynced(factory.WaitForCacheSync(stop))
	}); err != nil {
		return nil, err
	}
	if hyperInformer != nil {
		if _, err := hyperInformer.AddEventHandler(changed); err != nil {
			return nil, err
		}
		if err := r.syncs.Part("HyperNodes", dyn.Start, func(stop <-chan struct{}) []string {
			return informersync.Unsynced(dyn.WaitForCacheSync(stop))
		}); err != nil {
			return nil, err
		}
		klog.FromContext(ctx).Info("Reading Volcano HyperNodes for network topology")
	}
	// Node label changes move nodes between domains. Invalidate tells the
	// change again, though the gangs' own node handler tells it too: the
	// handlers run apart, and a gang that handler woke could plan on the
	// stale trees, fail, and keep that failure until the periodic retry.
	if _, err := fw.Informers.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { t.Invalidate() },
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*v1.Node)
			n, ok2 := newObj.(*v1.Node)
			if !ok1 || !ok2 || !labels.Equals(o.Labels, n.Labels) {
				t.Invalidate()
			}
		},
		DeleteFunc: func(any) { t.Invalidate() },
	}); err != nil {
		return nil, err
	}
	return t, nil
}
