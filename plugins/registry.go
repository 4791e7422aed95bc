// Package plugins registers the phalanx plugins with the kube-scheduler.
package plugins

import (
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	// Registers the plugin args in kube-scheduler's config scheme.
	_ "github.com/phalanx-sched/phalanx/apis/config/scheme"
	"github.com/phalanx-sched/phalanx/plugins/capacityqueue"
	"github.com/phalanx-sched/phalanx/plugins/coscheduling"
	"github.com/phalanx-sched/phalanx/plugins/networktopology"
	"github.com/phalanx-sched/phalanx/plugins/numatopology"
)

// Options registers every phalanx plugin, for app.NewSchedulerCommand or app.Setup.
func Options() []app.Option {
	return []app.Option{
		app.WithPlugin(coscheduling.Name, coscheduling.New),
		app.WithPlugin(capacityqueue.Name, capacityqueue.New),
		app.WithPlugin(networktopology.Name, networktopology.New),
		app.WithPlugin(numatopology.Name, numatopology.New),
	}
}
