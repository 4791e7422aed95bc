package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/devices"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// draNode is a node whose driver publishes devices in a ResourceSlice.
type draNode struct {
	name    string
	cpu     string
	devices int
	// attrs gives device i's attributes (nil: none).
	attrs func(i int) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute
	// tainted lists devices carrying a NoSchedule device taint.
	tainted []int
	labels  map[string]string
}

// draSetup creates a driver's DeviceClass (selecting the driver's devices;
// extended names an extended resource it maps), nodes labelled for the
// case, and their slices.
func draSetup(t *testing.T, c *testcluster.Cluster, driver, extended string, nodes ...draNode) {
	t.Helper()
	draSetupClass(t, c, driver, extended, nil, nodes...)
}

// draSetupClass is draSetup with annotations on the DeviceClass.
func draSetupClass(t *testing.T, c *testcluster.Cluster, driver, extended string, annotations map[string]string, nodes ...draNode) {
	t.Helper()
	ctx := ctxFor(t)
	class := &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: driver, Annotations: annotations},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
			CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", driver)},
		}}},
	}
	if extended != "" {
		class.Spec.ExtendedResourceName = ptr.To(extended)
	}
	if _, err := c.Client.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		labels := map[string]string{"dra-case": driver}
		for k, v := range n.labels {
			labels[k] = v
		}
		if err := c.CreateNodes(ctx, testcluster.NodeSpec{Name: n.name, CPU: n.cpu, Memory: "256Gi", Labels: labels}); err != nil {
			t.Fatal(err)
		}
		if n.devices == 0 {
			continue
		}
		slice := &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: n.name + "-" + driver},
			Spec: resourceapi.ResourceSliceSpec{
				Driver:   driver,
				NodeName: ptr.To(n.name),
				Pool:     resourceapi.ResourcePool{Name: n.name, ResourceSliceCount: 1},
			},
		}
		for i := range n.devices {
			d := resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i)}
			if n.attrs != nil {
				d.Attributes = n.attrs(i)
			}
			for _, ti := range n.tainted {
				if ti == i {
					d.Taints = []resourceapi.DeviceTaint{{Key: "example.com/unhealthy", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
				}
			}
			slice.Spec.Devices = append(slice.Spec.Devices, d)
		}
		if _, err := c.Client.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// claimSpec asks for count devices of class (and, with match, devices that
// share the attribute).
func claimSpec(class string, count int64, match string) resourceapi.ResourceClaimSpec {
	spec := resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
		Name:    "gpu",
		Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count},
	}}}}
	if match != "" {
		spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(match))}}
	}
	return spec
}

// draPod is a gang member of the case's nodes.
func draPod(ns, group, driver string, i int, cpu string) *v1.Pod {
	p := testcluster.PodSpec{Namespace: ns, PodGroup: group, Name: fmt.Sprintf("%s-%d", group, i), CPU: cpu, Memory: "1Gi",
		NodeSelector: map[string]string{"dra-case": driver}}.Pod()
	return p
}

// withClaim makes the pod use a claim: by name, or from a template.
func withClaim(p *v1.Pod, claim, template string) *v1.Pod {
	pc := v1.PodResourceClaim{Name: "gpu"}
	if claim != "" {
		pc.ResourceClaimName = ptr.To(claim)
	} else {
		pc.ResourceClaimTemplateName = ptr.To(template)
	}
	p.Spec.ResourceClaims = []v1.PodResourceClaim{pc}
	p.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
	return p
}

