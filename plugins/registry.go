// Package plugins registers the phalanx plugins with the kube-scheduler.
package plugins

import (
	"context"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/pkg/features"

	// Registers the plugin args in kube-scheduler's config scheme.
	_ "github.com/phalanx-sched/phalanx/apis/config/scheme"
	"github.com/phalanx-sched/phalanx/plugins/capacityqueue"
	"github.com/phalanx-sched/phalanx/plugins/coscheduling"
	"github.com/phalanx-sched/phalanx/plugins/groupclaims"
	"github.com/phalanx-sched/phalanx/plugins/networktopology"
	"github.com/phalanx-sched/phalanx/plugins/numatopology"
	"github.com/phalanx-sched/phalanx/plugins/runtime"
)

// Options registers every phalanx plugin, for app.NewSchedulerCommand or
// app.Setup. The plugins of one scheduler share one runtime, built here and
// handed to each factory: one view of the cluster and one set of holds. The
// runtime's informers and background work run until ctx ends.
func Options(ctx context.Context) []app.Option {
	return OptionsWith(runtime.New(ctx, nil))
}

// OptionsWith registers the plugins over a given runtime (tests and tools
// that ask the runtime's gang manager directly).
func OptionsWith(rt *runtime.Runtime) []app.Option {
	return []app.Option{
		app.WithPlugin(coscheduling.Name, coscheduling.Factory(rt)),
		app.WithPlugin(capacityqueue.Name, capacityqueue.Factory(rt)),
		app.WithPlugin(networktopology.Name, networktopology.Factory(rt)),
		app.WithPlugin(numatopology.Name, numatopology.Factory(rt)),
		app.WithPlugin(groupclaims.Name, groupclaims.Factory(rt.UpstreamPodGroup)),
	}
}

// SetFeatureDefaults sets the kube-scheduler feature gates phalanx runs with
// unless --feature-gates says otherwise (docs/deploy.md says why for each).
// NominatedNodeNameForExpectation is off: gang members wait in Permit by
// design, and the gate would write a nomination to the API for each of them
// (one request per member) that a scheduler dying in the middle of a gang
// leaves behind, making its successor see those nodes as taken.
// SchedulerAsyncAPICalls is on: a refused member's status write otherwise
// runs inside the scheduling loop, one round trip per member, and a gang
// refused whole stalls every pod behind it (docs/benchmarks.md, the 512-node
// trace); upstream's reason to keep it off, client-side throttling of the
// binds behind those writes, is far from the canonical profile's qps.
func SetFeatureDefaults() error {
	return utilfeature.DefaultMutableFeatureGate.SetFromMap(map[string]bool{
		string(features.NominatedNodeNameForExpectation): false,
		string(features.SchedulerAsyncAPICalls):          true,
	})
}
