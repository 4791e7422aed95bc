// Package kcm runs kube-controller-manager's controllers in-process against a
// test cluster, each at most once, on one shared informer factory as in the
// real binary.
package kcm

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/controller-manager/pkg/informerfactory"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/clusterroleaggregation"
	"k8s.io/kubernetes/pkg/controller/garbagecollector"
	jobcontroller "k8s.io/kubernetes/pkg/controller/job"
	"k8s.io/kubernetes/pkg/controller/resourceclaim"
	"k8s.io/kubernetes/pkg/controller/statefulset"
	"k8s.io/kubernetes/pkg/features"
)

// Manager holds the kube-controller-manager controllers a cluster runs,
// started at most once each and sharing one informer factory, as in the real
// binary. Its controllers run until Stop.
type Manager struct {
	config *rest.Config
	cancel context.CancelFunc

	mu        sync.Mutex
	ctx       context.Context
	informers informers.SharedInformerFactory
	// shutdown waits for informers, after ctx is cancelled.
	shutdown []func()
	job, gc  bool
	sts      bool
	claims   bool
	roles    bool
}

// New returns a Manager for the cluster of config (an admin config) that
// runs nothing yet.
func New(config *rest.Config) *Manager {
	ctx, cancel := context.WithCancel(context.Background())
	client := kubernetes.NewForConfigOrDie(rest.AddUserAgent(rest.CopyConfig(config), "kube-controller-manager"))
	m := &Manager{config: config, cancel: cancel, ctx: ctx, informers: informers.NewSharedInformerFactory(client, 0)}
	m.shutdown = append(m.shutdown, m.informers.Shutdown)
	return m
}

// Stop ends every controller and waits for the informers.
func (m *Manager) Stop() {
	m.cancel()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range m.shutdown {
		f()
	}
}

// startController runs one kube-controller-manager controller in-process
// until Stop, at most once (started is its flag in m), on the shared
// informer factory with its own user agent, as in the real binary.
func (m *Manager) startController(name string, started func(*Manager) *bool,
	build func(ctx context.Context, client kubernetes.Interface, inf informers.SharedInformerFactory) (run func(), err error)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if *started(m) {
		return nil
	}
	client, err := kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(m.config), name))
	if err != nil {
		return err
	}
	run, err := build(klog.NewContext(m.ctx, klog.Background().WithName(name)), client, m.informers)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	m.informers.Start(m.ctx.Done())
	go run()
	*started(m) = true
	return nil
}

// StartJobController runs kube-controller-manager's Job controller
// (k8s.io/kubernetes/pkg/controller/job) in-process against the cluster
// until Stop. Calling it again is a no-op, so tests sharing a cluster can
// each ask for it.
//
// As in kube-controller-manager, the controller reads its feature gates
// from the process (utilfeature.DefaultFeatureGate). With WorkloadWithJob on
// when it starts, it is given the scheduling.k8s.io/v1beta1 Workload and
// PodGroup informers and creates a Workload and a PodGroup for each new Job
// that sets .spec.scheduling; the API server must then serve that version
// (--runtime-config=scheduling.k8s.io/v1beta1=true), or the controller would
// wait for those informers forever: that is an error here. A test turns the
// gate on for itself (featuregatetesting.SetFeatureGatesDuringTest) before
// it starts the cluster.
func (m *Manager) StartJobController() error {
	return m.startController("job-controller", func(m *Manager) *bool { return &m.job },
		func(ctx context.Context, client kubernetes.Interface, inf informers.SharedInformerFactory) (func(), error) {
			var jc *jobcontroller.Controller
			var err error
			if utilfeature.DefaultFeatureGate.Enabled(features.WorkloadWithJob) {
				if err := servesWorkloadAPI(client); err != nil {
					return nil, fmt.Errorf("feature gate %s is on: %w", features.WorkloadWithJob, err)
				}
				jc, err = jobcontroller.NewController(ctx, client, inf.Core().V1().Pods(), inf.Batch().V1().Jobs(),
					inf.Scheduling().V1beta1().Workloads(), inf.Scheduling().V1beta1().PodGroups())
			} else {
				jc, err = jobcontroller.NewController(ctx, client, inf.Core().V1().Pods(), inf.Batch().V1().Jobs(), nil, nil)
			}
			if err != nil {
				return nil, err
			}
			return func() { jc.Run(ctx, 4) }, nil
		})
}

