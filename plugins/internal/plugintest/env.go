// Package plugintest builds the phalanx plugins over the scheduler
// framework's own test utilities and fake clients, for table-driven adapter
// tests that run in milliseconds: a real framework (real NodeResourcesFit
// filter), a snapshot of nodes and pods, a runtime on fake clientsets and a
// fake clock, and a pod activator that records what the plugins wake.
package plugintest

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	nrtv1alpha2 "github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/apis/topology/v1alpha2"
	nrtfake "github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/generated/clientset/versioned/fake"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	testingclock "k8s.io/utils/clock/testing"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pgfake "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned/fake"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	phalanxfake "github.com/phalanx-sched/phalanx/pkg/generated/clientset/versioned/fake"
	"github.com/phalanx-sched/phalanx/plugins/runtime"
)

// GPU is the extended resource the tests use.
const GPU v1.ResourceName = "nvidia.com/gpu"

// Objects are what the fake API server holds at start.
type Objects struct {
	Nodes      []*v1.Node
	Pods       []*v1.Pod
	Namespaces []*v1.Namespace
	PodGroups  []*pgv1alpha1.PodGroup
	Queues     []*phalanxv1alpha1.Queue
	Topologies []*phalanxv1alpha1.NetworkTopology
	NRTs       []*nrtv1alpha2.NodeResourceTopology
	// UpstreamPodGroups (scheduling.k8s.io/v1beta1): the env serves the
	// Workload API when there are any.
	UpstreamPodGroups []*schedulingv1beta1.PodGroup
	// Workloads (scheduling.k8s.io/v1beta1) are served with the PodGroups.
	Workloads []*schedulingv1beta1.Workload
	// EvictionRequests: the env serves lifecycle.k8s.io/v1alpha1
	// EvictionRequests (Kubernetes 1.37, alpha).
	EvictionRequests bool
	// DeferSyncs builds the plugins as the binary does: the runtime's parts
	// start their informers, and the env waits for all of them once the
	// framework is built (Runtime.AwaitSyncs).
	DeferSyncs bool
	// OnList runs when a resource is listed (by an informer or the test),
	// before the list is answered (nil: nothing); a test may hold it back.
	OnList func(resource string)
}

// Plugin registers one plugin of the profile. Order matters as in a
// KubeSchedulerConfiguration.
type Plugin struct {
	Name       string
	Extensions []string
	// New builds the plugin over the runtime; the returned plugin is kept
	// in Env.Plugins by name.
	New func(ctx context.Context, h fwk.Handle, rt *runtime.Runtime) (fwk.Plugin, error)
}

// Env is a framework with the phalanx plugins over fakes.
type Env struct {
	T       testing.TB
	Ctx     context.Context
	Clock   *testingclock.FakeClock
	Client  *fake.Clientset
	PG      *pgfake.Clientset
	Phalanx *phalanxfake.Clientset
	NRT     *nrtfake.Clientset
	RT      *runtime.Runtime
	FW      framework.Framework
	Plugins map[string]fwk.Plugin

	activator *activator
}

// NodeResourcesFit is the in-tree resource filter, so plans see real
// verdicts.
var NodeResourcesFit = Plugin{
	Name: "NodeResourcesFit", Extensions: []string{"PreFilter", "Filter"},
	New: func(ctx context.Context, h fwk.Handle, _ *runtime.Runtime) (fwk.Plugin, error) {
		args := &schedconfig.NodeResourcesFitArgs{ScoringStrategy: &schedconfig.ScoringStrategy{
			Type:      schedconfig.LeastAllocated,
			Resources: []schedconfig.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}},
		}}
		return noderesources.NewFit(ctx, args, h, plfeature.Features{})
	},
}

