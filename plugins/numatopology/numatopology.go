// Package numatopology is the NUMATopology plugin: aligns CPUs, memory and
// devices to NUMA zones, from NodeResourceTopology objects.
package numatopology

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
const Name = "NUMATopology"

// NUMATopology places pods where one NUMA zone can host them.
type NUMATopology struct {
	args config.NUMATopologyArgs
}

var _ fwk.PreFilterPlugin = &NUMATopology{}

// New builds the plugin from validated args.
func New(_ context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, ok := obj.(*config.NUMATopologyArgs)
	if !ok {
		return nil, fmt.Errorf("want args of type NUMATopologyArgs, got %T", obj)
	}
	if err := validation.ValidateNUMATopologyArgs(field.NewPath("pluginConfig").Key(Name).Child("args"), args); err != nil {
		return nil, fmt.Errorf("profile %q: %w", h.ProfileName(), err)
	}
	return &NUMATopology{args: *args}, nil
}

// Name returns the plugin name.
func (pl *NUMATopology) Name() string { return Name }

// PreFilter will compute zone requirements; until then every pod passes.
func (pl *NUMATopology) PreFilter(context.Context, fwk.CycleState, *v1.Pod, []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	return nil, fwk.NewStatus(fwk.Skip)
}

// PreFilterExtensions returns nil.
func (pl *NUMATopology) PreFilterExtensions() fwk.PreFilterExtensions { return nil }
