package objects

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// quantity renders one amount of a resource list ("" when absent).
func quantity(l v1.ResourceList, name v1.ResourceName) string {
	q, ok := l[name]
	if !ok {
		return ""
	}
	return q.String()
}

func TestNode(t *testing.T) {
	taint := v1.Taint{Key: "gpu", Effect: v1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name                 string
		spec                 NodeSpec
		cpu, mem, gpus, pods string
		labels               map[string]string
	}{
		{"defaults", NodeSpec{Name: "n"}, "", "", "", "110", map[string]string{v1.LabelHostname: "n"}},
		{"everything", NodeSpec{Name: "g", CPU: "8", Memory: "64Gi", GPUs: 4, Pods: 20, Labels: map[string]string{"zone": "a"}, Taints: []v1.Taint{taint}},
			"8", "64Gi", "4", "20", map[string]string{v1.LabelHostname: "g", "zone": "a"}},
		{"a label overrides the hostname", NodeSpec{Name: "n", Labels: map[string]string{v1.LabelHostname: "other"}}, "", "", "", "110", map[string]string{v1.LabelHostname: "other"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.spec.Node()
			c := n.Status.Capacity
			if quantity(c, v1.ResourceCPU) != tc.cpu || quantity(c, v1.ResourceMemory) != tc.mem || quantity(c, GPU) != tc.gpus || quantity(c, v1.ResourcePods) != tc.pods {
				t.Fatalf("capacity %v", c)
			}
			for name, q := range c {
				if a := n.Status.Allocatable[name]; a.Cmp(q) != 0 {
					t.Fatalf("allocatable %s = %s, capacity %s", name, a.String(), q.String())
				}
			}
			if len(n.Labels) != len(tc.labels) {
				t.Fatalf("labels %v, want %v", n.Labels, tc.labels)
			}
			for k, v := range tc.labels {
				if n.Labels[k] != v {
					t.Fatalf("labels %v, want %v", n.Labels, tc.labels)
				}
			}
			if len(n.Spec.Taints) != len(tc.spec.Taints) {
				t.Fatalf("taints %v", n.Spec.Taints)
			}
			if n.Name != tc.spec.Name || len(n.Status.Conditions) != 1 || n.Status.Conditions[0].Type != v1.NodeReady || n.Status.Conditions[0].Status != v1.ConditionTrue {
				t.Fatalf("node %s conditions %v, want Ready", n.Name, n.Status.Conditions)
			}
		})
	}
}

func TestPod(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		spec                 PodSpec
		scheduler, namespace string
		limitCPU, limitGPU   string
		group                string
	}{
		{"defaults", PodSpec{Name: "p", CPU: "1"}, "phalanx-scheduler", metav1.NamespaceDefault, "", "", ""},
		{"memory only", PodSpec{Name: "p", Memory: "2Gi"}, "phalanx-scheduler", metav1.NamespaceDefault, "", "", ""},
		{"GPUs are limited as requested", PodSpec{Name: "p", Namespace: "ns", SchedulerName: "other", CPU: "1", GPUs: 2}, "other", "ns", "", "2", ""},
		{"guaranteed", PodSpec{Name: "p", CPU: "2", Memory: "1Gi", GPUs: 1, Guaranteed: true}, "phalanx-scheduler", metav1.NamespaceDefault, "2", "1", ""},
		{"in a gang", PodSpec{Name: "p", PodGroup: "g", Labels: map[string]string{"app": "x"}}, "phalanx-scheduler", metav1.NamespaceDefault, "", "", "g"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.spec.Pod()
			if p.Spec.SchedulerName != tc.scheduler || p.Namespace != tc.namespace || p.Name != tc.spec.Name {
				t.Fatalf("pod %s/%s scheduler %s", p.Namespace, p.Name, p.Spec.SchedulerName)
			}
			if len(p.Spec.Containers) != 1 {
				t.Fatalf("%d containers, want one", len(p.Spec.Containers))
			}
			res := p.Spec.Containers[0].Resources
			if quantity(res.Requests, v1.ResourceCPU) != tc.spec.CPU || quantity(res.Requests, v1.ResourceMemory) != tc.spec.Memory {
				t.Fatalf("requests %v", res.Requests)
			}
			if quantity(res.Limits, v1.ResourceCPU) != tc.limitCPU || quantity(res.Limits, GPU) != tc.limitGPU {
				t.Fatalf("limits %v", res.Limits)
			}
			if got := p.Labels[pgv1alpha1.PodGroupLabel]; got != tc.group {
				t.Fatalf("PodGroup label %q, want %q", got, tc.group)
			}
			for k, v := range tc.spec.Labels {
				if p.Labels[k] != v {
					t.Fatalf("labels %v lack %s=%s", p.Labels, k, v)
				}
			}
			if ptr.Deref(p.Spec.TerminationGracePeriodSeconds, -1) != 0 {
				t.Fatal("pods are to go at once")
			}
		})
	}
	// The spec's labels are copied, not shared with the pod.
	s := PodSpec{Name: "p", PodGroup: "g", Labels: map[string]string{"app": "x"}}
	_ = s.Pod()
	if _, ok := s.Labels[pgv1alpha1.PodGroupLabel]; ok {
		t.Fatal("Pod wrote into the spec's labels")
	}
}

