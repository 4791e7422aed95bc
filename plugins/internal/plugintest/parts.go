package plugintest

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/plugins/internal/ports"
	"github.com/phalanx-sched/phalanx/plugins/runtime"
	"github.com/phalanx-sched/phalanx/plugins/runtime/gangs"
)

// Parts is a do-nothing plugin whose factory builds the runtime's parts.
type Parts struct{}

func (Parts) Name() string { return "Parts" }

func (Parts) PreFilter(context.Context, fwk.CycleState, *v1.Pod, []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	return nil, nil
}

func (Parts) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// BuildParts starts an env whose one plugin builds the runtime's gangs and
// queues (default queue "default").
func BuildParts(t *testing.T, objs Objects) (*Env, *gangs.Gangs, *runtime.Queues) {
	t.Helper()
	var g *gangs.Gangs
	var q *runtime.Queues
	e := New(t, objs, Plugin{Name: "Parts", Extensions: []string{"PreFilter"},
		New: func(ctx context.Context, h fwk.Handle, rt *runtime.Runtime) (fwk.Plugin, error) {
			var err error
			if g, err = rt.Gangs(ports.Of(h)); err != nil {
				return nil, err
			}
			q, err = rt.Queues(ports.Of(h), h.ProfileName(), runtime.QueueOptions{DefaultQueue: "default"})
			return Parts{}, err
		}})
	return e, g, q
}