// New starts an environment with the objects and the plugins.
func New(t testing.TB, objs Objects, plugins ...Plugin) *Env {
	t.Helper()
	// The generated fake clientsets do not serve streaming lists: informers
	// over them list and watch the classic way.
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, "WatchListClient", false)
	schedmetrics.Register()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ctx = klog.NewContext(ctx, klog.Background())

	e := newFakes(ctx, t, objs)
	watches := newWatchGate()
	for _, c := range []fakeClient{e.Client, e.PG, e.Phalanx, e.NRT} {
		watches.install(c, objs.OnList)
	}
	e.RT = runtime.NewWithClients(ctx, e.Clock, runtime.Clients{
		PodGroups: e.PG, Phalanx: e.Phalanx, NRT: e.NRT, Served: served(objs),
	})
	if objs.DeferSyncs {
		e.RT.DeferSyncs()
	}
	informerFactory := informers.NewSharedInformerFactory(e.Client, 0)
	fw, err := e.newFramework(informerFactory, objs, plugins)
	if err != nil {
		t.Fatalf("building the framework: %v", err)
	}
	e.FW = fw
	if err := e.RT.AwaitSyncs(ctx); err != nil {
		t.Fatalf("syncing the runtime's informers: %v", err)
	}
	// As the binary does: the scheduler's informers start while the parts
	// that only cycles read finish their lists.
	informerFactory.Start(ctx.Done())
	if err := e.RT.AwaitCycleSyncs(ctx); err != nil {
		t.Fatalf("syncing the runtime's cycle-only informers: %v", err)
	}
	informerFactory.WaitForCacheSync(ctx.Done())
	e.Eventually("every informer watching", watches.ready)
	return e
}

// newFakes is an Env whose fake clientsets hold the objects.
func newFakes(ctx context.Context, t testing.TB, objs Objects) *Env {
	var coreObjs []k8sruntime.Object
	for _, n := range objs.Nodes {
		coreObjs = append(coreObjs, n)
	}
	for _, p := range objs.Pods {
		coreObjs = append(coreObjs, p)
	}
	for _, ns := range objs.Namespaces {
		coreObjs = append(coreObjs, ns)
	}
	for _, pg := range objs.UpstreamPodGroups {
		coreObjs = append(coreObjs, pg)
	}
	for _, wl := range objs.Workloads {
		coreObjs = append(coreObjs, wl)
	}
	var pgObjs []k8sruntime.Object
	for _, pg := range objs.PodGroups {
		pgObjs = append(pgObjs, pg)
	}
	var phObjs []k8sruntime.Object
	for _, q := range objs.Queues {
		phObjs = append(phObjs, q)
	}
	for _, nt := range objs.Topologies {
		phObjs = append(phObjs, nt)
	}
	var nrtObjs []k8sruntime.Object
	for _, n := range objs.NRTs {
		nrtObjs = append(nrtObjs, n)
	}
	return &Env{
		T: t, Ctx: ctx, Clock: testingclock.NewFakeClock(time.Unix(1_000_000, 0)),
		Client:    fake.NewClientset(coreObjs...),
		PG:        pgfake.NewSimpleClientset(pgObjs...),
		Phalanx:   phalanxfake.NewSimpleClientset(phObjs...),
		NRT:       nrtfake.NewSimpleClientset(nrtObjs...),
		Plugins:   map[string]fwk.Plugin{},
		activator: &activator{},
	}
}

// served says which API groups the env serves: the custom resources are
// installed; the Workload API and EvictionRequests as objs asks, and
// Volcano's HyperNodes not.
func served(objs Objects) func(gv, resource string) (bool, error) {
	return func(gv, resource string) (bool, error) {
		switch gv {
		case pgv1alpha1.SchemeGroupVersion.String(), phalanxv1alpha1.SchemeGroupVersion.String(), nrtv1alpha2.SchemeGroupVersion.String():
			return true, nil
		case schedulingv1beta1.SchemeGroupVersion.String():
			return len(objs.UpstreamPodGroups) > 0 && (resource == "podgroups" || resource == "workloads" && len(objs.Workloads) > 0), nil
		case "lifecycle.k8s.io/v1alpha1":
			return objs.EvictionRequests && resource == "evictionrequests", nil
		}
		return false, nil
	}
}