// servesWorkloadAPI checks that the API server serves the Workload and
// PodGroup resources of scheduling.k8s.io/v1beta1.
func servesWorkloadAPI(client kubernetes.Interface) error {
	gv := schedulingv1beta1.SchemeGroupVersion.String()
	list, err := client.Discovery().ServerResourcesForGroupVersion(gv)
	if err != nil {
		return fmt.Errorf("the API server does not serve %s (--runtime-config=%s=true): %w", gv, gv, err)
	}
	missing := map[string]bool{"workloads": true, "podgroups": true}
	for _, r := range list.APIResources {
		delete(missing, r.Name)
	}
	if len(missing) > 0 {
		return fmt.Errorf("the API server serves %s without %v", gv, slices.Sorted(maps.Keys(missing)))
	}
	return nil
}

// StartResourceClaimController runs kube-controller-manager's resourceclaim
// controller (k8s.io/kubernetes/pkg/controller/resourceclaim) in-process:
// it creates pods' claims from ResourceClaimTemplates and frees claims
// whose pods are gone. Idempotent.
func (m *Manager) StartResourceClaimController() error {
	return m.startController("resource-claim-controller", func(m *Manager) *bool { return &m.claims },
		func(ctx context.Context, client kubernetes.Interface, inf informers.SharedInformerFactory) (func(), error) {
			// Since 1.37 the controller reads its features (DRAAdminAccess,
			// DRAPrioritizedList, DRAWorkloadResourceClaims, GenericWorkload)
			// from the process's feature gates itself, as phalanx passed them.
			rc, err := resourceclaim.NewController(klog.FromContext(ctx), client,
				inf.Core().V1().Pods(), inf.Scheduling().V1beta1().PodGroups(),
				inf.Resource().V1().ResourceClaims(), inf.Resource().V1().ResourceClaimTemplates())
			if err != nil {
				return nil, err
			}
			return func() { rc.Run(ctx, 4) }, nil
		})
}

// StartStatefulSetController runs kube-controller-manager's StatefulSet
// controller (k8s.io/kubernetes/pkg/controller/statefulset) in-process until
// Stop. Idempotent.
func (m *Manager) StartStatefulSetController() error {
	return m.startController("statefulset-controller", func(m *Manager) *bool { return &m.sts },
		func(ctx context.Context, client kubernetes.Interface, inf informers.SharedInformerFactory) (func(), error) {
			sc := statefulset.NewStatefulSetController(ctx, inf.Core().V1().Pods(), inf.Apps().V1().StatefulSets(),
				inf.Core().V1().PersistentVolumeClaims(), inf.Apps().V1().ControllerRevisions(), client)
			return func() { sc.Run(ctx, 2) }, nil
		})
}

// StartClusterRoleAggregation runs kube-controller-manager's ClusterRole
// aggregation controller (k8s.io/kubernetes/pkg/controller/clusterroleaggregation):
// the bootstrap view, edit and admin roles get the rules of every
// ClusterRole labelled to aggregate into them, as in a real cluster (without
// it they grant nothing). Idempotent.
func (m *Manager) StartClusterRoleAggregation() error {
	return m.startController("clusterrole-aggregation-controller", func(m *Manager) *bool { return &m.roles },
		func(ctx context.Context, client kubernetes.Interface, inf informers.SharedInformerFactory) (func(), error) {
			rc := clusterroleaggregation.NewClusterRoleAggregation(inf.Rbac().V1().ClusterRoles(), client.RbacV1())
			return func() { rc.Run(ctx, 1) }, nil
		})
}

// StartGarbageCollector runs kube-controller-manager's garbage collector
// in-process: objects whose owners are gone are deleted, as in a real
// cluster. It watches every resource the server serves, including CRDs
// installed later (rediscovered every few seconds). Idempotent.
func (m *Manager) StartGarbageCollector() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gc {
		return nil
	}
	config := rest.AddUserAgent(rest.CopyConfig(m.config), "generic-garbage-collector")
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	metadataClient, err := metadata.NewForConfig(config)
	if err != nil {
		return err
	}
	discovery := memory.NewMemCacheClient(client.Discovery())
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(discovery)
	metadataInformers := metadatainformer.NewSharedInformerFactory(metadataClient, 0)
	started := make(chan struct{})
	ctx := klog.NewContext(m.ctx, klog.Background().WithName("garbage-collector"))
	gc, err := garbagecollector.NewGarbageCollector(ctx, client, metadataClient, mapper,
		garbagecollector.DefaultIgnoredResources(),
		informerfactory.NewInformerFactory(m.informers, metadataInformers), started)
	if err != nil {
		return fmt.Errorf("garbage collector: %w", err)
	}
	const syncPeriod = 2 * time.Second
	m.informers.Start(m.ctx.Done())
	metadataInformers.Start(m.ctx.Done())
	close(started)
	go wait.Until(mapper.Reset, syncPeriod, m.ctx.Done())
	go gc.Run(ctx, 4, syncPeriod)
	go gc.Sync(ctx, client.Discovery(), syncPeriod)
	m.shutdown = append(m.shutdown, metadataInformers.Shutdown)
	m.gc = true
	return nil
}
