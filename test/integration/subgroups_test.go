package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/utils/ptr"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
	"github.com/phalanx-sched/phalanx/manifests"
)

// Labels of the NVLink-clique topology the sub-group tests run on.
const (
	spineLabel  = "network.example.com/spine"
	cliqueLabel = "nvidia.com/gpu.clique"
)

// cliqueNodes: spines s0 and s1, each of cliques c0 and c1, each of two
// nodes of 4 GPUs (a clique holds 8).
func cliqueNodes() []testcluster.NodeSpec {
	var out []testcluster.NodeSpec
	for s := 0; s < 2; s++ {
		for c := 0; c < 2; c++ {
			for n := 0; n < 2; n++ {
				out = append(out, testcluster.NodeSpec{
					Name: fmt.Sprintf("s%d-c%d-n%d", s, c, n), CPU: "8", Memory: "32Gi", GPUs: 4,
					Labels: map[string]string{spineLabel: fmt.Sprintf("s%d", s), cliqueLabel: fmt.Sprintf("s%d-c%d", s, c)},
				})
			}
		}
	}
	return out
}

func createCliqueTopology(t *testing.T, c *testcluster.Cluster) {
	t.Helper()
	nt := &phalanxv1alpha1.NetworkTopology{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: phalanxv1alpha1.NetworkTopologySpec{Levels: []phalanxv1alpha1.TopologyLevel{
			{Name: "spine", NodeLabel: spineLabel},
			{Name: "nvlink-clique", NodeLabel: cliqueLabel},
			{Name: "host", NodeLabel: v1.LabelHostname},
		}},
	}
	if _, err := c.Phalanx.SchedulingV1alpha1().NetworkTopologies().Create(ctxFor(t), nt, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// cliquesOfPods maps pod name to the clique of its node.
func cliquesOfPods(t *testing.T, c *testcluster.Cluster, ns, selector string) map[string]string {
	t.Helper()
	ctx := ctxFor(t)
	bound, err := c.BoundPods(ctx, ns, selector)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range bound {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out[p.Name] = n.Labels[cliqueLabel]
	}
	return out
}

// subGroupGang creates a PodGroup of members one-GPU pods in sub-groups of
// size (annotations), ranks by label.
func subGroupGang(t *testing.T, c *testcluster.Cluster, name string, members, size int, annotations map[string]string) {
	t.Helper()
	pg, pods := subGroupObjects(name, members, size, annotations)
	createGang(t, c, pg, pods)
}

// subGroupObjects are subGroupGang's PodGroup and pods, to change before
// they are created.
func subGroupObjects(name string, members, size int, annotations map[string]string) (*pgv1alpha1.PodGroup, []testcluster.PodSpec) {
	pg := testcluster.PodGroup("default", name, int32(members))
	pg.Annotations = map[string]string{
		phalanxv1alpha1.TopologyRequiredAnnotation:         "spine",
		phalanxv1alpha1.SubGroupSizeAnnotation:             strconv.Itoa(size),
		phalanxv1alpha1.SubGroupTopologyRequiredAnnotation: "nvlink-clique",
	}
	for k, v := range annotations {
		pg.Annotations[k] = v
	}
	pods := gangPods("default", name, members, testcluster.PodSpec{CPU: "100m", GPUs: 1})
	for i := range pods {
		pods[i].Labels = map[string]string{phalanxv1alpha1.RankLabel: strconv.Itoa(i)}
	}
	return pg, pods
}

// TestSubGroupsByRank: a gang of 2 tensor-parallel groups of 4 (annotations
// on its PodGroup, ranks by label) is placed with each group whole in one
// NVLink clique and the gang in one spine; the partly used clique is filled
// first (ranks 0–3 there, 4–7 in a clique of their own); sub-groups that each
// fit somewhere but not both in one spine leave the gang unbound, and its
// condition says how many fit where; a size that does not divide the gang
// is refused with InvalidSubGroups.
func TestSubGroupsByRank(t *testing.T) {
	c := startCluster(t, cliqueNodes()...)
	createCliqueTopology(t, c)
	startScheduler(t, c)
	ctx := ctxFor(t)

	// 3 GPUs taken in clique s0-c1 (room for one group of 4 left there).
	if err := c.CreatePods(ctx,
		testcluster.PodSpec{Name: "used-a", CPU: "100m", GPUs: 2, NodeSelector: map[string]string{v1.LabelHostname: "s0-c1-n0"}},
		testcluster.PodSpec{Name: "used-b", CPU: "100m", GPUs: 1, NodeSelector: map[string]string{v1.LabelHostname: "s0-c1-n1"}},
	); err != nil {
		t.Fatal(err)
	}
	waitBound(t, c, "default", "used-a")
	waitBound(t, c, "default", "used-b")

	subGroupGang(t, c, "tp", 8, 4, nil)
	waitBoundCount(t, c, "default", "tp", 8)
	cliques := cliquesOfPods(t, c, "default", pgv1alpha1.PodGroupLabel+"=tp")
	first, second := cliques["tp-0"], cliques["tp-4"]
	for i := 0; i < 8; i++ {
		want := first
		if i >= 4 {
			want = second
		}
		if got := cliques[fmt.Sprintf("tp-%d", i)]; got != want {
			t.Fatalf("rank %d in clique %s, want %s with its sub-group (all: %v)", i, got, want, cliques)
		}
	}
	if first != "s0-c1" || second != "s0-c0" {
		t.Fatalf("sub-groups in %s and %s, want the partly used s0-c1 first, then s0-c0 (spine s0; s1 kept whole)", first, second)
	}

	// Spine s0 has no clique with room for 4 any more; s1's cliques each
	// get a plain pod of 2 GPUs per node but one: s1-c0 keeps 4 free, s1-c1
	// only 2. Two groups of 4 fit nowhere inside one spine.
	if err := c.CreatePods(ctx,
		testcluster.PodSpec{Name: "used-c", CPU: "100m", GPUs: 3, NodeSelector: map[string]string{v1.LabelHostname: "s1-c1-n0"}},
		testcluster.PodSpec{Name: "used-d", CPU: "100m", GPUs: 3, NodeSelector: map[string]string{v1.LabelHostname: "s1-c1-n1"}},
		testcluster.PodSpec{Name: "used-e", CPU: "100m", GPUs: 4, NodeSelector: map[string]string{v1.LabelHostname: "s1-c0-n0"}},
	); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"used-c", "used-d", "used-e"} {
		waitBound(t, c, "default", n)
	}
	subGroupGang(t, c, "tp2", 8, 4, nil)
	// (Either spine is as close: each takes one group. The condition moves
	// on to Reserving after reservationAfterSeconds; the event stays.)
	waitGroupEvent(t, c, "default", "tp2", "Unschedulable", "1 of 2 sub-groups of 4 members fit in one nvlink-clique each inside spine s")
	assertBound(t, c, "default", "tp2", 0)

	subGroupGang(t, c, "odd", 6, 4, nil)
	waitCondition(t, c, "default", "odd", "InvalidSubGroups", "scheduling.phalanx.dev/subgroup-size", "does not divide the gang's minMember 6")
	subGroupGang(t, c, "wide", 4, 4, map[string]string{phalanxv1alpha1.SubGroupTopologyRequiredAnnotation: "spine"})
	waitCondition(t, c, "default", "wide", "InvalidSubGroups", `sub-group level "spine" is not inside the gang's level "spine"`)
}

// TestCompositePodGroupSubGroups: Kubernetes 1.37's CompositePodGroup
// (v1alpha3): a gang of minGroupCount 2 PodGroups of minCount 4, the
// composite inside one spine (its topology key), each PodGroup inside one
// NVLink clique (theirs): phalanx reads them as a gang of two sub-groups,
// binds all 8 pods with each PodGroup's pods in one clique, and writes the
// composite's conditions.
func TestCompositePodGroupSubGroups(t *testing.T) {
	featuregatetesting.SetFeatureGatesDuringTest(t, utilfeature.DefaultFeatureGate, featuregatetesting.FeatureOverrides{
		features.GenericWorkload:                 true,
		features.TopologyAwareWorkloadScheduling: true,
		features.CompositePodGroup:               true,
	})
	c, err := testcluster.Start(t, testcluster.Options{APIServerFlags: []string{
		"--runtime-config=scheduling.k8s.io/v1beta1=true,scheduling.k8s.io/v1alpha3=true",
		"--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true,CompositePodGroup=true",
	}})
	if err != nil {
		t.Fatalf("starting cluster: %v", err)
	}
	ctx := ctxFor(t)
	if err := c.CreateNodes(ctx, cliqueNodes()...); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartSchedulerBinary(schedulerBinary, manifests.SchedulerConfig); err != nil {
		t.Fatal(err)
	}
	const ns = "default"
	spine := []schedulingv1beta1.TopologyConstraint{{Key: spineLabel}}
	clique := []schedulingv1beta1.TopologyConstraint{{Key: cliqueLabel}}
	gangOf4 := schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 4}}
	wl := &schedulingv1beta1.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: ns},
		Spec: schedulingv1beta1.WorkloadSpec{CompositePodGroupTemplates: []schedulingv1beta1.CompositePodGroupTemplate{{
			Name:                  "replicas",
			SchedulingPolicy:      schedulingv1beta1.CompositePodGroupSchedulingPolicy{Gang: &schedulingv1beta1.CompositeGangSchedulingPolicy{MinGroupCount: 2}},
			SchedulingConstraints: &schedulingv1beta1.CompositePodGroupSchedulingConstraints{Topology: spine},
			PodGroupTemplates: []schedulingv1beta1.PodGroupTemplate{{
				Name: "tp", SchedulingPolicy: gangOf4, SchedulingConstraints: &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: clique},
			}},
		}}},
	}
	if _, err := c.Client.SchedulingV1beta1().Workloads(ns).Create(ctx, wl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cpg := &schedulingv1alpha3.CompositePodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: ns},
		Spec: schedulingv1alpha3.CompositePodGroupSpec{
			WorkloadRef:           &schedulingv1alpha3.WorkloadReference{WorkloadName: "train", TemplateName: "replicas"},
			SchedulingPolicy:      schedulingv1alpha3.CompositePodGroupSchedulingPolicy{Gang: &schedulingv1alpha3.CompositeGangSchedulingPolicy{MinGroupCount: 2}},
			SchedulingConstraints: &schedulingv1alpha3.CompositePodGroupSchedulingConstraints{Topology: []schedulingv1alpha3.TopologyConstraint{{Key: spine[0].Key}}},
		},
	}
	if _, err := c.Client.SchedulingV1alpha3().CompositePodGroups(ns).Create(ctx, cpg, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the CompositePodGroup (is v1alpha3 served?): %v", err)
	}
	for g := 0; g < 2; g++ {
		name := fmt.Sprintf("train-tp%d", g)
		pg := &schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: schedulingv1beta1.PodGroupSpec{
				ParentCompositePodGroupName: ptr.To("train"),
				WorkloadRef:                 &schedulingv1beta1.WorkloadReference{WorkloadName: "train", TemplateName: "tp"},
				SchedulingPolicy:            gangOf4,
				SchedulingConstraints:       &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: clique},
			},
		}
		created, err := c.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if created.Spec.ParentCompositePodGroupName == nil {
			t.Fatal("the API server dropped parentCompositePodGroupName: CompositePodGroup is not enabled")
		}
		for i := 0; i < 4; i++ {
			p := testcluster.PodSpec{Name: fmt.Sprintf("%s-%d", name, i), Namespace: ns, CPU: "100m", GPUs: 1,
				Labels: map[string]string{"app": "train", "tp": name}}.Pod()
			p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(name)}
			if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitJobBound(t, c, ns, "app=train", 8)
	spines := map[string]bool{}
	for g := 0; g < 2; g++ {
		name := fmt.Sprintf("train-tp%d", g)
		cliques := map[string]bool{}
		for _, cl := range cliquesOfPods(t, c, ns, "tp="+name) {
			cliques[cl] = true
			spines[cl[:2]] = true
		}
		if len(cliques) != 1 {
			t.Fatalf("PodGroup %s spans cliques %v, want one", name, cliques)
		}
	}
	if len(spines) != 1 {
		t.Fatalf("the composite spans spines %v, want one", spines)
	}
	err = testcluster.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		got, err := c.Client.SchedulingV1alpha3().CompositePodGroups(ns).Get(ctx, "train", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == "CompositePodGroupInitiallyScheduled" && cond.Status == metav1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the CompositePodGroup never said CompositePodGroupInitiallyScheduled=True: %v", err)
	}
}

