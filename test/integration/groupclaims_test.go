package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// TestWorkloadAPIGroupClaims: group-level claims of a v1beta1 PodGroup
// (spec.resourceClaims, DRAWorkloadResourceClaims, beta and off in 1.37) on
// a real API server with the gate, kube-controller-manager's resourceclaim
// controller (which makes one claim for the PodGroup from its template) and
// the phalanx binary with the canonical profile. Each gang's group claim is
// allocated once, by the plan, reserved for the PodGroup, and every member
// binds where that allocation can be used; no device is allocated twice.
func TestWorkloadAPIGroupClaims(t *testing.T) {
	c := startWorkloadAPICluster(t, "GenericWorkload=true,DRAWorkloadResourceClaims=true")
	if err := c.StartResourceClaimController(); err != nil {
		t.Fatal(err)
	}
	startPhalanxBinary(t, c)

	// A node-local group claim ties the gang to one node: the plan must
	// pick the node with room for all three members and, besides the
	// group's device, each member's own device. gl-small has the devices
	// but CPU for two members only.
	t.Run("node-local group claim", func(t *testing.T) {
		const driver, ns = "gl.example.com", "gc-local"
		draSetup(t, c, driver, "",
			draNode{name: "gl-small", cpu: "2", devices: 4}, draNode{name: "gl-big", cpu: "8", devices: 4})
		createNamespace(t, c, ns)
		createTemplates(t, c, ns, claimSpec(driver, 1, ""), "shared", "own")
		createGroupClaimGang(t, c, ns, "job", driver, 3, "1", []string{"shared"}, "shared", "own")

		pods := waitMembersBound(t, c, ns, "job", 3)
		for _, p := range pods {
			if p.Spec.NodeName != "gl-big" {
				t.Fatalf("member %s on %s, want every member on gl-big (the group's device is on one node)", p.Name, p.Spec.NodeName)
			}
		}
		claim := waitGroupClaim(t, c, ns, "job")
		if got := len(claim.Status.Allocation.Devices.Results); got != 1 {
			t.Fatalf("group claim %s has %d devices allocated, want 1", claim.Name, got)
		}
		if pool := claim.Status.Allocation.Devices.Results[0].Pool; pool != "gl-big" {
			t.Fatalf("group claim %s allocated from %s, want gl-big", claim.Name, pool)
		}
		// One claim for the group, one per member.
		waitClaimsAllocated(t, c, ns, 4)
		allocatedDevices(t, ctxFor(t), c)
	})

	// A network-attached device (a slice for all nodes) shared by the
	// gang: members of 4 CPU go to three nodes, all using the one
	// allocation.
	t.Run("network-attached group claim", func(t *testing.T) {
		const driver, ns = "gn.example.com", "gc-net"
		draSetup(t, c, driver, "",
			draNode{name: "gn-0", cpu: "4"}, draNode{name: "gn-1", cpu: "4"}, draNode{name: "gn-2", cpu: "4"})
		slice := &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: "fabric-" + driver},
			Spec: resourceapi.ResourceSliceSpec{
				Driver:   driver,
				AllNodes: ptr.To(true),
				Pool:     resourceapi.ResourcePool{Name: "fabric", ResourceSliceCount: 1},
				Devices:  []resourceapi.Device{{Name: "switch-0"}},
			},
		}
		if _, err := c.Client.ResourceV1().ResourceSlices().Create(ctxFor(t), slice, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		createNamespace(t, c, ns)
		createTemplates(t, c, ns, claimSpec(driver, 1, ""), "fabric")
		createGroupClaimGang(t, c, ns, "job", driver, 3, "4", []string{"fabric"}, "fabric")

		pods := waitMembersBound(t, c, ns, "job", 3)
		nodes := map[string]bool{}
		for _, p := range pods {
			nodes[p.Spec.NodeName] = true
		}
		if len(nodes) != 3 {
			t.Fatalf("members on %v, want three nodes", nodes)
		}
		claim := waitGroupClaim(t, c, ns, "job")
		if got := claim.Status.Allocation.Devices.Results; len(got) != 1 || got[0].Device != "switch-0" {
			t.Fatalf("group claim %s allocated %v, want switch-0", claim.Name, got)
		}
		waitClaimsAllocated(t, c, ns, 1)
	})
}

