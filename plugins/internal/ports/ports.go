// Package ports are the narrow ports the runtime is built over (Framework),
// taken from a scheduler framework handle so that the runtime keeps no
// handle, and the fan-out of the scheduler's pod events to the runtime's parts.
package ports

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// Of returns the runtime's ports of a framework handle.
func Of(h fwk.Handle) Framework {
	return Framework{
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

// Framework is what the runtime takes from the scheduler framework:
// the process's informers, client, client config and event recorder, and the
// two calls it makes into the scheduler (wake pods, reject pods waiting in
// Permit). The first plugin built passes them; every profile of a process
// shares them, so later ones are ignored. The runtime keeps no framework
// handle.
type Framework struct {
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

// PodEvents fans the scheduler's pod events out to the runtime's parts.
// Parts are built while the scheduler is set up, before its informers
// start, so no event is missed.
type PodEvents struct {
	mu       sync.Mutex
	handlers []cache.ResourceEventHandler
}

// Add adds a handler of the scheduler's pod events.
func (p *PodEvents) Add(h cache.ResourceEventHandler) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.handlers = append(p.handlers, h)
}

// Each calls f with every handler, in the order they were added.
func (p *PodEvents) Each(f func(cache.ResourceEventHandler)) {
	p.mu.Lock()
	hs := p.handlers
	p.mu.Unlock()
	for _, h := range hs {
		f(h)
	}
}

// Handler is the one handler the scheduler's pod informer is given: it
// delivers each event to every part's handler.
func (p *PodEvents) Handler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { p.Each(func(h cache.ResourceEventHandler) { h.OnAdd(obj, false) }) },
		UpdateFunc: func(oldObj, newObj any) { p.Each(func(h cache.ResourceEventHandler) { h.OnUpdate(oldObj, newObj) }) },
		DeleteFunc: func(obj any) { p.Each(func(h cache.ResourceEventHandler) { h.OnDelete(obj) }) },
	}
}