// TestSubGroupsElasticGrowth: an elastic gang of 2 sub-groups of 8
// (subgroup-min 1) starts with one whole sub-group in the one clique with
// room; its second sub-group stays unbound while its clique has room for
// only half of it, and binds whole, in one clique of the same spine, once
// the room comes.
func TestSubGroupsElasticGrowth(t *testing.T) {
	c := startCluster(t, cliqueNodes()...)
	createCliqueTopology(t, c)
	startScheduler(t, c)
	ctx := ctxFor(t)
	// Full: spine s1; clique s0-c1 keeps 4 of its 8 GPUs free.
	fillers := []testcluster.PodSpec{}
	for _, n := range []string{"s1-c0-n0", "s1-c0-n1", "s1-c1-n0", "s1-c1-n1", "s0-c1-n0"} {
		fillers = append(fillers, testcluster.PodSpec{Name: "fill-" + n, CPU: "100m", GPUs: 4, NodeSelector: map[string]string{v1.LabelHostname: n}})
	}
	if err := c.CreatePods(ctx, fillers...); err != nil {
		t.Fatal(err)
	}
	for _, f := range fillers {
		waitBound(t, c, "default", f.Name)
	}
	subGroupGang(t, c, "el", 16, 8, map[string]string{phalanxv1alpha1.SubGroupMinAnnotation: "1"})
	waitBoundCount(t, c, "default", "el", 8)
	cliques := cliquesOfPods(t, c, "default", pgv1alpha1.PodGroupLabel+"=el")
	for i := 0; i < 8; i++ {
		if got := cliques[fmt.Sprintf("el-%d", i)]; got != "s0-c0" {
			t.Fatalf("rank %d in %q, want the first sub-group whole in s0-c0 (all: %v)", i, got, cliques)
		}
	}
	// The second sub-group fits only half in s0-c1: none of it binds.
	waitGroupEvent(t, c, "default", "el", "Scheduled")
	if n, _ := boundCount(ctx, c, "default", "el"); n != 8 {
		t.Fatalf("%d members bound while the second sub-group had room for half of it, want 8", n)
	}
	if err := c.Client.CoreV1().Pods("default").Delete(ctx, "fill-s0-c1-n0", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	waitBoundCount(t, c, "default", "el", 16)
	cliques = cliquesOfPods(t, c, "default", pgv1alpha1.PodGroupLabel+"=el")
	for i := 8; i < 16; i++ {
		if got := cliques[fmt.Sprintf("el-%d", i)]; got != "s0-c1" {
			t.Fatalf("rank %d in %q, want the second sub-group whole in s0-c1 (all: %v)", i, got, cliques)
		}
	}
}

// subGroupsWhole fails unless every sub-group of a subGroupObjects gang
// (pods <name>-<rank>, ranks i … i+size−1 sharing one) that has bound
// members is bound whole inside one clique, and the gang inside one spine.
// It returns the clique of each sub-group.
func subGroupsWhole(t *testing.T, c *testcluster.Cluster, name string, members, size int) []string {
	t.Helper()
	cliques := cliquesOfPods(t, c, "default", pgv1alpha1.PodGroupLabel+"="+name)
	var out []string
	spines := map[string]bool{}
	for g := 0; g < members/size; g++ {
		in := map[string]int{}
		for i := g * size; i < (g+1)*size; i++ {
			if cl, ok := cliques[fmt.Sprintf("%s-%d", name, i)]; ok {
				in[cl]++
			}
		}
		if len(in) != 1 {
			t.Fatalf("gang %s: sub-group %d (ranks %d-%d) bound in cliques %v, want all %d in one (all: %v)", name, g, g*size, (g+1)*size-1, in, size, cliques)
		}
		for cl, n := range in {
			if n != size {
				t.Fatalf("gang %s: sub-group %d has %d of %d members bound (in %s)", name, g, n, size, cl)
			}
			out = append(out, cl)
			spines[cl[:2]] = true
		}
	}
	if len(spines) != 1 {
		t.Fatalf("gang %s spans spines %v (sub-groups in %v), want one", name, spines, out)
	}
	return out
}

// TestSubGroupsReclaimedWhole: queue rich (reclaimable, the default) fills
// the cluster with two gangs of 2 sub-groups of 8 GPUs, each sub-group in a
// clique of its own; queue starved (same weight) then submits a gang of 2
// sub-groups of 4, which needs one clique: exactly what one sub-group of a
// rich gang holds. Once rich's gangs have run minRuntimeSeconds (15 s in the
// canonical config; reclaim waits for it, which is most of this test's
// time), one rich gang is reclaimed whole: all 16 of its members are
// deleted, not the 8 of one sub-group that would have made room, and its
// PodGroup says why; the other rich gang loses nothing; the starved gang
// binds with each sub-group in one clique, in the room the victim left.
func TestSubGroupsReclaimedWhole(t *testing.T) {
	c := startCluster(t, cliqueNodes()...)
	createCliqueTopology(t, c)
	createQueue(t, c, queue("rich", 1))
	createQueue(t, c, queue("starved", 1))
	startScheduler(t, c)
	ctx := ctxFor(t)
	rich := []string{"rich-a", "rich-b"}
	for _, name := range rich {
		pg, pods := subGroupObjects(name, 16, 8, nil)
		pg.Labels = map[string]string{phalanxv1alpha1.QueueLabel: "rich"}
		createGang(t, c, pg, pods)
	}
	for _, name := range rich {
		waitBoundCount(t, c, "default", name, 16)
		subGroupsWhole(t, c, name, 16, 8)
	}

	// Every deletion of a rich member, by gang.
	var mu sync.Mutex
	deleted := map[string][]string{}
	w, err := c.Client.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{LabelSelector: pgv1alpha1.PodGroupLabel})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*v1.Pod)
			if !ok || (ev.Type != watch.Deleted && p.DeletionTimestamp == nil) {
				continue
			}
			mu.Lock()
			g := p.Labels[pgv1alpha1.PodGroupLabel]
			if !slices.Contains(deleted[g], p.Name) {
				deleted[g] = append(deleted[g], p.Name)
			}
			mu.Unlock()
		}
	}()

	start := time.Now()
	pg, pods := subGroupObjects("starved", 8, 4, nil)
	pg.Labels = map[string]string{phalanxv1alpha1.QueueLabel: "starved"}
	createGang(t, c, pg, pods)
	err = testcluster.Eventually(ctx, 45*time.Second, func(ctx context.Context) (bool, error) {
		n, err := boundCount(ctx, c, "default", "starved")
		return n == 8, err
	})
	if err != nil {
		dumpPods(t, c, "default")
		t.Fatalf("the starved gang was not bound within 45 s (reclaim waits 15 s for minRuntimeSeconds): %v", err)
	}
	t.Logf("starved gang bound %v after it was submitted", time.Since(start).Round(100*time.Millisecond))
	starvedCliques := subGroupsWhole(t, c, "starved", 8, 4)

	// Let any further eviction land before counting.
	time.Sleep(time.Second)
	mu.Lock()
	defer mu.Unlock()
	var victim, survivor string
	for _, name := range rich {
		left, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: pgv1alpha1.PodGroupLabel + "=" + name})
		if err != nil {
			t.Fatal(err)
		}
		n, _ := boundCount(ctx, c, "default", name)
		switch {
		case len(deleted[name]) == 16 && len(left.Items) == 0:
			victim = name
		case len(deleted[name]) == 0 && n == 16:
			survivor = name
		default:
			sort.Strings(deleted[name])
			t.Fatalf("rich gang %s: %d of 16 members deleted (%v), %d left, %d bound; want all 16 deleted or none (one sub-group evicted alone?)",
				name, len(deleted[name]), deleted[name], len(left.Items), n)
		}
	}
	if victim == "" || survivor == "" {
		t.Fatalf("victim %q, survivor %q: want one rich gang reclaimed whole and the other untouched (deleted: %v)", victim, survivor, deleted)
	}
	waitCondition(t, c, "default", victim, "Reclaimed", "evicted whole", "queue starved is below its deserved share")
	subGroupsWhole(t, c, survivor, 16, 8)
	// The starved gang sits where the victim was: the survivor's spine is full.
	survivorCliques := cliquesOfPods(t, c, "default", pgv1alpha1.PodGroupLabel+"="+survivor)
	for _, cl := range starvedCliques {
		for _, scl := range survivorCliques {
			if cl[:2] == scl[:2] {
				t.Fatalf("starved sub-group in clique %s, in the spine of the surviving gang %s", cl, survivor)
			}
		}
	}
}