// newFramework builds the framework of the plugins, over the snapshot of
// the objects' nodes and bound pods.
func (e *Env) newFramework(informerFactory informers.SharedInformerFactory, objs Objects, plugins []Plugin) (framework.Framework, error) {
	fns := e.registerPlugins(plugins)
	var bound []*v1.Pod
	for _, p := range objs.Pods {
		if p.Spec.NodeName != "" {
			bound = append(bound, p)
		}
	}
	snapshot := cache.NewSnapshot(bound, objs.Nodes)
	return tf.NewFramework(e.Ctx, fns, "phalanx-scheduler",
		frameworkruntime.WithClientSet(e.Client),
		frameworkruntime.WithInformerFactory(informerFactory),
		frameworkruntime.WithSnapshotSharedLister(snapshot),
		frameworkruntime.WithEventRecorder(events.NewFakeRecorder(1000)),
		frameworkruntime.WithPodActivator(e.activator),
		frameworkruntime.WithPodNominator(noNominations{}),
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
	)
}

// registerPlugins registers the plugins in the profile, with the default
// binder, and the default queue sort unless a plugin sorts. Each plugin
// built is kept in e.Plugins.
func (e *Env) registerPlugins(plugins []Plugin) []tf.RegisterPluginFunc {
	var mu sync.Mutex
	var fns []tf.RegisterPluginFunc
	sorts := false
	for _, p := range plugins {
		p := p
		for _, ext := range p.Extensions {
			sorts = sorts || ext == "QueueSort"
		}
		factory := func(ctx context.Context, _ k8sruntime.Object, h fwk.Handle) (fwk.Plugin, error) {
			pl, err := p.New(ctx, h, e.RT)
			if err == nil {
				mu.Lock()
				e.Plugins[p.Name] = pl
				mu.Unlock()
			}
			return pl, err
		}
		// Like tf.RegisterPluginAsExtensions, without a PluginConfig entry:
		// the factories take their args directly, and a plugin may be
		// registered twice to place its Filter apart from its other points.
		fns = append(fns, func(reg *frameworkruntime.Registry, profile *schedconfig.KubeSchedulerProfile) {
			_ = reg.Register(p.Name, factory)
			for _, ext := range p.Extensions {
				set := pluginSet(profile.Plugins, ext)
				set.Enabled = append(set.Enabled, schedconfig.Plugin{Name: p.Name, Weight: 1})
			}
		})
	}
	fns = append(fns, tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New))
	if !sorts {
		fns = append(fns, tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New))
	}
	return fns
}

func pluginSet(p *schedconfig.Plugins, ext string) *schedconfig.PluginSet {
	switch ext {
	case "QueueSort":
		return &p.QueueSort
	case "PreFilter":
		return &p.PreFilter
	case "Filter":
		return &p.Filter
	case "PostFilter":
		return &p.PostFilter
	case "PreScore":
		return &p.PreScore
	case "Score":
		return &p.Score
	case "Reserve":
		return &p.Reserve
	case "Permit":
		return &p.Permit
	}
	panic("unknown extension point " + ext)
}

// Cycle runs PreFilter of the framework for a pod and returns the state.
func (e *Env) Cycle(pod *v1.Pod) (fwk.CycleState, *fwk.PreFilterResult, *fwk.Status) {
	state := framework.NewCycleState()
	res, st, _ := e.FW.RunPreFilterPlugins(e.Ctx, state, pod)
	return state, res, st
}

// NodeInfo returns the snapshot's NodeInfo of a node.
func (e *Env) NodeInfo(name string) fwk.NodeInfo {
	ni, err := e.FW.SnapshotSharedLister().NodeInfos().Get(name)
	if err != nil {
		e.T.Fatalf("node %s: %v", name, err)
	}
	return ni
}

// Filter runs the framework's Filter plugins on every node, in name order,
// and returns the nodes that pass.
func (e *Env) Filter(state fwk.CycleState, pod *v1.Pod) ([]string, map[string]*fwk.Status) {
	infos, err := e.FW.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		e.T.Fatal(err)
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Node().Name < infos[j].Node().Name })
	var fit []string
	failed := map[string]*fwk.Status{}
	for _, ni := range infos {
		if st := e.FW.RunFilterPlugins(e.Ctx, state, pod, ni); st.IsSuccess() {
			fit = append(fit, ni.Node().Name)
		} else {
			failed[ni.Node().Name] = st
		}
	}
	return fit, failed
}

// Activated returns the pods ("namespace/name") plugins woke, and forgets them.
func (e *Env) Activated() []string {
	return e.activator.take()
}

