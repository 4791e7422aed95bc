package numa

import (
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Unit is one thing the Topology Manager places: a container (container
// scope) or the whole pod (pod scope).
type Unit struct {
	// Name is the container name, "" for the pod (pod scope).
	Name string
	// Init is set for init containers, sidecars included.
	Init bool
	// Request is the aligned request that must fit within the unit's zones
	// when it is admitted (for pod scope the peak: the larger of the init
	// phase and the running phase).
	Request resources.List
	// Hold is what the unit keeps once the pod runs: Request for app
	// containers and sidecars, nothing for regular init containers (their
	// resources are released to the next containers), and the sum of app
	// containers and sidecars for pod scope.
	Hold resources.List
}

// Transient reports whether the unit gives its resources back before the pod
// runs (a regular init container).
func (u Unit) Transient() bool { return u.Init && len(u.Hold) == 0 }

// NeedsAlignment reports whether any container of the pod requests a resource
// the kubelet aligns to NUMA zones (see AlignedRequests).
func NeedsAlignment(pod *v1.Pod) bool {
	guaranteed := IsGuaranteed(pod)
	for i := range pod.Spec.InitContainers {
		if len(alignedOf(&pod.Spec.InitContainers[i], guaranteed)) > 0 {
			return true
		}
	}
	for i := range pod.Spec.Containers {
		if len(alignedOf(&pod.Spec.Containers[i], guaranteed)) > 0 {
			return true
		}
	}
	return false
}

// AlignedRequests returns the units the kubelet places for the pod under the
// given scope, in the kubelet's admission order, leaving out units with no
// aligned request.
//
// Aligned resources of a container:
//   - cpu, if the pod is Guaranteed and the container's CPU request is a whole
//     number of CPUs (static CPU manager: exclusive CPUs);
//   - memory and hugepages-*, if the pod is Guaranteed (static memory manager);
//   - extended resources (devices such as nvidia.com/gpu), for any pod.
//
// Container scope: one unit per init container (in order, each released
// before the next container unless it is a sidecar, i.e. restartPolicy
// Always), then one per app container. Pod scope: one unit whose Request is
// the peak (max over the init phase, where an init container runs beside the
// sidecars started before it, and the running phase, app containers plus
// sidecars) and whose Hold is the running phase.
//
// Pod overhead and pod-level resources are not aligned by the kubelet's
// resource managers and are left out.
func AlignedRequests(pod *v1.Pod, scope Scope) []Unit {
	guaranteed := IsGuaranteed(pod)
	var units []Unit
	sidecars := resources.List{}
	peak := resources.List{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		req := alignedOf(c, guaranteed)
		sidecar := isSidecar(c)
		if sidecar {
			sidecars.Add(req)
			maxInto(peak, sidecars)
		} else {
			during := sidecars.Clone()
			during.Add(req)
			maxInto(peak, during)
		}
		if scope == Container && len(req) > 0 {
			u := Unit{Name: c.Name, Init: true, Request: req}
			if sidecar {
				u.Hold = req.Clone()
			}
			units = append(units, u)
		}
	}
	running := sidecars.Clone()
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		req := alignedOf(c, guaranteed)
		running.Add(req)
		if scope == Container && len(req) > 0 {
			units = append(units, Unit{Name: c.Name, Request: req, Hold: req.Clone()})
		}
	}
	if scope == Container {
		return units
	}
	maxInto(peak, running)
	peak, running = nonZero(peak), nonZero(running)
	if len(peak) == 0 {
		return nil
	}
	return []Unit{{Request: peak, Hold: running}}
}

// alignedOf is the aligned part of one container's effective requests.
func alignedOf(c *v1.Container, guaranteed bool) resources.List {
	out := resources.List{}
	for name, v := range effectiveRequests(c) {
		if v <= 0 {
			continue
		}
		switch {
		case name == v1.ResourceCPU:
			if guaranteed && v%1000 == 0 {
				out[name] = v
			}
		case name == v1.ResourceMemory || isHugePages(name):
			if guaranteed {
				out[name] = v
			}
		case isDevice(name):
			out[name] = v
		}
	}
	return out
}

// effectiveRequests are the container's requests with limits filling in
// missing requests, as API defaulting does.
func effectiveRequests(c *v1.Container) resources.List {
	merged := v1.ResourceList{}
	for name, q := range c.Resources.Limits {
		merged[name] = q
	}
	for name, q := range c.Resources.Requests {
		merged[name] = q
	}
	return resources.FromResourceList(merged)
}

func isSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

func isHugePages(name v1.ResourceName) bool {
	return strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix)
}

// isDevice reports whether name is an extended resource (outside the
// kubernetes.io namespace, with a domain), which device plugins serve.
func isDevice(name v1.ResourceName) bool {
	s := string(name)
	if !strings.Contains(s, "/") || strings.Contains(s, v1.ResourceDefaultNamespacePrefix) {
		return false
	}
	return !strings.HasPrefix(s, v1.DefaultResourceRequestsPrefix)
}

// IsGuaranteed reports whether the pod has Guaranteed QoS. A QoS class in the
// pod's status (set by the API server, immutable) is taken as is. Otherwise,
// with pod-level resources, the pod's cpu and memory limits must be set and
// equal to its requests; without them every container (init and app) must
// have cpu and memory limits equal to its requests, requests defaulting to
// limits.
func IsGuaranteed(pod *v1.Pod) bool {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass == v1.PodQOSGuaranteed
	}
	if pod.Spec.Resources != nil && (len(pod.Spec.Resources.Requests) > 0 || len(pod.Spec.Resources.Limits) > 0) {
		return guaranteedResources(pod.Spec.Resources.Requests, pod.Spec.Resources.Limits)
	}
	n := 0
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if !guaranteedResources(cs[i].Resources.Requests, cs[i].Resources.Limits) {
				return false
			}
			n++
		}
	}
	return n > 0
}

func guaranteedResources(requests, limits v1.ResourceList) bool {
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		limit, ok := limits[name]
		if !ok || limit.Sign() <= 0 {
			return false
		}
		if req, ok := requests[name]; ok && req.Cmp(limit) != 0 {
			return false
		}
	}
	return true
}

func maxInto(dst, src resources.List) {
	for k, v := range src {
		if v > dst[k] {
			dst[k] = v
		}
	}
}

func nonZero(l resources.List) resources.List {
	out := resources.List{}
	for k, v := range l {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}