// TestSubGroupsCrashWhileBinding: the scheduler binary is killed (SIGKILL)
// while a gang of 2 sub-groups of 8 binds — its client throttled to a few
// requests a second so that the binds take seconds, killed once 4 members
// are bound — and restarted with the canonical configuration. The gang must
// end whole, each sub-group in one NVLink clique and the gang in one spine,
// and it may never stay partly bound longer than its timeout (10 s) plus
// slack: the restarted scheduler completes the gang (its bare pods would not
// come back if it evicted them).
func TestSubGroupsCrashWhileBinding(t *testing.T) {
	c := startCluster(t, cliqueNodes()...)
	createCliqueTopology(t, c)
	ctx := ctxFor(t)
	throttled := bytes.Replace(manifests.SchedulerConfig, []byte("qps: 2000"), []byte("qps: 5"), 1)
	throttled = bytes.Replace(throttled, []byte("burst: 4000"), []byte("burst: 1"), 1)
	if bytes.Equal(throttled, manifests.SchedulerConfig) {
		t.Fatal("the canonical config no longer sets qps: 2000 / burst: 4000: throttle the first scheduler another way")
	}
	var logs []string
	start := func(config []byte) *testcluster.Scheduler {
		s, err := c.StartSchedulerBinary(schedulerBinary, config, "--v=3")
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, s.Log)
		return s
	}
	sched := start(throttled)

	const name, members, size = "tp", 16, 8
	bound := countBinds(t, c, "default", pgv1alpha1.PodGroupLabel+"="+name)
	// No partial gang for longer than its timeout, at any time.
	var mu sync.Mutex
	var violation string
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() {
		var partialSince time.Time
		for watchCtx.Err() == nil {
			if n, err := boundCount(watchCtx, c, "default", name); err == nil {
				switch {
				case n == 0 || n == members:
					partialSince = time.Time{}
				case partialSince.IsZero():
					partialSince = time.Now()
				case time.Since(partialSince) > crashGangTimeout*time.Second+crashSlack:
					mu.Lock()
					if violation == "" {
						violation = fmt.Sprintf("gang %s stayed partly bound (%d of %d) for %v", name, n, members, time.Since(partialSince).Round(time.Second))
					}
					mu.Unlock()
				}
			}
			select {
			case <-watchCtx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()

	pg, pods := subGroupObjects(name, members, size, nil)
	pg.Spec.ScheduleTimeoutSeconds = ptr.To[int32](crashGangTimeout)
	createGang(t, c, pg, pods)
	deadline := time.Now().Add(30 * time.Second)
	for bound.Load() < 4 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if bound.Load() == 0 {
		t.Fatal("no member bound within 30 s of the throttled scheduler")
	}
	sched.Kill()
	atKill := bound.Load()
	time.Sleep(500 * time.Millisecond)
	t.Logf("killed with %d of %d members bound; %d bound after the kill settled", atKill, members, bound.Load())
	if bound.Load() >= members {
		t.Fatalf("all %d members were bound before the kill: the throttle did not slow the binds enough to crash mid-bind", members)
	}
	restarted := time.Now()
	start(manifests.SchedulerConfig)

	err := testcluster.Eventually(ctx, 25*time.Second, func(ctx context.Context) (bool, error) {
		n, err := boundCount(ctx, c, "default", name)
		return n == members, err
	})
	mu.Lock()
	defer mu.Unlock()
	if violation != "" {
		t.Error(violation)
	}
	if err != nil {
		n, _ := boundCount(ctx, c, "default", name)
		cond, _ := scheduledCondition(ctx, c, "default", name)
		t.Logf("after the restart: %d of %d bound, cliques %v; condition %+v", n, members, cliquesOfPods(t, c, "default", pgv1alpha1.PodGroupLabel+"="+name), cond)
		if log, rerr := os.ReadFile(logs[len(logs)-1]); rerr == nil {
			var lines []string
			for _, l := range strings.Split(string(log), "\n") {
				if strings.Contains(l, "default/"+name) {
					lines = append(lines, l)
				}
			}
			t.Logf("restarted scheduler's log, lines about the gang (last 30):\n%s", strings.Join(lines[max(0, len(lines)-30):], "\n"))
		}
		t.Fatalf("the gang was not bound whole within 25 s of the restart: %v", err)
	}
	t.Logf("whole %v after the restart", time.Since(restarted).Round(100*time.Millisecond))
	subGroupsWhole(t, c, name, members, size)
}

// TestSubGroupReplacementStaysInClique: a replacement member of a running
// sub-group (its gang above its minimum, so it joins without a plan) binds
// only in its sub-group's NVLink clique: while that clique is full it waits,
// although the other sub-group's clique in the same spine has room, and it
// binds in its own clique once room comes there.
func TestSubGroupReplacementStaysInClique(t *testing.T) {
	c := startCluster(t, cliqueNodes()...)
	createCliqueTopology(t, c)
	startScheduler(t, c)
	ctx := ctxFor(t)
	// Spine s1 full; one node of each clique of s0 full: each s0 clique has
	// room for one sub-group of 4 one-GPU members, not for both.
	var fillers []testcluster.PodSpec
	for _, n := range []string{"s1-c0-n0", "s1-c0-n1", "s1-c1-n0", "s1-c1-n1", "s0-c0-n0", "s0-c1-n0"} {
		fillers = append(fillers, testcluster.PodSpec{Name: "fill-" + n, CPU: "100m", GPUs: 4, NodeSelector: map[string]string{v1.LabelHostname: n}})
	}
	if err := c.CreatePods(ctx, fillers...); err != nil {
		t.Fatal(err)
	}
	for _, f := range fillers {
		waitBound(t, c, "default", f.Name)
	}
	const name, members, size = "rp", 8, 4
	subGroupGang(t, c, name, members, size, map[string]string{phalanxv1alpha1.SubGroupMinAnnotation: "1"})
	waitBoundCount(t, c, "default", name, members)
	cliques := subGroupsWhole(t, c, name, members, size)
	own, other := cliques[0], cliques[1]
	if own == other {
		t.Fatalf("both sub-groups in clique %s, which has room for one", own)
	}

	// Room in the other sub-group's clique; rank 0 is replaced while its own
	// clique is full again.
	otherFiller := "fill-" + other + "-n0"
	if err := c.Client.CoreV1().Pods("default").Delete(ctx, otherFiller, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	lost, err := c.Client.CoreV1().Pods("default").Get(ctx, name+"-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Client.CoreV1().Pods("default").Delete(ctx, lost.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	blocker := testcluster.PodSpec{Name: "blocker", CPU: "100m", GPUs: 1, NodeSelector: map[string]string{v1.LabelHostname: lost.Spec.NodeName}}
	if err := c.CreatePods(ctx, blocker); err != nil {
		t.Fatal(err)
	}
	waitBound(t, c, "default", blocker.Name)
	replacement := gangPods("default", name, 1, testcluster.PodSpec{CPU: "100m", GPUs: 1})[0]
	replacement.Name = name + "-0-replacement"
	replacement.Labels = map[string]string{phalanxv1alpha1.RankLabel: "0", "replacement": "yes"}
	if err := c.CreatePods(ctx, replacement); err != nil {
		t.Fatal(err)
	}
	msgs := waitMembersUnschedulable(t, c, "default", "replacement=yes", replacement.Name)
	t.Logf("while its clique %s is full: %s", own, msgs[replacement.Name])

	if err := c.Client.CoreV1().Pods("default").Delete(ctx, blocker.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	waitBound(t, c, "default", replacement.Name)
	if got := cliquesOfPods(t, c, "default", "replacement=yes")[replacement.Name]; got != own {
		t.Fatalf("the replacement of rank 0 bound in clique %q, want its sub-group's %q", got, own)
	}
}

// TestCompositePodGroupChildrenDisagree: a gang CompositePodGroup
// (minGroupCount 2) whose two PodGroups disagree on minCount (2 and 3), with
// room for all: nothing binds, and the composite's current condition is
// InvalidSubGroups naming the difference, and stays so, whichever child
// has which size and whichever is created first (each case twice): never
// MembersPending for a size read from one child.
func TestCompositePodGroupChildrenDisagree(t *testing.T) {
	featuregatetesting.SetFeatureGatesDuringTest(t, utilfeature.DefaultFeatureGate, featuregatetesting.FeatureOverrides{
		features.GenericWorkload:                 true,
		features.TopologyAwareWorkloadScheduling: true,
		features.CompositePodGroup:               true,
	})
	c, err := testcluster.Start(t, testcluster.Options{APIServerFlags: []string{
		"--runtime-config=scheduling.k8s.io/v1beta1=true,scheduling.k8s.io/v1alpha3=true",
		"--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true,CompositePodGroup=true",
	}})
	if err != nil {
		t.Fatalf("starting cluster: %v", err)
	}
	ctx := ctxFor(t)
	if err := c.CreateNodes(ctx, cliqueNodes()...); err != nil {
		t.Fatal(err)
	}
	createCliqueTopology(t, c)
	if _, err := c.StartSchedulerBinary(schedulerBinary, manifests.SchedulerConfig); err != nil {
		t.Fatal(err)
	}
	const ns = "default"
	var names []string
	for round := 0; round < 2; round++ {
		for _, tc := range []struct {
			sizes        [2]int32 // minCount of tp0, tp1
			createSecond bool     // tp1 created first
		}{
			{[2]int32{2, 3}, false}, {[2]int32{2, 3}, true},
			{[2]int32{3, 2}, false}, {[2]int32{3, 2}, true},
		} {
			name := fmt.Sprintf("bad-%d-%d%d", round, tc.sizes[0], tc.sizes[1])
			if tc.createSecond {
				name += "-rev"
			}
			names = append(names, name)
			var templates []schedulingv1beta1.PodGroupTemplate
			for g, size := range tc.sizes {
				templates = append(templates, schedulingv1beta1.PodGroupTemplate{Name: fmt.Sprintf("tp%d", g),
					SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: size}}})
			}
			wl := &schedulingv1beta1.Workload{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: schedulingv1beta1.WorkloadSpec{CompositePodGroupTemplates: []schedulingv1beta1.CompositePodGroupTemplate{{
					Name:              "replicas",
					SchedulingPolicy:  schedulingv1beta1.CompositePodGroupSchedulingPolicy{Gang: &schedulingv1beta1.CompositeGangSchedulingPolicy{MinGroupCount: 2}},
					PodGroupTemplates: templates,
				}}},
			}
			if _, err := c.Client.SchedulingV1beta1().Workloads(ns).Create(ctx, wl, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			cpg := &schedulingv1alpha3.CompositePodGroup{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: schedulingv1alpha3.CompositePodGroupSpec{
					WorkloadRef:      &schedulingv1alpha3.WorkloadReference{WorkloadName: name, TemplateName: "replicas"},
					SchedulingPolicy: schedulingv1alpha3.CompositePodGroupSchedulingPolicy{Gang: &schedulingv1alpha3.CompositeGangSchedulingPolicy{MinGroupCount: 2}},
				},
			}
			if _, err := c.Client.SchedulingV1alpha3().CompositePodGroups(ns).Create(ctx, cpg, metav1.CreateOptions{}); err != nil {
				t.Fatalf("creating the CompositePodGroup (is v1alpha3 served?): %v", err)
			}
			order := []int{0, 1}
			if tc.createSecond {
				order = []int{1, 0}
			}
			for _, g := range order {
				child := fmt.Sprintf("%s-tp%d", name, g)
				pg := &schedulingv1beta1.PodGroup{
					ObjectMeta: metav1.ObjectMeta{Name: child, Namespace: ns},
					Spec: schedulingv1beta1.PodGroupSpec{
						ParentCompositePodGroupName: ptr.To(name),
						WorkloadRef:                 &schedulingv1beta1.WorkloadReference{WorkloadName: name, TemplateName: fmt.Sprintf("tp%d", g)},
						SchedulingPolicy:            schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: tc.sizes[g]}},
					},
				}
				if _, err := c.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				for i := 0; i < int(tc.sizes[g]); i++ {
					p := testcluster.PodSpec{Name: fmt.Sprintf("%s-%d", child, i), Namespace: ns, CPU: "100m", GPUs: 1,
						Labels: map[string]string{"app": name}}.Pod()
					p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(child)}
					if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	condition := func(ctx context.Context, name string) (*metav1.Condition, error) {
		got, err := c.Client.SchedulingV1alpha3().CompositePodGroups(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		for i := range got.Status.Conditions {
			if got.Status.Conditions[i].Type == "Scheduled" {
				return &got.Status.Conditions[i], nil
			}
		}
		return nil, nil
	}
	for _, name := range names {
		var last *metav1.Condition
		err := testcluster.Eventually(ctx, 60*time.Second, func(ctx context.Context) (bool, error) {
			cond, err := condition(ctx, name)
			last = cond
			return cond != nil && cond.Reason == "InvalidSubGroups" && strings.Contains(cond.Message, "minCount 2") &&
				strings.Contains(cond.Message, "minCount 3"), err
		})
		if err != nil {
			t.Fatalf("CompositePodGroup %s never showed InvalidSubGroups naming both sizes (last %+v): %v", name, last, err)
		}
		waitKindEvent(t, c, "CompositePodGroup", ns, name, "InvalidSubGroups")
	}
	// It stays the current condition while the informers settle.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		for _, name := range names {
			cond, err := condition(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if cond == nil || cond.Reason != "InvalidSubGroups" {
				t.Fatalf("CompositePodGroup %s's condition moved off InvalidSubGroups: %+v", name, cond)
			}
			if bound, err := c.BoundPods(ctx, ns, "app="+name); err != nil || len(bound) > 0 {
				t.Fatalf("CompositePodGroup %s with invalid sub-groups has %d pods bound (%v)", name, len(bound), err)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}