func createDRAGang(t *testing.T, c *testcluster.Cluster, ns, group string, minMember int32, pods []*v1.Pod, labels ...string) {
	t.Helper()
	ctx := ctxFor(t)
	_, _ = c.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	pg := testcluster.PodGroup(ns, group, minMember)
	for i := 0; i+1 < len(labels); i += 2 {
		if pg.Labels == nil {
			pg.Labels = map[string]string{}
		}
		pg.Labels[labels[i]] = labels[i+1]
	}
	if err := c.CreatePodGroup(ctx, pg); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// ownClaimGang creates a gang of n members, member i with its own claim
// claim-i of spec.
func ownClaimGang(t *testing.T, c *testcluster.Cluster, ns, group, driver string, n int, minMember int32, spec resourceapi.ResourceClaimSpec) {
	t.Helper()
	var names []string
	var pods []*v1.Pod
	for i := range n {
		names = append(names, fmt.Sprintf("claim-%d", i))
		pods = append(pods, withClaim(draPod(ns, group, driver, i, "1"), names[i], ""))
	}
	createClaims(t, c, ns, names, spec)
	createDRAGang(t, c, ns, group, minMember, pods)
}

func createClaims(t *testing.T, c *testcluster.Cluster, ns string, names []string, spec resourceapi.ResourceClaimSpec) {
	t.Helper()
	ctx := ctxFor(t)
	_, _ = c.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	for _, n := range names {
		claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: ns}, Spec: spec}
		if _, err := c.Client.ResourceV1().ResourceClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// allocatedDevices lists every allocated device of the cluster, failing the
// test when one is allocated to two claims.
func allocatedDevices(t *testing.T, ctx context.Context, c *testcluster.Cluster) map[string]string {
	t.Helper()
	claims, err := c.Client.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner := map[string]string{}
	for _, cl := range claims.Items {
		if cl.Status.Allocation == nil {
			continue
		}
		for _, r := range cl.Status.Allocation.Devices.Results {
			id := r.Driver + "/" + r.Pool + "/" + r.Device
			if other, dup := owner[id]; dup {
				t.Fatalf("device %s allocated to two claims: %s and %s/%s", id, other, cl.Namespace, cl.Name)
			}
			owner[id] = cl.Namespace + "/" + cl.Name
		}
	}
	return owner
}

// nodesOf counts bound members per node.
func nodesOf(t *testing.T, c *testcluster.Cluster, ns, group string) map[string]int {
	t.Helper()
	pods, err := c.BoundPods(ctxFor(t), ns, "scheduling.x-k8s.io/pod-group="+group)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, p := range pods {
		out[p.Spec.NodeName]++
	}
	return out
}

// waitClaimsAllocated waits until every claim of the namespace is allocated.
func waitClaimsAllocated(t *testing.T, c *testcluster.Cluster, ns string, want int) {
	t.Helper()
	err := testcluster.Eventually(ctxFor(t), 60*time.Second, func(ctx context.Context) (bool, error) {
		claims, err := c.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		n := 0
		for _, cl := range claims.Items {
			if cl.Status.Allocation != nil {
				n++
			}
		}
		return n == want, nil
	})
	if err != nil {
		if claims, lerr := c.Client.ResourceV1().ResourceClaims(ns).List(context.Background(), metav1.ListOptions{}); lerr == nil {
			for _, cl := range claims.Items {
				owner := ""
				if len(cl.OwnerReferences) > 0 {
					owner = cl.OwnerReferences[0].Name
				}
				t.Logf("claim %s (pod %s) allocated=%v reservedFor=%d deleting=%v", cl.Name, owner, cl.Status.Allocation != nil, len(cl.Status.ReservedFor), cl.DeletionTimestamp != nil)
			}
		}
		t.Fatalf("namespace %s: want %d claims allocated: %v", ns, want, err)
	}
}

// TestDRAGangs runs DRA gangs on one real API server with the canonical
// profile and kube-controller-manager's resourceclaim controller; no driver
// is needed: the scheduler allocates, the test publishes slices. Each case
// has its own driver, DeviceClass and nodes.
func TestDRAGangs(t *testing.T) {
	c := startCluster(t)
	if err := c.StartResourceClaimController(); err != nil {
		t.Fatal(err)
	}
	startScheduler(t, c)

	// Two nodes publish 4 devices each, a third none; the node with more
	// free CPU looks emptier to a device-blind plan. Every member has its
	// own claim.
	t.Run("own claims, tight", func(t *testing.T) {
		const driver, ns = "a.example.com", "dra-a"
		draSetup(t, c, driver, "",
			draNode{name: "a-big", cpu: "64", devices: 4}, draNode{name: "a-small", cpu: "16", devices: 4}, draNode{name: "a-none", cpu: "64"})
		ownClaimGang(t, c, ns, "job", driver, 8, 8, claimSpec(driver, 1, ""))
		waitBoundCount(t, c, ns, "job", 8)
		if got := nodesOf(t, c, ns, "job"); got["a-big"] != 4 || got["a-small"] != 4 {
			t.Fatalf("members per node = %v, want 4 on a-big and 4 on a-small", got)
		}
		waitClaimsAllocated(t, c, ns, 8)
		allocatedDevices(t, ctxFor(t), c)
	})

	// The same gang asking example.com/gpu through a DeviceClass's
	// extendedResourceName: no device plugin, no capacity on the Node.
	t.Run("extended resource", func(t *testing.T) {
		const driver, ns = "b.example.com", "dra-b"
		draSetup(t, c, driver, "example.com/gpu",
			draNode{name: "b-big", cpu: "64", devices: 4}, draNode{name: "b-small", cpu: "16", devices: 4}, draNode{name: "b-none", cpu: "64"})
		var pods []*v1.Pod
		for i := range 8 {
			p := draPod(ns, "job", driver, i, "1")
			gpu := *resource.NewQuantity(1, resource.DecimalSI)
			p.Spec.Containers[0].Resources.Requests["example.com/gpu"] = gpu
			p.Spec.Containers[0].Resources.Limits = v1.ResourceList{"example.com/gpu": gpu}
			pods = append(pods, p)
		}
		createDRAGang(t, c, ns, "job", 8, pods)
		waitBoundCount(t, c, ns, "job", 8)
		if got := nodesOf(t, c, ns, "job"); got["b-big"] != 4 || got["b-small"] != 4 {
			t.Fatalf("members per node = %v, want 4 on b-big and 4 on b-small", got)
		}
		waitClaimsAllocated(t, c, ns, 8)
		allocatedDevices(t, ctxFor(t), c)
	})

	// A gang larger than the devices: nothing bound, nothing allocated, and
	// the condition says which class is short and by how much.
	t.Run("gang larger than the devices", func(t *testing.T) {
		const driver, ns = "c.example.com", "dra-c"
		draSetup(t, c, driver, "", draNode{name: "c-0", cpu: "64", devices: 4}, draNode{name: "c-1", cpu: "64", devices: 4})
		ownClaimGang(t, c, ns, "job", driver, 10, 10, claimSpec(driver, 1, ""))
		waitCondition(t, c, ns, "job", "Unschedulable", "class "+driver, "fit 8 of 10 members", "2 short")
		assertBound(t, c, ns, "job", 0)
		claims, err := c.Client.ResourceV1().ResourceClaims(ns).List(ctxFor(t), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, cl := range claims.Items {
			if cl.Status.Allocation != nil {
				t.Fatalf("claim %s allocated for a gang that did not start", cl.Name)
			}
		}
	})

	// Claims from a ResourceClaimTemplate, made by the resourceclaim
	// controller.
	t.Run("claim templates", func(t *testing.T) {
		const driver, ns = "d.example.com", "dra-d"
		draSetup(t, c, driver, "", draNode{name: "d-big", cpu: "64", devices: 2}, draNode{name: "d-small", cpu: "8", devices: 2})
		draTemplate(t, c, ns, driver)
		draGang(t, c, ns, driver, "job", 4, 0)
		waitBoundCount(t, c, ns, "job", 4)
		if got := nodesOf(t, c, ns, "job"); got["d-big"] != 2 || got["d-small"] != 2 {
			t.Fatalf("members per node = %v, want 2 and 2", got)
		}
		waitClaimsAllocated(t, c, ns, 4)
		allocatedDevices(t, ctxFor(t), c)
	})

	// Two members share one claim: it is allocated once and both run where
	// its device is.
	t.Run("shared claim", func(t *testing.T) {
		const driver, ns = "e.example.com", "dra-e"
		draSetup(t, c, driver, "", draNode{name: "e-0", cpu: "64", devices: 1}, draNode{name: "e-1", cpu: "64", devices: 1})
		createClaims(t, c, ns, []string{"shared"}, claimSpec(driver, 1, ""))
		pods := []*v1.Pod{withClaim(draPod(ns, "job", driver, 0, "1"), "shared", ""), withClaim(draPod(ns, "job", driver, 1, "1"), "shared", "")}
		createDRAGang(t, c, ns, "job", 2, pods)
		waitBoundCount(t, c, ns, "job", 2)
		if got := nodesOf(t, c, ns, "job"); len(got) != 1 {
			t.Fatalf("members sharing a claim landed on %v, want one node", got)
		}
		waitClaimsAllocated(t, c, ns, 1)
		cl, err := c.Client.ResourceV1().ResourceClaims(ns).Get(ctxFor(t), "shared", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(cl.Status.Allocation.Devices.Results); n != 1 || len(cl.Status.ReservedFor) != 2 {
			t.Fatalf("shared claim: %d devices, reserved for %d pods; want 1 device for 2 pods", n, len(cl.Status.ReservedFor))
		}
	})

	// Claims of 2 devices that must share a PCIe root. f-0, with the most
	// CPU, has 4 devices on 4 roots: a count of devices says 2 claims fit
	// there, the allocator says none. f-1 and f-2 have 2 roots of 2.
	t.Run("matchAttribute", func(t *testing.T) {
		const driver, ns = "f.example.com", "dra-f"
		root := func(per int) func(i int) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
			return func(i int) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
				return map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"pcieRoot": {StringValue: ptr.To(fmt.Sprintf("root-%d", i/per))}}
			}
		}
		draSetup(t, c, driver, "", draNode{name: "f-0", cpu: "64", devices: 4, attrs: root(1)},
			draNode{name: "f-1", cpu: "8", devices: 4, attrs: root(2)}, draNode{name: "f-2", cpu: "8", devices: 4, attrs: root(2)})
		ownClaimGang(t, c, ns, "job", driver, 4, 4, claimSpec(driver, 2, driver+"/pcieRoot"))
		waitBoundCount(t, c, ns, "job", 4)
		if got := nodesOf(t, c, ns, "job"); got["f-1"] != 2 || got["f-2"] != 2 {
			t.Fatalf("members per node = %v, want 2 on f-1 and 2 on f-2", got)
		}
		waitClaimsAllocated(t, c, ns, 4)
		devs := allocatedDevices(t, ctxFor(t), c)
		claims, _ := c.Client.ResourceV1().ResourceClaims(ns).List(ctxFor(t), metav1.ListOptions{})
		for _, cl := range claims.Items {
			roots := map[string]bool{}
			for _, r := range cl.Status.Allocation.Devices.Results {
				var i int
				_, _ = fmt.Sscanf(r.Device, "gpu-%d", &i)
				roots[fmt.Sprint(i/2)] = true
			}
			if len(roots) != 1 {
				t.Fatalf("claim %s spans PCIe roots: %v (devices %v)", cl.Name, cl.Status.Allocation.Devices.Results, devs)
			}
		}
	})

	// A tainted device is never allocated: 2 nodes × 2 devices, one tainted,
	// take a gang of 3 but not of 4.
	t.Run("tainted device", func(t *testing.T) {
		const driver, ns = "g.example.com", "dra-g"
		draSetup(t, c, driver, "", draNode{name: "g-0", cpu: "64", devices: 2, tainted: []int{0}}, draNode{name: "g-1", cpu: "64", devices: 2})
		ownClaimGang(t, c, ns, "big", driver, 4, 4, claimSpec(driver, 1, ""))
		waitCondition(t, c, ns, "big", "Unschedulable", "fit 3 of 4 members")
		assertBound(t, c, ns, "big", 0)
		if err := c.Client.CoreV1().Pods(ns).Delete(ctxFor(t), "big-3", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// A patch, as a user would: an update from a Get races the
		// scheduler's status writes (resourceVersion conflict).
		if _, err := c.PodGroups.SchedulingV1alpha1().PodGroups(ns).Patch(ctxFor(t), "big", types.MergePatchType,
			[]byte(`{"spec":{"minMember":3}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		waitBoundCount(t, c, ns, "big", 3)
		waitClaimsAllocated(t, c, ns, 3)
		for id, owner := range allocatedDevices(t, ctxFor(t), c) {
			if id == driver+"/g-0/gpu-0" {
				t.Fatalf("tainted device %s allocated to %s", id, owner)
			}
		}
	})

	t.Run("churn", func(t *testing.T) { draChurn(t, c) })

	// A ComputeDomain's channel: one device per node, so one channel pod per
	// node; the gang must stay in one NVLink clique (node label
	// nvidia.com/gpu.clique as a required level). Clique a has 4 nodes,
	// clique b 2 with more CPU: the gang of 3 takes 3 nodes of clique a.
	t.Run("compute domain channels in one clique", func(t *testing.T) {
		const driver, ns = "j.example.com", "dra-j"
		clique := func(v string) map[string]string { return map[string]string{"nvidia.com/gpu.clique": v} }
		draSetup(t, c, driver, "",
			draNode{name: "j-a0", cpu: "8", devices: 1, labels: clique("a")}, draNode{name: "j-a1", cpu: "8", devices: 1, labels: clique("a")},
			draNode{name: "j-a2", cpu: "8", devices: 1, labels: clique("a")}, draNode{name: "j-a3", cpu: "8", devices: 1, labels: clique("a")},
			draNode{name: "j-b0", cpu: "64", devices: 1, labels: clique("b")}, draNode{name: "j-b1", cpu: "64", devices: 1, labels: clique("b")})
		nt := &phalanxv1alpha1.NetworkTopology{ObjectMeta: metav1.ObjectMeta{Name: phalanxv1alpha1.DefaultNetworkTopologyName},
			Spec: phalanxv1alpha1.NetworkTopologySpec{Levels: []phalanxv1alpha1.TopologyLevel{
				{Name: "nvlink-clique", NodeLabel: "nvidia.com/gpu.clique"}, {Name: "host", NodeLabel: v1.LabelHostname}}}}
		if _, err := c.Phalanx.SchedulingV1alpha1().NetworkTopologies().Create(ctxFor(t), nt, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		draTemplate(t, c, ns, driver)
		ctx := ctxFor(t)
		pg := testcluster.PodGroup(ns, "job", 3)
		pg.Annotations = map[string]string{phalanxv1alpha1.TopologyRequiredAnnotation: "nvlink-clique"}
		if err := c.CreatePodGroup(ctx, pg); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			p := withClaim(draPod(ns, "job", driver, i, "1"), "", "gpu")
			if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		waitBoundCount(t, c, ns, "job", 3)
		got := nodesOf(t, c, ns, "job")
		for n, k := range got {
			if k != 1 || n[:3] != "j-a" {
				t.Fatalf("members per node = %v, want one channel pod on each of 3 nodes of clique a", got)
			}
		}
	})

	// A gang of 2 sub-groups of 2, each member with one device from a
	// template, each sub-group inside one NVLink clique (the topology of the
	// case above). Clique ka has 2 devices on 2 nodes, kb 3 on one node
	// with little CPU, kc none on a CPU-rich node: one sub-group in ka, the
	// other in kb, none in kc or split.
	t.Run("sub-groups with devices, each in one clique", func(t *testing.T) {
		const driver, ns = "k.example.com", "dra-k"
		clique := func(v string) map[string]string { return map[string]string{"nvidia.com/gpu.clique": v} }
		draSetup(t, c, driver, "",
			draNode{name: "k-a0", cpu: "64", devices: 1, labels: clique("ka")}, draNode{name: "k-a1", cpu: "64", devices: 1, labels: clique("ka")},
			draNode{name: "k-b0", cpu: "8", devices: 3, labels: clique("kb")},
			draNode{name: "k-c0", cpu: "128", labels: clique("kc")})
		draTemplate(t, c, ns, driver)
		ctx := ctxFor(t)
		pg := testcluster.PodGroup(ns, "tp", 4)
		pg.Annotations = map[string]string{
			phalanxv1alpha1.SubGroupSizeAnnotation:             "2",
			phalanxv1alpha1.SubGroupTopologyRequiredAnnotation: "nvlink-clique",
		}
		if err := c.CreatePodGroup(ctx, pg); err != nil {
			t.Fatal(err)
		}
		created := time.Now()
		for i := range 4 {
			p := withClaim(draPod(ns, "tp", driver, i, "1"), "", "gpu")
			p.Labels[phalanxv1alpha1.RankLabel] = fmt.Sprint(i)
			if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		waitBoundCount(t, c, ns, "tp", 4)
		// A plan made before the resourceclaim controller named the
		// members' claims fails; naming them retries it. Without that the
		// gang waited for the 20 s retry of failed plans.
		if took := time.Since(created); took > 10*time.Second {
			t.Fatalf("the gang bound %v after its pods were created, want the plan retried once their claims were named", took.Round(100*time.Millisecond))
		}
		waitClaimsAllocated(t, c, ns, 4)
		allocatedDevices(t, ctx, c)
		bound, err := c.BoundPods(ctx, ns, "scheduling.x-k8s.io/pod-group=tp")
		if err != nil {
			t.Fatal(err)
		}
		cliqueOf := map[string]string{}
		for _, p := range bound {
			cliqueOf[p.Name] = "k" + p.Spec.NodeName[2:3] // k-a0 -> ka
		}
		first, second := cliqueOf["tp-0"], cliqueOf["tp-2"]
		if cliqueOf["tp-1"] != first || cliqueOf["tp-3"] != second || first == second || first == "kc" || second == "kc" {
			t.Fatalf("cliques by member = %v, want ranks 0-1 in one clique and 2-3 in the other of ka and kb", cliqueOf)
		}
	})

	// Reclaim across queues with DRA GPUs: the class counts as nvidia.com/gpu
	// in queues. queue-b (weight 2) fills the node's 6 devices with 3 gangs;
	// queue-a (weight 1) deserves 2 and gets them: one whole gang of
	// queue-b is evicted, its claims freed, and queue-a's gang binds.
	// Runs last: its queues share the CPU with every gang after it.
	t.Run("reclaim across queues", func(t *testing.T) {
		const driver, ns = "h.example.com", "dra-h"
		draSetupClass(t, c, driver, "", map[string]string{devices.QueueResourceAnnotation: "nvidia.com/gpu"},
			draNode{name: "h-0", cpu: "64", devices: 6})
		createQueue(t, c, queue("queue-a", 1))
		createQueue(t, c, queue("queue-b", 2))
		draTemplate(t, c, ns, driver)
		ctx := ctxFor(t)
		submit := func(q, group string) {
			pods := []*v1.Pod{withClaim(draPod(ns, group, driver, 0, "1"), "", "gpu"), withClaim(draPod(ns, group, driver, 1, "1"), "", "gpu")}
			createDRAGang(t, c, ns, group, 2, pods, phalanxv1alpha1.QueueLabel, q)
		}
		for i := range 3 {
			submit("queue-b", fmt.Sprintf("b-%d", i))
		}
		for i := range 3 {
			waitBoundCount(t, c, ns, fmt.Sprintf("b-%d", i), 2)
		}
		submit("queue-a", "a-0")
		// queue-b's gangs become reclaimable after minRuntimeSeconds (15).
		err := testcluster.Eventually(ctx, 90*time.Second, func(ctx context.Context) (bool, error) {
			n, err := boundCount(ctx, c, ns, "a-0")
			return n == 2, err
		})
		if err != nil {
			dumpPods(t, c, ns)
			t.Fatalf("queue-a's gang never bound: %v", err)
		}
		left := 0
		for i := range 3 {
			n, err := boundCount(ctx, c, ns, fmt.Sprintf("b-%d", i))
			if err != nil {
				t.Fatal(err)
			}
			if n != 0 && n != 2 {
				t.Fatalf("gang b-%d left with %d of 2 members", i, n)
			}
			left += n
		}
		if left != 4 {
			t.Fatalf("queue-b kept %d members bound, want 4 (one gang reclaimed)", left)
		}
		allocatedDevices(t, ctx, c)
	})
}