// Eventually polls cond (informers deliver events asynchronously).
func (e *Env) Eventually(what string, cond func() bool) {
	e.T.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.T.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// noNominations is a nominator with no nominated pods.
type noNominations struct{}

func (noNominations) AddNominatedPod(klog.Logger, fwk.PodInfo, *fwk.NominatingInfo) {}
func (noNominations) DeleteNominatedPodIfExists(*v1.Pod)                            {}
func (noNominations) UpdateNominatedPod(klog.Logger, *v1.Pod, fwk.PodInfo)          {}
func (noNominations) NominatedPodsForNode(string) []fwk.PodInfo                     { return nil }

type activator struct {
	mu   sync.Mutex
	pods []string
}

func (a *activator) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k := range pods {
		a.pods = append(a.pods, k)
	}
}

func (a *activator) take() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.pods
	a.pods = nil
	sort.Strings(out)
	return out
}

// Node is a node with CPUs, GPUs and labels.
func Node(name string, cpu string, gpus int64, labels map[string]string) *v1.Node {
	l := map[string]string{v1.LabelHostname: name}
	for k, v := range labels {
		l[k] = v
	}
	alloc := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse(cpu),
		v1.ResourceMemory: resource.MustParse("64Gi"),
		v1.ResourcePods:   resource.MustParse("110"),
	}
	if gpus > 0 {
		alloc[GPU] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}, Status: v1.NodeStatus{Allocatable: alloc, Capacity: alloc}}
}

// Pod is a pod with CPU and GPU requests; group "" makes a plain pod.
func Pod(name, group, cpu string, gpus int64) *v1.Pod {
	req := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}
	if gpus > 0 {
		req[GPU] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(time.Unix(1_000_000, 0))},
		Spec: v1.PodSpec{SchedulerName: "phalanx-scheduler", Containers: []v1.Container{{
			Name: "c", Resources: v1.ResourceRequirements{Requests: req, Limits: gpuLimits(gpus)}}}},
	}
	if group != "" {
		p.Labels = map[string]string{pgv1alpha1.PodGroupLabel: group}
	}
	return p
}

func gpuLimits(gpus int64) v1.ResourceList {
	if gpus == 0 {
		return nil
	}
	return v1.ResourceList{GPU: *resource.NewQuantity(gpus, resource.DecimalSI)}
}

// OnNode returns a copy of the pod bound to node.
func OnNode(p *v1.Pod, node string) *v1.Pod {
	c := p.DeepCopy()
	c.Spec.NodeName = node
	return c
}

// PodGroup is a scheduler-plugins PodGroup in namespace default.
func PodGroup(name string, min int32) *pgv1alpha1.PodGroup {
	return &pgv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("pg-" + name),
			CreationTimestamp: metav1.NewTime(time.Unix(1_000_000, 0))},
		Spec: pgv1alpha1.PodGroupSpec{MinMember: min},
	}
}

// Zone is one NUMA zone of an NRT object: CPUs and GPUs, all free.
type Zone struct {
	Name string
	CPU  string
	GPUs int64
}

// NRT is a node's NodeResourceTopology as NFD topology-updater publishes it,
// with the kubelet's policy and container scope in its attributes.
func NRT(node, policy string, zones ...Zone) *nrtv1alpha2.NodeResourceTopology {
	nrt := &nrtv1alpha2.NodeResourceTopology{
		ObjectMeta: metav1.ObjectMeta{Name: node},
		Attributes: nrtv1alpha2.AttributeList{{Name: "topologyManagerPolicy", Value: policy}, {Name: "topologyManagerScope", Value: "container"}},
	}
	for _, z := range zones {
		cpu := resource.MustParse(z.CPU)
		gpu := *resource.NewQuantity(z.GPUs, resource.DecimalSI)
		nrt.Zones = append(nrt.Zones, nrtv1alpha2.Zone{Name: z.Name, Type: "Node", Resources: nrtv1alpha2.ResourceInfoList{
			{Name: string(v1.ResourceCPU), Capacity: cpu, Allocatable: cpu, Available: cpu},
			{Name: string(GPU), Capacity: gpu, Allocatable: gpu, Available: gpu},
		}})
	}
	return nrt
}
