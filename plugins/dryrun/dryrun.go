// Package dryrun asks the gang manager's dry run outside a scheduling cycle,
// as the Karmada estimator does: a private framework with the profile's own
// PreFilter and Filter plugins (and their args) judges the members over a
// node snapshot of its own, fed by the scheduler's informers and brought up
// to date incrementally before each question. The scheduler's snapshot is
// never read: its scheduling loop rewrites it between cycles.
package dryrun

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedulerserverconfig "k8s.io/kubernetes/cmd/kube-scheduler/app/config"
	"k8s.io/kubernetes/pkg/scheduler"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkplugins "k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/estimator"
	"github.com/phalanx-sched/phalanx/internal/gang"
	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/queue"
	"github.com/phalanx-sched/phalanx/internal/resources"
	"github.com/phalanx-sched/phalanx/internal/topology"
	"github.com/phalanx-sched/phalanx/internal/workload"
	"github.com/phalanx-sched/phalanx/plugins/capacityqueue"
	"github.com/phalanx-sched/phalanx/plugins/coscheduling"
	"github.com/phalanx-sched/phalanx/plugins/networktopology"
	"github.com/phalanx-sched/phalanx/plugins/numatopology"
	"github.com/phalanx-sched/phalanx/plugins/probe"
	"github.com/phalanx-sched/phalanx/plugins/runtime"
)

// cyclePlugins act on scheduling cycles (plans, holds, queue blocking,
// events); the dry run asks the manager, the queues and the topology
// directly instead.
var cyclePlugins = sets.New(coscheduling.Name, capacityqueue.Name, networktopology.Name)

// Planner implements estimator.Planner over a running scheduler.
type Planner struct {
	rt      *runtime.Runtime
	fw      framework.Framework
	cache   internalcache.Cache
	snap    *internalcache.Snapshot
	profile string
	prio    func(name string) (int32, error)

	// mu serialises questions: they share the snapshot.
	mu sync.Mutex
}

