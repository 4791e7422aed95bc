// Package groupclaims runs the in-tree DynamicResources plugin with
// group-level ResourceClaims (a Workload API PodGroup's spec.resourceClaims,
// KEP-5729) accepted, in the profiles that plan gangs.
//
// kube-scheduler accepts a claim owned by a PodGroup only with the
// DRAWorkloadResourceClaims gate, which requires GenericWorkload; that gate
// also switches the scheduler to upstream's pod-group scheduling cycle, which
// phalanx does not run (Coscheduling plans gangs). So phalanx builds the same
// plugin with only the claim handling turned on, and gives it the PodGroups
// from phalanx's own Workload API informer.
package groupclaims

import (
	"context"
	"fmt"
	"sync"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// Name is the plugin's name in a profile once Setup has put it in place of
// DynamicResources (metrics and --write-config-to show it).
const Name = "PhalanxDynamicResources"

// PodGroups finds a Workload API PodGroup; nil when it is unknown or the API
// is not served.
type PodGroups func(namespace, name string) *schedulingv1beta1.PodGroup

// Plugin is the in-tree DynamicResources plugin under Name.
type Plugin struct {
	*dynamicresources.DynamicResources
	// unreleased logs once that the in-tree state has no allocator to drop.
	unreleased sync.Once
}

// Name implements fwk.Plugin: the framework keys score weights, queueing
// hints and skipped plugins by it, so it must be the profile's name.
func (*Plugin) Name() string { return Name }

// Factory builds the plugin over podGroups.
func Factory(podGroups PodGroups) func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
	return func(ctx context.Context, args runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		if args == nil {
			args = &config.DynamicResourcesArgs{}
		}
		fts := feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
		fts.EnableDRAWorkloadResourceClaims = true
		pl, err := dynamicresources.New(ctx, args, handle{Handle: h, podGroups: podGroups}, fts)
		if err != nil {
			return nil, err
		}
		dr, ok := pl.(*dynamicresources.DynamicResources)
		if !ok {
			return nil, fmt.Errorf("%s: the in-tree plugin is a %T", names.DynamicResources, pl)
		}
		return &Plugin{DynamicResources: dr}, nil
	}
}

// handle gives the plugin phalanx's PodGroups: the framework's snapshot holds
// them only under the GenericWorkload gate.
type handle struct {
	fwk.Handle
	podGroups PodGroups
}

func (h handle) SnapshotSharedLister() fwk.SharedLister {
	return lister{SharedLister: h.Handle.SnapshotSharedLister(), podGroups: h.podGroups}
}

type lister struct {
	fwk.SharedLister
	podGroups PodGroups
}

func (l lister) PodGroups() fwk.PodGroupLister { return l.podGroups }

// Get implements fwk.PodGroupLister. An unknown PodGroup is no error: its
// members' claims are then bound to the pods, as without the gate.
func (f PodGroups) Get(namespace, name string) (*schedulingv1beta1.PodGroup, error) {
	return f(namespace, name), nil
}
