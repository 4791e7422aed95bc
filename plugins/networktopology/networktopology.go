// Package networktopology is the NetworkTopology plugin: keeps each gang
// inside one network domain (leaf, spine, InfiniBand cluster).
package networktopology

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/apis/config"
	"github.com/phalanx-sched/phalanx/apis/config/validation"
)

// Name is the plugin name used in the scheduler configuration.
const Name = "NetworkTopology"

// NetworkTopology keeps gangs inside network domains.
type NetworkTopology struct {
	args config.NetworkTopologyArgs
}

var _ fwk.PreFilterPlugin = &NetworkTopology{}

// New builds the plugin from validated args.
func New(_ context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, ok := obj.(*config.NetworkTopologyArgs)
	if !ok {
		return nil, fmt.Errorf("want args of type NetworkTopologyArgs, got %T", obj)
	}
	if err := validation.ValidateNetworkTopologyArgs(field.NewPath("pluginConfig").Key(Name).Child("args"), args); err != nil {
		return nil, fmt.Errorf("profile %q: %w", h.ProfileName(), err)
	}
	return &NetworkTopology{args: *args}, nil
}

// Name returns the plugin name.
func (pl *NetworkTopology) Name() string { return Name }

// PreFilter will resolve topology constraints; until then every pod passes.
func (pl *NetworkTopology) PreFilter(context.Context, fwk.CycleState, *v1.Pod, []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	return nil, fwk.NewStatus(fwk.Skip)
}

// PreFilterExtensions returns nil.
func (pl *NetworkTopology) PreFilterExtensions() fwk.PreFilterExtensions { return nil }