// New builds the planner for a profile of the scheduler that app.Setup
// returned, with the out-of-tree registry it was given.
func New(ctx context.Context, cc *schedulerserverconfig.CompletedConfig, sched *scheduler.Scheduler, rt *runtime.Runtime, profileName string, outOfTree frameworkruntime.Registry) (*Planner, error) {
	running, ok := sched.Profiles[profileName]
	if !ok {
		return nil, fmt.Errorf("the scheduler has no profile %q (profiles: %v)", profileName, slices.Sorted(maps.Keys(sched.Profiles)))
	}
	var cfg *config.KubeSchedulerProfile
	for i := range cc.ComponentConfig.Profiles {
		if cc.ComponentConfig.Profiles[i].SchedulerName == profileName {
			cfg = &cc.ComponentConfig.Profiles[i]
		}
	}
	if cfg == nil {
		return nil, fmt.Errorf("profile %q is not in the scheduler's configuration", profileName)
	}
	if !running.HasFilterPlugins() {
		return nil, fmt.Errorf("profile %q has no Filter plugins", profileName)
	}
	enabled := running.ListPlugins()
	keep := func(set config.PluginSet) config.PluginSet {
		var out config.PluginSet
		for _, p := range set.Enabled {
			if !cyclePlugins.Has(p.Name) {
				out.Enabled = append(out.Enabled, p)
			}
		}
		return out
	}
	private := config.KubeSchedulerProfile{
		// A name of its own: plugins key what they add to the shared
		// informers by profile (DynamicResources' pod index, 1.37), and the
		// scheduler's profile of the same name has added it already.
		SchedulerName: profileName + "-dry-run",
		PluginConfig:  cfg.PluginConfig,
		Plugins: &config.Plugins{
			QueueSort: config.PluginSet{Enabled: []config.Plugin{{Name: names.PrioritySort}}},
			Bind:      config.PluginSet{Enabled: []config.Plugin{{Name: names.DefaultBinder}}},
			PreFilter: keep(enabled.PreFilter),
			Filter:    keep(enabled.Filter),
		},
	}
	registry := frameworkplugins.NewInTreeRegistry()
	if err := registry.Merge(outOfTree); err != nil {
		return nil, err
	}
	p := &Planner{rt: rt, cache: internalcache.New(ctx, nil, false, false), snap: internalcache.NewEmptySnapshot(), profile: profileName}
	recorder := cc.EventBroadcaster.NewRecorder(profileName)
	fw, err := frameworkruntime.NewFramework(ctx, registry, &private,
		frameworkruntime.WithClientSet(cc.Client),
		frameworkruntime.WithKubeConfig(cc.KubeConfig),
		frameworkruntime.WithInformerFactory(cc.InformerFactory),
		frameworkruntime.WithSharedDRAManager(running.SharedDRAManager()),
		frameworkruntime.WithSnapshotSharedLister(p.snap),
		// Pods nominated to nodes count as there, as in the scheduler's
		// cycles; the nominator is the scheduling queue's (it locks).
		frameworkruntime.WithPodNominator(running),
		frameworkruntime.WithEventRecorder(recorder),
		frameworkruntime.WithParallelism(int(cc.ComponentConfig.Parallelism)),
		// Flushed every second, as the scheduler's own recorder: with no
		// interval its goroutine flushes in a busy loop, a core gone.
		frameworkruntime.WithMetricsRecorder(metrics.NewMetricsAsyncRecorder(1000, time.Second, ctx.Done())),
	)
	if err != nil {
		return nil, fmt.Errorf("building the dry run's framework for profile %q: %w", profileName, err)
	}
	p.fw = fw
	prios := cc.InformerFactory.Scheduling().V1().PriorityClasses().Lister()
	p.prio = func(name string) (int32, error) {
		pc, err := prios.Get(name)
		if err != nil {
			return 0, err
		}
		return pc.Value, nil
	}
	if err := p.feed(cc); err != nil {
		return nil, err
	}
	cc.InformerFactory.Start(ctx.Done())
	return p, nil
}

// feed keeps the planner's node cache in step with the scheduler's
// informers: nodes, and pods bound to them.
func (p *Planner) feed(cc *schedulerserverconfig.CompletedConfig) error {
	logger := klog.Background().WithName("dryrun")
	if _, err := cc.InformerFactory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*v1.Node); ok {
				p.cache.AddNode(logger, n)
			}
		},
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*v1.Node)
			n, ok2 := cur.(*v1.Node)
			if ok1 && ok2 {
				p.cache.UpdateNode(logger, o, n)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if n, ok := obj.(*v1.Node); ok {
				_ = p.cache.RemoveNode(logger, n)
			}
		},
	}); err != nil {
		return err
	}
	bound := func(obj any) (*v1.Pod, bool) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		pod, ok := obj.(*v1.Pod)
		return pod, ok && pod.Spec.NodeName != ""
	}
	_, err := cc.InformerFactory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pod, ok := bound(obj); ok {
				_ = p.cache.AddPod(logger, pod)
			}
		},
		UpdateFunc: func(old, cur any) {
			o, wasBound := bound(old)
			n, isBound := bound(cur)
			switch {
			case wasBound && isBound:
				_ = p.cache.UpdatePod(logger, o, n)
			case isBound:
				_ = p.cache.AddPod(logger, n)
			case wasBound:
				_ = p.cache.RemovePod(logger, o)
			}
		},
		DeleteFunc: func(obj any) {
			if pod, ok := bound(obj); ok {
				_ = p.cache.RemovePod(logger, pod)
			}
		},
	})
	return err
}

