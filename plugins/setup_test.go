package plugins

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	config "k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/phalanx-sched/phalanx/plugins/coscheduling"
	"github.com/phalanx-sched/phalanx/plugins/groupclaims"
)

// TestUseGroupClaims: a profile that plans gangs runs groupclaims' plugin
// wherever it had DynamicResources (enabled, disabled, args); other
// profiles keep kube-scheduler's plugin.
func TestUseGroupClaims(t *testing.T) {
	dra, pg := "DynamicResources", groupclaims.Name
	args := &config.DynamicResourcesArgs{}
	profile := func(name string, gangs bool, draName string) config.KubeSchedulerProfile {
		p := config.KubeSchedulerProfile{SchedulerName: name, Plugins: &config.Plugins{
			MultiPoint: config.PluginSet{Enabled: []config.Plugin{{Name: "NodeResourcesFit"}, {Name: draName, Weight: 2}}},
			PreBind:    config.PluginSet{Disabled: []config.Plugin{{Name: draName}}},
		}, PluginConfig: []config.PluginConfig{{Name: draName, Args: args}}}
		if gangs {
			p.Plugins.MultiPoint.Enabled = append(p.Plugins.MultiPoint.Enabled, config.Plugin{Name: coscheduling.Name})
		}
		return p
	}
	for _, tc := range []struct {
		name  string
		gangs bool
		want  string
	}{
		{"gang profile", true, pg},
		{"default-scheduler", false, dra},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := []config.KubeSchedulerProfile{profile("p", tc.gangs, dra)}
			UseGroupClaims(got)
			if diff := cmp.Diff(profile("p", tc.gangs, tc.want), got[0]); diff != "" {
				t.Fatalf("profile (-want +got):\n%s", diff)
			}
		})
	}
}
