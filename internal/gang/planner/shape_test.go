package planner

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestShapeKey(t *testing.T) {
	base := func() *v1.Pod { return pod("a", 1000, 0) }
	template := "tpl"
	tests := []struct {
		name   string
		change func(p *v1.Pod)
		same   bool
	}{
		{name: "names, labels and age do not count", same: true, change: func(p *v1.Pod) {
			p.Name, p.Labels, p.CreationTimestamp = "b", map[string]string{"rank": "3"}, metav1.Time{}
		}},
		{name: "requests", change: func(p *v1.Pod) { *p = *pod("a", 2000, 0) }},
		{name: "node selector", change: func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"pool": "gpu"} }},
		{name: "tolerations", change: func(p *v1.Pod) { p.Spec.Tolerations = []v1.Toleration{{Key: "k", Operator: v1.TolerationOpExists}} }},
		{name: "priority", change: func(p *v1.Pod) { prio := int32(7); p.Spec.Priority = &prio }},
		{name: "claims from a template", change: func(p *v1.Pod) {
			p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &template}}
		}},
		{name: "a named claim", change: func(p *v1.Pod) {
			name := "shared"
			p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &name}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := base()
			tt.change(p)
			if same := ShapeKey(p) == ShapeKey(base()); same != tt.same {
				t.Errorf("same shape = %v, want %v", same, tt.same)
			}
		})
	}
	claimed := base()
	claimed.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &template}}
	named := base()
	n := "gpu-claim"
	named.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &n}}
	if ShapeKey(claimed) == ShapeKey(named) {
		t.Error("a template's claims and a named claim are one shape")
	}
}

func TestNodeAdmits(t *testing.T) {
	gpuNode := func(mod func(n *v1.Node)) *v1.Node {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "gpu"}}}
		if mod != nil {
			mod(n)
		}
		return n
	}
	tolerating := func(key string, effect v1.TaintEffect) func(p *v1.Pod) {
		return func(p *v1.Pod) {
			p.Spec.Tolerations = []v1.Toleration{{Key: key, Operator: v1.TolerationOpExists, Effect: effect}}
		}
	}
	taint := func(key string, effect v1.TaintEffect) func(n *v1.Node) {
		return func(n *v1.Node) { n.Spec.Taints = []v1.Taint{{Key: key, Effect: effect}} }
	}
	tests := []struct {
		name string
		pod  func(p *v1.Pod)
		node func(n *v1.Node)
		want bool
	}{
		{name: "a plain node", want: true},
		{name: "matching selector", pod: func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"pool": "gpu"} }, want: true},
		{name: "selector mismatch", pod: func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"pool": "cpu"} }},
		{name: "cordoned", node: func(n *v1.Node) { n.Spec.Unschedulable = true }},
		{name: "cordoned, tolerated", node: func(n *v1.Node) { n.Spec.Unschedulable = true },
			pod: tolerating(v1.TaintNodeUnschedulable, v1.TaintEffectNoSchedule), want: true},
		{name: "NoSchedule taint", node: taint("gpu", v1.TaintEffectNoSchedule)},
		{name: "NoExecute taint", node: taint("gpu", v1.TaintEffectNoExecute)},
		{name: "PreferNoSchedule taint does not bar", node: taint("gpu", v1.TaintEffectPreferNoSchedule), want: true},
		{name: "tolerated taint", node: taint("gpu", v1.TaintEffectNoSchedule), pod: tolerating("gpu", ""), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pod("p", 1000, 0)
			if tt.pod != nil {
				tt.pod(p)
			}
			if got := NodeAdmits(p, gpuNode(tt.node)); got != tt.want {
				t.Errorf("NodeAdmits = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestOnePerNode(t *testing.T) {
	term := func(key string, match map[string]string, namespaces ...string) func(p *v1.Pod) {
		return func(p *v1.Pod) {
			p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
					TopologyKey: key, Namespaces: namespaces, LabelSelector: &metav1.LabelSelector{MatchLabels: match},
				}},
			}}
		}
	}
	own := map[string]string{"app": "w"}
	tests := []struct {
		name string
		mod  func(p *v1.Pod)
		want bool
	}{
		{name: "no affinity", mod: func(*v1.Pod) {}},
		{name: "hostname, selecting itself", mod: term(HostnameLabel, own), want: true},
		{name: "hostname, its own namespace listed", mod: term(HostnameLabel, own, "other", "ns"), want: true},
		{name: "hostname, other namespaces only", mod: term(HostnameLabel, own, "other")},
		{name: "another topology key", mod: term("topology.kubernetes.io/zone", own)},
		{name: "a selector that misses it", mod: term(HostnameLabel, map[string]string{"app": "db"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pod("w", 1000, 0)
			p.Labels = own
			tt.mod(p)
			if got := OnePerNode(p); got != tt.want {
				t.Errorf("OnePerNode = %v, want %v", got, tt.want)
			}
		})
	}
}
