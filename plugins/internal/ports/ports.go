// Package ports takes from a scheduler framework handle the narrow ports the
// runtime is built over (runtime.FrameworkPorts), so that the runtime keeps
// no handle.
package ports

import (
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/plugins/runtime"
)

// Of returns the runtime's ports of a framework handle.
func Of(h fwk.Handle) runtime.FrameworkPorts {
	return runtime.FrameworkPorts{
		Informers: h.SharedInformerFactory(),
		Client:    h.ClientSet(),
		Config:    h.KubeConfig(),
		Events:    h.EventRecorder(),
		Activator: h,
		Waiting:   waiting{h},
		DRA:       h.SharedDRAManager(),
	}
}

// waiting rejects pods waiting in the handle's Permit.
type waiting struct{ h fwk.Handle }

func (w waiting) Reject(uid types.UID, plugin, msg string) {
	if wp := w.h.GetWaitingPod(uid); wp != nil {
		wp.Reject(plugin, msg)
	}
}
