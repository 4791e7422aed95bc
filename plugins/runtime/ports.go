package runtime

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// FrameworkPorts are what the runtime takes from the scheduler framework:
// the process's informers, client, client config and event recorder, and the
// two calls it makes into the scheduler (wake pods, reject pods waiting in
// Permit). The first plugin built passes them; every profile of a process
// shares them, so later ones are ignored. The runtime keeps no framework
// handle.
type FrameworkPorts struct {
	Informers informers.SharedInformerFactory
	Client    kubernetes.Interface
	// Config is the scheduler's client config; nil when every client the
	// runtime needs is given in Clients (tests).
	Config    *rest.Config
	Events    events.EventRecorder
	Activator PodActivator
	Waiting   WaitingPods
	// DRA is the framework's DRA manager (allocated and in-flight claims,
	// slices, classes); nil leaves devices uncounted.
	DRA fwk.SharedDRAManager
}

// PodActivator moves pods back to the scheduling queue, past any backoff
// (the framework handle is one).
type PodActivator interface {
	Activate(logger klog.Logger, pods map[string]*v1.Pod)
}

// WaitingPods rejects a pod waiting in Permit, in a plugin's name; a pod
// that is not waiting is left alone.
type WaitingPods interface {
	Reject(uid types.UID, plugin, msg string)
}
