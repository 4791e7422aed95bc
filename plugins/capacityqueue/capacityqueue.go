// Package capacityqueue is the CapacityQueue plugin: weighted, hierarchical
// queues with guarantees, limits and gang-aware reclaim.
package capacityqueue

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
const Name = "CapacityQueue"

// CapacityQueue admits gangs against their queue's allowance.
type CapacityQueue struct {
	args config.CapacityQueueArgs
}

var _ fwk.PreFilterPlugin = &CapacityQueue{}

// New builds the plugin from validated args.
func New(_ context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, ok := obj.(*config.CapacityQueueArgs)
	if !ok {
		return nil, fmt.Errorf("want args of type CapacityQueueArgs, got %T", obj)
	}
	if err := validation.ValidateCapacityQueueArgs(field.NewPath("pluginConfig").Key(Name).Child("args"), args); err != nil {
		return nil, fmt.Errorf("profile %q: %w", h.ProfileName(), err)
	}
	return &CapacityQueue{args: *args}, nil
}

// Name returns the plugin name.
func (pl *CapacityQueue) Name() string { return Name }

// PreFilter will admit gangs by queue allowance; until then every pod passes.
func (pl *CapacityQueue) PreFilter(context.Context, fwk.CycleState, *v1.Pod, []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	return nil, fwk.NewStatus(fwk.Skip)
}

// PreFilterExtensions returns nil.
func (pl *CapacityQueue) PreFilterExtensions() fwk.PreFilterExtensions { return nil }