// Copies answers one question: how many whole copies of the members fit
// now, deciding as the scheduler's next plan would.
func (p *Planner) Copies(ctx context.Context, q estimator.Question) (gang.Answer, error) {
	gangs := p.rt.GangsIfBuilt()
	if gangs == nil {
		return gang.Answer{}, fmt.Errorf("profile %q has no Coscheduling plugin", p.profile)
	}
	for _, pods := range append([][]*v1.Pod{q.Members}, q.Assumed...) {
		for _, pod := range pods {
			if err := p.setPriority(pod); err != nil {
				return gang.Answer{}, err
			}
			pod.Spec.SchedulerName = p.profile
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.cache.UpdateSnapshot(klog.FromContext(ctx), p.snap); err != nil {
		return gang.Answer{}, fmt.Errorf("updating the node snapshot: %w", err)
	}
	infos, err := p.snap.NodeInfos().List()
	if err != nil {
		return gang.Answer{}, err
	}
	rep := q.Members[0]
	state := framework.NewCycleState()
	if _, st, _ := p.fw.RunPreFilterPlugins(ctx, state, rep); !st.IsSuccess() {
		if st.Code() == fwk.Error {
			return gang.Answer{}, st.AsError()
		}
		return gang.Answer{Why: st.Message()}, nil
	}
	var skip []string
	if d := gangs.Devices; d != nil && d.Asks(rep) {
		skip = append(skip, probe.DRAPlugins...)
	}
	query := gang.Query{
		Members:  q.Members,
		Priority: *rep.Spec.Priority,
		Prober:   probe.Filters(p.fw, "dryrun", state, infos, skip...),
		Assumed:  q.Assumed,
	}
	query.Limiter = numatopology.Limiter(state)
	sg, err := subGroupsOf(q.Members)
	if err != nil {
		return gang.Answer{Why: "invalid sub-groups: " + err.Error()}, nil
	}
	var tree *topology.Tree
	if topo := p.rt.TopologyIfBuilt(); topo != nil {
		tree, _ = topo.View()
	}
	if tree != nil {
		required, preferred := gangspec.TopologyConstraint(nil, rep.Annotations)
		if required != "" || preferred != "" || sg != nil {
			query.Topology = &gang.Constraint{Tree: tree, Required: required, Preferred: preferred}
		}
	}
	if sg != nil {
		if query.Topology == nil {
			return gang.Answer{Why: "invalid sub-groups: they need the NetworkTopology plugin in the profile and a NetworkTopology (or HyperNodes)"}, nil
		}
		query.Topology.SubRequired, query.Topology.SubPreferred = sg.Required, sg.Preferred
		query.Spec = &gangspec.Spec{MinMember: len(q.Members), Annotations: rep.Annotations, SubGroups: sg}
	}
	if queues := p.rt.QueuesIfBuilt(); queues != nil {
		name := queues.QueueOf(rep)
		query.Admit = func(need resources.List) bool {
			ok, _ := queues.Snapshot(queue.Want{Queue: name, Need: need}).Admit(name, need)
			return ok
		}
	}
	return gangs.Manager.Copies(ctx, query), nil
}

// subGroupsOf reads the sub-group annotations of one set's template (its
// members carry them): nil without them. A set's members are ranked in the
// order given (Karmada's components in order, each one's replicas), the
// ranks their operator gives the pods it creates.
func subGroupsOf(members []*v1.Pod) (*gangspec.SubGroups, error) {
	sg, err := workload.SubGroupsByRank(nil, members[0].Annotations, len(members))
	if sg == nil || err != nil {
		return nil, err
	}
	for i, m := range members {
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		m.Labels[phalanxv1alpha1.RankLabel] = strconv.Itoa(i)
	}
	return sg, nil
}

func (p *Planner) setPriority(pod *v1.Pod) error {
	var prio int32
	if name := pod.Spec.PriorityClassName; name != "" {
		v, err := p.prio(name)
		if err != nil {
			return fmt.Errorf("priorityClassName %q: %w", name, err)
		}
		prio = v
	}
	pod.Spec.Priority = &prio
	return nil
}
