package numa

import (
	"reflect"
	"strings"
	"testing"

	"github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/apis/topology/v1alpha2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

const gpu v1.ResourceName = "nvidia.com/gpu"

const gi = int64(1) << 30

// res builds a ResourceInfo with allocatable and available.
func res(name, alloc, avail string) v1alpha2.ResourceInfo {
	return v1alpha2.ResourceInfo{
		Name:        name,
		Capacity:    resource.MustParse(alloc),
		Allocatable: resource.MustParse(alloc),
		Available:   resource.MustParse(avail),
	}
}

func attrs(kv ...string) v1alpha2.AttributeList {
	var out v1alpha2.AttributeList
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, v1alpha2.AttributeInfo{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

func TestFromNRTPolicy(t *testing.T) {
	cases := []struct {
		name   string
		legacy []string
		attrs  v1alpha2.AttributeList
		policy Policy
		scope  Scope
		err    string
	}{
		{name: "nothing: kubelet defaults", policy: None, scope: Container},
		{name: "attributes", attrs: attrs(AttributePolicy, "single-numa-node", AttributeScope, "pod"), policy: SingleNUMANode, scope: Pod},
		{name: "attributes win over legacy", legacy: []string{"BestEffortContainerLevel"},
			attrs: attrs(AttributePolicy, "restricted", AttributeScope, "pod"), policy: Restricted, scope: Pod},
		{name: "attribute policy, legacy scope", legacy: []string{"BestEffortPodLevel"},
			attrs: attrs(AttributePolicy, "single-numa-node"), policy: SingleNUMANode, scope: Pod},
		{name: "attribute policy only", attrs: attrs(AttributePolicy, "best-effort"), policy: BestEffort, scope: Container},
		{name: "attribute values are lenient", attrs: attrs(AttributePolicy, "SingleNUMANode", AttributeScope, "Container"), policy: SingleNUMANode, scope: Container},
		{name: "other attributes ignored", attrs: attrs("nodeTopologyPodsFingerprint", "pfp0v001abc", AttributePolicy, "none"), policy: None, scope: Container},
		{name: "legacy SingleNUMANodeContainerLevel", legacy: []string{"SingleNUMANodeContainerLevel"}, policy: SingleNUMANode, scope: Container},
		{name: "legacy SingleNUMANodePodLevel", legacy: []string{"SingleNUMANodePodLevel"}, policy: SingleNUMANode, scope: Pod},
		{name: "legacy RestrictedContainerLevel", legacy: []string{"RestrictedContainerLevel"}, policy: Restricted, scope: Container},
		{name: "legacy RestrictedPodLevel", legacy: []string{"RestrictedPodLevel"}, policy: Restricted, scope: Pod},
		{name: "legacy Restricted", legacy: []string{"Restricted"}, policy: Restricted, scope: Container},
		{name: "legacy BestEffortPodLevel", legacy: []string{"BestEffortPodLevel"}, policy: BestEffort, scope: Pod},
		{name: "legacy None", legacy: []string{"None"}, policy: None, scope: Container},
		{name: "legacy agreeing entries", legacy: []string{"Restricted", "RestrictedPodLevel"}, policy: Restricted, scope: Pod},
		{name: "unknown attribute policy", attrs: attrs(AttributePolicy, "numa-please"), err: "unknown topology manager policy"},
		{name: "unknown attribute scope", attrs: attrs(AttributeScope, "socket"), err: "unknown topology manager scope"},
		{name: "attribute twice", attrs: attrs(AttributePolicy, "none", AttributePolicy, "restricted"), err: "given twice"},
		{name: "unknown legacy", legacy: []string{"SingleSocket"}, err: "unknown topology policy"},
		{name: "conflicting legacy", legacy: []string{"SingleNUMANodePodLevel", "RestrictedPodLevel"}, err: "conflicting"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nrt := &v1alpha2.NodeResourceTopology{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, TopologyPolicies: tc.legacy, Attributes: tc.attrs}
			n, err := FromNRT(nrt)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n.Name != "n1" || n.Policy != tc.policy || n.Scope != tc.scope {
				t.Fatalf("got %s %s/%s, want n1 %s/%s", n.Name, n.Policy, n.Scope, tc.policy, tc.scope)
			}
		})
	}
	if _, err := FromNRT(nil); err == nil {
		t.Fatal("nil NRT: want an error")
	}
}

func TestFromNRTZones(t *testing.T) {
	nrt := &v1alpha2.NodeResourceTopology{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-1"},
		Attributes: attrs(AttributePolicy, "single-numa-node", AttributeScope, "container"),
		Zones: v1alpha2.ZoneList{
			{Name: "node-10", Type: "Node", Resources: v1alpha2.ResourceInfoList{res("cpu", "8", "1500m")}},
			{Name: "socket-0", Type: "Socket", Resources: v1alpha2.ResourceInfoList{res("cpu", "64", "64")}},
			{Name: "node-2", Type: "Node", Resources: v1alpha2.ResourceInfoList{
				res("cpu", "16", "12"), res("memory", "64Gi", "60Gi"), res("nvidia.com/gpu", "4", "2"), res("hugepages-1Gi", "8Gi", "8Gi"),
			}},
			{Name: "core-0", Type: "Core", Parent: "node-2", Resources: v1alpha2.ResourceInfoList{res("cpu", "2", "2")}},
			{Name: "node-1", Type: "Node", Resources: v1alpha2.ResourceInfoList{
				{Name: "cpu", Allocatable: resource.MustParse("16"), Available: resource.MustParse("-2")},
			}},
		},
	}
	n, err := FromNRT(nrt)
	if err != nil {
		t.Fatal(err)
	}
	want := []Zone{
		{Name: "node-1", Allocatable: resources.List{v1.ResourceCPU: 16000}, Available: resources.List{v1.ResourceCPU: 0}},
		{Name: "node-2",
			Allocatable: resources.List{v1.ResourceCPU: 16000, v1.ResourceMemory: 64 * gi, gpu: 4, "hugepages-1Gi": 8 * gi},
			Available:   resources.List{v1.ResourceCPU: 12000, v1.ResourceMemory: 60 * gi, gpu: 2, "hugepages-1Gi": 8 * gi}},
		{Name: "node-10", Allocatable: resources.List{v1.ResourceCPU: 8000}, Available: resources.List{v1.ResourceCPU: 1500}},
	}
	if !reflect.DeepEqual(n.Zones, want) {
		t.Fatalf("zones:\n got %+v\nwant %+v", n.Zones, want)
	}

	bad := []struct {
		name  string
		zones v1alpha2.ZoneList
		err   string
	}{
		{"duplicate zone", v1alpha2.ZoneList{{Name: "node-0", Type: "Node"}, {Name: "node-0", Type: "Node"}}, "given twice"},
		{"unnamed zone", v1alpha2.ZoneList{{Type: "Node"}}, "without a name"},
		{"duplicate resource", v1alpha2.ZoneList{{Name: "node-0", Type: "Node", Resources: v1alpha2.ResourceInfoList{res("cpu", "1", "1"), res("cpu", "2", "2")}}}, "given twice"},
		{"negative allocatable", v1alpha2.ZoneList{{Name: "node-0", Type: "Node", Resources: v1alpha2.ResourceInfoList{res("cpu", "-1", "0")}}}, "negative"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromNRT(&v1alpha2.NodeResourceTopology{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Zones: tc.zones})
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err = %v, want %q", err, tc.err)
			}
		})
	}
}