// TestPodPassesThrough: what the spec says of scheduling reaches the pod
// as it is.
func TestPodPassesThrough(t *testing.T) {
	tol := v1.Toleration{Key: "gpu", Operator: v1.TolerationOpExists}
	s := PodSpec{Name: "p", Priority: ptr.To[int32](7), PriorityClassName: "high",
		NodeSelector: map[string]string{"zone": "a"}, Tolerations: []v1.Toleration{tol},
		Annotations: map[string]string{"a": "b"}}
	p := s.Pod()
	if ptr.Deref(p.Spec.Priority, 0) != 7 || p.Spec.PriorityClassName != "high" || p.Spec.NodeSelector["zone"] != "a" ||
		len(p.Spec.Tolerations) != 1 || p.Spec.Tolerations[0] != tol || p.Annotations["a"] != "b" {
		t.Fatalf("pod spec %+v annotations %v", p.Spec, p.Annotations)
	}
}

func TestPodGroup(t *testing.T) {
	for ns, want := range map[string]string{"": metav1.NamespaceDefault, "team": "team"} {
		pg := PodGroup(ns, "g", 3)
		if pg.Namespace != want || pg.Name != "g" || pg.Spec.MinMember != 3 {
			t.Fatalf("PodGroup(%q) = %s/%s minMember %d", ns, pg.Namespace, pg.Name, pg.Spec.MinMember)
		}
	}
}

func TestNRTPolicies(t *testing.T) {
	for _, tc := range []struct {
		policy, scope string
		legacy        []string
		attributes    int
	}{
		{"single-numa-node", "container", []string{"SingleNUMANodeContainerLevel"}, 2},
		{"single-numa-node", "pod", []string{"SingleNUMANodePodLevel"}, 2},
		{"restricted", "", []string{"RestrictedContainerLevel"}, 1},
		{"restricted", "pod", []string{"RestrictedPodLevel"}, 2},
		{"best-effort", "container", []string{"BestEffortContainerLevel"}, 2},
		{"Best-Effort", "Pod", []string{"BestEffortPodLevel"}, 2},
		{"none", "pod", []string{"None"}, 2},
		{"none", "", []string{"None"}, 1},
		{"single-numa-node", "", []string{"SingleNUMANodeContainerLevel"}, 1},
		{"some-new-policy", "pod", nil, 2},
	} {
		t.Run(tc.policy+"/"+tc.scope, func(t *testing.T) {
			nrt := NRT("n", tc.policy, tc.scope)
			if len(nrt.TopologyPolicies) != len(tc.legacy) || (len(tc.legacy) == 1 && nrt.TopologyPolicies[0] != tc.legacy[0]) {
				t.Fatalf("TopologyPolicies %v, want %v", nrt.TopologyPolicies, tc.legacy)
			}
			if len(nrt.Attributes) != tc.attributes || nrt.Attributes[0].Name != "topologyManagerPolicy" || nrt.Attributes[0].Value != tc.policy {
				t.Fatalf("attributes %v", nrt.Attributes)
			}
			if tc.attributes == 2 && (nrt.Attributes[1].Name != "topologyManagerScope" || nrt.Attributes[1].Value != tc.scope) {
				t.Fatalf("attributes %v", nrt.Attributes)
			}
		})
	}
}

func TestNRTZones(t *testing.T) {
	nrt := NRT("n", "none", "", ZoneSpec{Name: "node-0", CPU: "16", Memory: "64Gi", GPUs: 2}, ZoneSpec{Name: "node-1", CPU: "8"})
	if nrt.Name != "n" || len(nrt.Zones) != 2 {
		t.Fatalf("%s: zones %v", nrt.Name, nrt.Zones)
	}
	want := []map[string]string{
		{"cpu": "16", "memory": "64Gi", string(GPU): "2"},
		{"cpu": "8"},
	}
	for i, z := range nrt.Zones {
		if z.Type != "Node" || len(z.Resources) != len(want[i]) {
			t.Fatalf("zone %s: type %s resources %v", z.Name, z.Type, z.Resources)
		}
		for _, r := range z.Resources {
			q := resource.MustParse(want[i][r.Name])
			if r.Capacity.Cmp(q) != 0 || r.Allocatable.Cmp(q) != 0 || r.Available.Cmp(q) != 0 {
				t.Fatalf("zone %s %s: %s/%s/%s, want %s everywhere", z.Name, r.Name, r.Capacity.String(), r.Allocatable.String(), r.Available.String(), q.String())
			}
		}
	}
}
