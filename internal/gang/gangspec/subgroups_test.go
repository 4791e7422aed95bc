package gangspec

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/gang/planner"
)

// TestMemberShape: members of different sub-groups have different keys.
func TestMemberShape(t *testing.T) {
	pod := mpod("w-0", 1000, 0)
	spec := &Spec{SubGroups: &SubGroups{Size: 4, Of: func(p *v1.Pod) string { return "3" }}}
	key := MemberShape(spec, pod)
	if key == planner.ShapeKey(pod) || planner.SubGroupOfShape(key) != "3" {
		t.Fatalf("MemberShape = %q", key)
	}
	if MemberShape(&Spec{}, pod) != planner.ShapeKey(pod) {
		t.Fatal("a flat gang's member shape is its shape")
	}
}

// TestBoundBySubGroupDomainIsOrderFree: a sub-group bound in two racks names
// the rack holding most of it, then the first by name, in any member order.
func TestBoundBySubGroupDomainIsOrderFree(t *testing.T) {
	spec := &Spec{SubGroups: &SubGroups{Size: 4, Of: func(p *v1.Pod) string { return p.Labels["sg"] }}}
	topo := fakeTopology{"n1": "r1", "n2": "r2", "n3": "r2", "n4": "r3", "n5": "r4"}
	bound := func(name, node, sg string) *v1.Pod {
		p := mpod(name, 1000, 0)
		p.Spec.NodeName, p.Labels = node, map[string]string{"sg": sg}
		return p
	}
	members := []*v1.Pod{
		bound("a0", "n1", "a"), bound("a1", "n2", "a"), bound("a2", "n3", "a"),
		bound("b0", "n5", "b"), bound("b1", "n4", "b"),
	}
	for i := 0; i < 20; i++ {
		rng := append([]*v1.Pod(nil), members...)
		for j := range rng {
			k := (j*7 + i*3) % len(rng)
			rng[j], rng[k] = rng[k], rng[j]
		}
		n, in := BoundBySubGroup(spec, rng, topo, 0)
		if n["a"] != 3 || n["b"] != 2 {
			t.Fatalf("bound = %v", n)
		}
		if in["a"] != "r2" || in["b"] != "r3" {
			t.Fatalf("order %d: in = %v, want a in r2 (most members), b in r3 (first by name)", i, in)
		}
	}
}
