package plugins

import (
	"context"
	"reflect"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	schedulerserverconfig "k8s.io/kubernetes/cmd/kube-scheduler/app/config"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler"
	kubeschedulerconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/phalanx-sched/phalanx/internal/status"
	"github.com/phalanx-sched/phalanx/plugins/coscheduling"
	"github.com/phalanx-sched/phalanx/plugins/groupclaims"
)

// Setup is kube-scheduler's app.Setup (same steps, options and checks) with
// each profile's event recorder wrapped in a status.EventRecorder, so that
// the profile's Coscheduling plugin may leave out gang members' Scheduled
// events: app.Setup builds the recorders from its own broadcaster, with no
// way to wrap them.
func Setup(ctx context.Context, opts *options.Options, outOfTreeRegistryOptions ...app.Option) (*schedulerserverconfig.CompletedConfig, *scheduler.Scheduler, error) {
	cfg, err := latest.Default()
	if err != nil {
		return nil, nil, err
	}
	opts.ComponentConfig = cfg
	if errs := opts.Validate(); len(errs) > 0 {
		return nil, nil, utilerrors.NewAggregate(errs)
	}
	c, err := opts.Config(ctx)
	if err != nil {
		return nil, nil, err
	}
	cc := c.Complete()
	UseGroupClaims(cc.ComponentConfig.Profiles)

	outOfTreeRegistry := make(frameworkruntime.Registry)
	for _, option := range outOfTreeRegistryOptions {
		if err := option(outOfTreeRegistry); err != nil {
			return nil, nil, err
		}
	}
	recorderFactory := func(name string) events.EventRecorderLogger {
		return status.NewEventRecorder(cc.EventBroadcaster.NewRecorder(name))
	}
	var completedProfiles []kubeschedulerconfig.KubeSchedulerProfile
	sched, err := scheduler.New(ctx,
		cc.Client,
		cc.InformerFactory,
		cc.DynInformerFactory,
		recorderFactory,
		scheduler.WithComponentConfigVersion(cc.ComponentConfig.TypeMeta.APIVersion),
		scheduler.WithKubeConfig(cc.KubeConfig),
		scheduler.WithProfiles(cc.ComponentConfig.Profiles...),
		scheduler.WithPercentageOfNodesToScore(cc.ComponentConfig.PercentageOfNodesToScore),
		scheduler.WithFrameworkOutOfTreeRegistry(outOfTreeRegistry),
		scheduler.WithPodMaxBackoffSeconds(cc.ComponentConfig.PodMaxBackoffSeconds),
		scheduler.WithPodInitialBackoffSeconds(cc.ComponentConfig.PodInitialBackoffSeconds),
		scheduler.WithPodMaxInUnschedulablePodsDuration(cc.PodMaxInUnschedulablePodsDuration),
		scheduler.WithExtenders(cc.ComponentConfig.Extenders...),
		scheduler.WithParallelism(cc.ComponentConfig.Parallelism),
		scheduler.WithBuildFrameworkCapturer(func(profile kubeschedulerconfig.KubeSchedulerProfile) {
			completedProfiles = append(completedProfiles, profile)
		}),
	)
	if err != nil {
		return nil, nil, err
	}
	if err := options.LogOrWriteConfig(klog.FromContext(ctx), opts.WriteConfigTo, &cc.ComponentConfig, completedProfiles); err != nil {
		return nil, nil, err
	}
	return &cc, sched, nil
}

// UseGroupClaims puts groupclaims' plugin in place of DynamicResources in
// every profile that plans gangs (enables Coscheduling): enabled and
// disabled at the same extension points, with the same args. Other profiles
// (a replace-mode default-scheduler) keep kube-scheduler's plugin as it is.
func UseGroupClaims(profiles []kubeschedulerconfig.KubeSchedulerProfile) {
	for i := range profiles {
		p := &profiles[i]
		if p.Plugins == nil || !enables(p.Plugins, coscheduling.Name) {
			continue
		}
		for _, set := range pluginSets(p.Plugins) {
			for _, list := range [][]kubeschedulerconfig.Plugin{set.Enabled, set.Disabled} {
				for j := range list {
					if list[j].Name == names.DynamicResources {
						list[j].Name = groupclaims.Name
					}
				}
			}
		}
		for j := range p.PluginConfig {
			if p.PluginConfig[j].Name == names.DynamicResources {
				p.PluginConfig[j].Name = groupclaims.Name
			}
		}
	}
}

func enables(plugins *kubeschedulerconfig.Plugins, name string) bool {
	for _, set := range pluginSets(plugins) {
		for _, pl := range set.Enabled {
			if pl.Name == name {
				return true
			}
		}
	}
	return false
}

// pluginSets are every extension point's set of a profile, MultiPoint
// included (read by reflection: each Kubernetes release adds points).
func pluginSets(plugins *kubeschedulerconfig.Plugins) []*kubeschedulerconfig.PluginSet {
	var out []*kubeschedulerconfig.PluginSet
	v := reflect.ValueOf(plugins).Elem()
	for i := range v.NumField() {
		if set, ok := v.Field(i).Addr().Interface().(*kubeschedulerconfig.PluginSet); ok {
			out = append(out, set)
		}
	}
	return out
}