func createTemplates(t *testing.T, c *testcluster.Cluster, ns string, spec resourceapi.ResourceClaimSpec, names ...string) {
	t.Helper()
	for _, n := range names {
		tpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: ns},
			Spec: resourceapi.ResourceClaimTemplateSpec{Spec: spec}}
		if _, err := c.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctxFor(t), tpl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// createGroupClaimGang creates a v1beta1 PodGroup whose spec.resourceClaims
// are made from the templates named in group, and n members of cpu each,
// on the driver's nodes, using a claim from each of templates (the group's
// by the same name and template, so they share the group's claim).
func createGroupClaimGang(t *testing.T, c *testcluster.Cluster, ns, name, driver string, n int, cpu string, group []string, templates ...string) {
	t.Helper()
	pg := upstreamGang{Namespace: ns, Name: name, MinCount: int32(n)}.podGroup()
	for _, tpl := range group {
		pg.Spec.ResourceClaims = append(pg.Spec.ResourceClaims, schedulingv1beta1.PodGroupResourceClaim{
			Name: tpl, ResourceClaimTemplateName: ptr.To(tpl)})
	}
	created, err := c.Client.SchedulingV1beta1().PodGroups(ns).Create(ctxFor(t), pg, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating PodGroup %s/%s: %v", ns, name, err)
	}
	if len(created.Spec.ResourceClaims) != len(group) {
		t.Fatal("the API server dropped the PodGroup's spec.resourceClaims: is DRAWorkloadResourceClaims on?")
	}
	for i := range n {
		p := upstreamMember(ns, name, fmt.Sprintf("%s-%d", name, i), "")
		p.Spec.NodeSelector = map[string]string{"dra-case": driver}
		q := resource.MustParse(cpu)
		p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = q
		for _, tpl := range templates {
			p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, v1.PodResourceClaim{Name: tpl, ResourceClaimTemplateName: ptr.To(tpl)})
			p.Spec.Containers[0].Resources.Claims = append(p.Spec.Containers[0].Resources.Claims, v1.ResourceClaim{Name: tpl})
		}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctxFor(t), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// waitMembersBound waits for want bound members of the PodGroup.
func waitMembersBound(t *testing.T, c *testcluster.Cluster, ns, podGroup string, want int) []v1.Pod {
	t.Helper()
	var pods []v1.Pod
	err := testcluster.Eventually(ctxFor(t), 90*time.Second, func(ctx context.Context) (bool, error) {
		var err error
		pods, err = c.BoundPods(ctx, ns, gangSelector(podGroup))
		return len(pods) == want, err
	})
	if err != nil {
		var why []string
		if all, lerr := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{}); lerr == nil {
			for _, p := range all.Items {
				for _, cond := range p.Status.Conditions {
					if cond.Type == v1.PodScheduled {
						why = append(why, p.Name+": "+cond.Message)
					}
				}
			}
		}
		t.Fatalf("%s/%s: %d of %d members bound: %v\n%s", ns, podGroup, len(pods), want, err, strings.Join(why, "\n"))
	}
	return pods
}

// waitGroupClaim waits for the one claim the PodGroup owns to be allocated
// and reserved for the PodGroup alone.
func waitGroupClaim(t *testing.T, c *testcluster.Cluster, ns, podGroup string) *resourceapi.ResourceClaim {
	t.Helper()
	var found *resourceapi.ResourceClaim
	var seen string
	err := testcluster.Eventually(ctxFor(t), 60*time.Second, func(ctx context.Context) (bool, error) {
		claims, err := c.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var owned []*resourceapi.ResourceClaim
		for i := range claims.Items {
			cl := &claims.Items[i]
			for _, o := range cl.OwnerReferences {
				if o.Kind == "PodGroup" && o.Name == podGroup {
					owned = append(owned, cl)
				}
			}
		}
		if len(owned) != 1 {
			seen = fmt.Sprintf("%d claims owned by the PodGroup", len(owned))
			return false, nil
		}
		found = owned[0]
		r := found.Status.ReservedFor
		seen = fmt.Sprintf("claim %s allocated=%v reservedFor=%v", found.Name, found.Status.Allocation != nil, r)
		return found.Status.Allocation != nil && len(r) == 1 && r[0].Resource == "podgroups" && r[0].Name == podGroup, nil
	})
	if err != nil {
		t.Fatalf("%s/%s: want one claim of the PodGroup, allocated and reserved for it: %s: %v", ns, podGroup, seen, err)
	}
	return found
}
