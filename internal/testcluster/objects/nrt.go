package objects

import (
	"strings"

	"github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/apis/topology/v1alpha2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ZoneSpec describes one NUMA zone of a NodeResourceTopology object. Capacity,
// allocatable and available are all set to the given amounts (a node with
// nothing running, as NFD topology-updater reports it). Empty or zero
// amounts leave the resource out of the zone.
type ZoneSpec struct {
	Name        string // e.g. "node-0"
	CPU, Memory string // e.g. "16", "64Gi"
	GPUs        int64
}

// NRT builds the NodeResourceTopology object of a node as NFD topology-updater
// publishes it: cluster-scoped, named after the node, the kubelet's Topology
// Manager policy ("single-numa-node", "restricted", "best-effort", "none") and
// scope ("container", "pod"; "" leaves the attribute out) as the attributes
// topologyManagerPolicy/topologyManagerScope and as the deprecated
// TopologyPolicies entry (e.g. "SingleNUMANodeContainerLevel"), and one zone
// of type "Node" per ZoneSpec with resources cpu, memory and nvidia.com/gpu.
// A policy with no legacy spelling is published in the attributes only.
func NRT(node, policy, scope string, zones ...ZoneSpec) *v1alpha2.NodeResourceTopology {
	nrt := &v1alpha2.NodeResourceTopology{
		ObjectMeta: metav1.ObjectMeta{Name: node},
		Attributes: v1alpha2.AttributeList{{Name: "topologyManagerPolicy", Value: policy}},
		Zones:      v1alpha2.ZoneList{},
	}
	if scope != "" {
		nrt.Attributes = append(nrt.Attributes, v1alpha2.AttributeInfo{Name: "topologyManagerScope", Value: scope})
	}
	if legacy := legacyTopologyPolicy(policy, scope); legacy != "" {
		nrt.TopologyPolicies = []string{string(legacy)}
	}
	for _, z := range zones {
		zone := v1alpha2.Zone{Name: z.Name, Type: "Node", Resources: v1alpha2.ResourceInfoList{}}
		add := func(name v1.ResourceName, q resource.Quantity) {
			zone.Resources = append(zone.Resources, v1alpha2.ResourceInfo{
				Name: string(name), Capacity: q.DeepCopy(), Allocatable: q.DeepCopy(), Available: q.DeepCopy(),
			})
		}
		if z.CPU != "" {
			add(v1.ResourceCPU, resource.MustParse(z.CPU))
		}
		if z.Memory != "" {
			add(v1.ResourceMemory, resource.MustParse(z.Memory))
		}
		if z.GPUs > 0 {
			add(GPU, *resource.NewQuantity(z.GPUs, resource.DecimalSI))
		}
		nrt.Zones = append(nrt.Zones, zone)
	}
	return nrt
}

// legacyTopologyPolicy maps a kubelet policy and scope to the deprecated
// TopologyPolicies value, as NFD topology-updater does (scope defaults to
// container).
func legacyTopologyPolicy(policy, scope string) v1alpha2.TopologyManagerPolicy {
	pod := strings.EqualFold(scope, "pod")
	switch strings.ToLower(policy) {
	case "single-numa-node":
		if pod {
			return v1alpha2.SingleNUMANodePodLevel
		}
		return v1alpha2.SingleNUMANodeContainerLevel
	case "restricted":
		if pod {
			return v1alpha2.RestrictedPodLevel
		}
		return v1alpha2.RestrictedContainerLevel
	case "best-effort":
		if pod {
			return v1alpha2.BestEffortPodLevel
		}
		return v1alpha2.BestEffortContainerLevel
	case "none":
		return v1alpha2.None
	}
	return ""
}
