// Package bench holds phalanx's benchmark workloads: the schedulers they
// run through, their nodes, pods and gang objects (phalanx's and upstream's
// Workload API), creating and checking them on an API server, and where a
// pass placed their gangs. The engines that run them are side (the
// side-by-side engine, reported by side/report) and perf (upstream's
// scheduler_perf, run by test/schedperf); estimatorbench times the Karmada
// estimator on a member of its own.
package bench

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// Scheduler is one of the schedulers a workload runs through.
type Scheduler string

const (
	// Stock is the upstream kube-scheduler binary with its default profile;
	// gang members are plain pods to it.
	Stock Scheduler = "stock"
	// UpstreamGang is the same binary with the Workload API gates on:
	// the in-tree GangScheduling (and, for topology, TopologyPlacementGenerator)
	// plugins, pods in scheduling.k8s.io/v1beta1 PodGroups.
	UpstreamGang Scheduler = "upstream-gang"
	// Phalanx is phalanx-scheduler with the canonical profile.
	Phalanx Scheduler = "phalanx"
	// PhalanxFlat is the same binary and profile with the workload's gangs
	// at their own level alone: the sub-group annotations left out, so the
	// plan with sub-groups can be set against the plan without.
	PhalanxFlat Scheduler = "phalanx-flat"
	// RawBind is no scheduler: 16 workers bind the workload's pods straight
	// through the binding subresource, round robin over the nodes. It is
	// the API server's own limit, which no scheduler can pass.
	RawBind Scheduler = "raw-bind"
)

// AllSchedulers are every pass a workload may make.
var AllSchedulers = []Scheduler{Stock, UpstreamGang, Phalanx, PhalanxFlat, RawBind}

// RawBindWorkers is how many clients bind at once in the RawBind pass.
const RawBindWorkers = 16

// IsPhalanx says whether s runs phalanx-scheduler.
func (s Scheduler) IsPhalanx() bool { return s == Phalanx || s == PhalanxFlat }

// SchedulerName is the profile name the workload's pods ask for.
func (s Scheduler) SchedulerName() string {
	switch s {
	case Stock:
		return "stock-scheduler"
	case UpstreamGang:
		return "upstream-gang-scheduler"
	case RawBind:
		// No scheduler has this name: the pods wait for the binding workers.
		return "raw-bind"
	}
	return "phalanx-scheduler"
}

// UpstreamGates are the feature gates of upstream's workload-aware
// scheduling, set on the API server (to serve scheduling.k8s.io/v1beta1 and
// keep pods' spec.schedulingGroup) and on the UpstreamGang scheduler. In
// Kubernetes 1.37 GenericWorkload (beta, off by default) also turns on the
// in-tree GangScheduling plugin; 1.36's GangScheduling gate is gone.
var UpstreamGates = []string{"GenericWorkload", "TopologyAwareWorkloadScheduling"}

// CompositeGate is the alpha gate of upstream's CompositePodGroup
// (scheduling.k8s.io/v1alpha3), on for the API server and the UpstreamGang
// scheduler of workloads with sub-groups only.
const CompositeGate = "CompositePodGroup"

// StockConfig is kube-scheduler's default profile with the same client limits
// as the canonical phalanx config, so the comparison is about scheduling.
// The profile's schedulerName is filled in per run.
var StockConfig = []byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  qps: 2000
  burst: 4000
profiles:
- schedulerName: stock-scheduler
`)

// Node topology of the topology workload: IB clusters of IBSize nodes, leaf
// switches of LeafSize nodes, then hosts.
const (
	IBLabel   = "network.example.com/ib-cluster"
	LeafLabel = "network.example.com/leaf"
	IBSize    = 512
	LeafSize  = 16
)

// Node topology of the sub-group workload, modelled on GB200 NVL72: nodes
// (compute trays) of CliqueNodeGPUs GPUs, CliqueNodes of them per NVLink
// clique (one NVL72 rack, 72 GPUs, node label nvidia.com/gpu.clique as the
// GPU operator's feature discovery sets it), SpineCliques cliques under one
// spine (1152 GPUs: a 1024-GPU gang of 64-GPU sub-groups needs 16 cliques,
// since a clique takes one sub-group of 64).
const (
	SpineLabel     = "network.example.com/spine"
	CliqueLabel    = "nvidia.com/gpu.clique"
	CliqueNodes    = 18
	CliqueNodeGPUs = 4
	SpineCliques   = 16
)

// Workload is one benchmark case; both engines build their objects from it.
type Workload struct {
	Name  string
	Nodes int
	// Gangs × GangSize pods when GangSize > 0, else Pods plain pods.
	Pods     int
	Gangs    int
	GangSize int
	CPU      string // per pod
	GPUs     int64  // per pod
	// Topology labels nodes in 3 levels (ib-cluster, leaf, host) and asks
	// gangs for RequiredLevel.
	Topology      bool
	RequiredLevel string
	// Cliques makes the nodes GB200 NVL72-class (CliqueNodeGPUs GPUs each)
	// labelled with their NVLink clique and spine (levels spine,
	// nvlink-clique, host); gangs ask for RequiredLevel.
	Cliques bool
	// SubGroupSize > 0 makes each gang a gang of sub-groups of this many
	// members (ranks i…i+SubGroupSize−1 by the rank label), each required
	// inside one domain of SubGroupLevel.
	SubGroupSize  int
	SubGroupLevel string
	// Queues spreads the gangs round-robin over this many queues with
	// weights 1..Queues (the stock scheduler ignores them).
	Queues int
	// Devices is how many DRA devices each node publishes in a ResourceSlice
	// of DRADriver; each pod then claims one of them through its own claim,
	// made from the namespace's ResourceClaimTemplate DRATemplate.
	Devices int
	// Mix, when set, makes a mixed workload: gangs of different sizes and
	// plain pods (it replaces Gangs × GangSize).
	Mix *Mix
}

// Mix is a mixed workload: gang g has Sizes[g] members, and RequiredEvery > 0
// asks RequiredLevel of every RequiredEvery-th gang only (the first among
// them); Pods plain pods of PodCPU (no GPU) follow the gangs' members.
type Mix struct {
	Sizes         []int
	RequiredEvery int
	Pods          int
	PodCPU        string
	// starts[g] is the index of gang g's first member; starts[len] the
	// first plain pod.
	starts []int
}

// NewMix returns the mix with its member offsets.
func NewMix(sizes []int, requiredEvery, pods int, podCPU string) *Mix {
	m := &Mix{Sizes: sizes, RequiredEvery: requiredEvery, Pods: pods, PodCPU: podCPU, starts: make([]int, len(sizes)+1)}
	for g, n := range sizes {
		m.starts[g+1] = m.starts[g] + n
	}
	return m
}

// NumGangs is the number of gangs.
func (w Workload) NumGangs() int {
	switch {
	case w.Mix != nil:
		return len(w.Mix.Sizes)
	case w.GangSize > 0:
		return w.Gangs
	}
	return 0
}

// SizeOf is gang g's number of members.
func (w Workload) SizeOf(g int) int {
	if w.Mix != nil {
		return w.Mix.Sizes[g]
	}
	return w.GangSize
}

// firstOf is the index of gang g's first member.
func (w Workload) firstOf(g int) int {
	if w.Mix != nil {
		return w.Mix.starts[g]
	}
	return g * w.GangSize
}

// gangPods is the number of gang members; pods from there on are plain.
func (w Workload) gangPods() int { return w.firstOf(w.NumGangs()) }

// memberOf is pod i's gang and rank; ok is false for a plain pod.
func (w Workload) memberOf(i int) (g, rank int, ok bool) {
	switch {
	case i >= w.gangPods():
		return 0, 0, false
	case w.Mix != nil:
		g = sort.SearchInts(w.Mix.starts, i+1) - 1
		return g, i - w.Mix.starts[g], true
	}
	return i / w.GangSize, i % w.GangSize, true
}

// RequiredOf is the level gang g must be placed in ("" for none).
func (w Workload) RequiredOf(g int) string {
	if w.Mix != nil && w.Mix.RequiredEvery > 0 && g%w.Mix.RequiredEvery != 0 {
		return ""
	}
	return w.RequiredLevel
}

// Total is the number of pods the workload schedules.
func (w Workload) Total() int {
	switch {
	case w.Mix != nil:
		return w.gangPods() + w.Mix.Pods
	case w.GangSize > 0:
		return w.Gangs * w.GangSize
	}
	return w.Pods
}

// Describe is a one-line description for tables.
func (w Workload) Describe() string {
	switch {
	case w.Mix != nil:
		every := ""
		if w.Mix.RequiredEvery > 0 && w.RequiredLevel != "" {
			every = fmt.Sprintf(", one in %d required one %s", w.Mix.RequiredEvery, w.RequiredLevel)
		}
		return fmt.Sprintf("%d gangs of %d to %d pods (%d in all, %d GPU each%s) and %d plain pods, on %d nodes",
			w.NumGangs(), slices.Min(w.Mix.Sizes), slices.Max(w.Mix.Sizes), w.gangPods(), w.GPUs, every, w.Mix.Pods, w.Nodes)
	case w.SubGroupSize > 0:
		return fmt.Sprintf("%d × %d-pod gang (%d GPU each) in %d sub-groups of %d, each required one %s, the gang one %s, on %d nodes × %d GPUs (%d per clique, %d cliques per spine)",
			w.Gangs, w.GangSize, w.GPUs, w.GangSize/w.SubGroupSize, w.SubGroupSize, w.SubGroupLevel, w.RequiredLevel, w.Nodes, CliqueNodeGPUs, CliqueNodes, SpineCliques)
	case w.Devices > 0:
		return fmt.Sprintf("%d × %d gangs, one DRA device per pod (claim template), on %d nodes × %d devices", w.Gangs, w.GangSize, w.Nodes, w.Devices)
	case w.Topology:
		return fmt.Sprintf("%d × %d-pod gang (%d GPUs each), required one %s, on %d nodes", w.Gangs, w.GangSize, w.GPUs, w.RequiredLevel, w.Nodes)
	case w.Queues > 0:
		return fmt.Sprintf("%d × %d gangs over %d queues on %d nodes", w.Gangs, w.GangSize, w.Queues, w.Nodes)
	case w.GangSize > 0:
		return fmt.Sprintf("%d × %d gangs on %d nodes", w.Gangs, w.GangSize, w.Nodes)
	}
	return fmt.Sprintf("%d plain pods on %d nodes", w.Pods, w.Nodes)
}

// Schedulers lists the schedulers the workload runs through. The in-tree
// GangScheduling has no queues, so the queue workload leaves it out; a
// workload with sub-groups also runs phalanx on its gangs without them.
func (w Workload) Schedulers() []Scheduler {
	if w.Mix != nil {
		// Upstream's gang plugin places 30–80 pods/s at a few thousand
		// nodes (the topology rows): tens of minutes here.
		return []Scheduler{Stock, Phalanx}
	}
	if w.SubGroupSize > 0 {
		return []Scheduler{Stock, UpstreamGang, Phalanx, PhalanxFlat}
	}
	if w.GangSize > 0 && w.Queues == 0 {
		return []Scheduler{Stock, UpstreamGang, Phalanx}
	}
	return []Scheduler{Stock, Phalanx}
}

// Passes are the workload's schedulers and the raw-bind pass.
func (w Workload) Passes() []Scheduler { return append(w.Schedulers(), RawBind) }

// Sizes are the knobs of the default workloads.
type Sizes struct {
	Nodes, Pods                 int // plain
	GangNodes, Gangs, GangSize  int
	TopologyNodes, TopologyGang int
	Queues                      int
	// DRAGangSize is the gang size of the DRA workload (on GangNodes,
	// Gangs gangs).
	DRAGangSize int
	// SubGroupNodes, SubGroupGang and SubGroupSize size the sub-group
	// workload: one gang of SubGroupGang members in sub-groups of
	// SubGroupSize on SubGroupNodes GB200-class nodes.
	SubGroupNodes, SubGroupGang, SubGroupSize int
	// ScaleNodes, ScaleGangs and ScalePods size the scale workload: gangs of
	// 8 to 256 members (ScaleGangSizes), one in 3 required one IB cluster,
	// and plain pods, on nodes in IB clusters and leaves.
	ScaleNodes, ScaleGangs, ScalePods int
}

// DefaultSizes are the sizes issue 13 (and, for DRA gangs, issue 18; for
// sub-groups, 1024 GPUs in tensor-parallel groups of 64 on 16 spines of 16
// NVL72 cliques) names.
var DefaultSizes = Sizes{Nodes: 5000, Pods: 10000, GangNodes: 1000, Gangs: 100, GangSize: 64, TopologyNodes: 4096, TopologyGang: 1024, Queues: 4, DRAGangSize: 16,
	SubGroupNodes: 16 * SpineCliques * CliqueNodes, SubGroupGang: 1024, SubGroupSize: 64,
	ScaleNodes: 10000, ScaleGangs: 2000, ScalePods: 10000}

// ScaleGangSizes are n gang sizes from 8 to 256, most of them small as in
// the traces: 8, 16, 32, 64, 128, 256 members in 50, 25, 12, 7, 4, 2 % of
// the gangs (26.6 members on average), in a fixed shuffled order.
func ScaleGangSizes(n int) []int {
	weights := []struct{ size, percent int }{{8, 50}, {16, 25}, {32, 12}, {64, 7}, {128, 4}, {256, 2}}
	sizes := make([]int, 0, n)
	for _, w := range weights {
		for range n * w.percent / 100 {
			sizes = append(sizes, w.size)
		}
	}
	for len(sizes) < n {
		sizes = append(sizes, 8)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(sizes), func(i, j int) { sizes[i], sizes[j] = sizes[j], sizes[i] })
	return sizes
}

// Workloads returns the benchmark's one set of workloads.
func Workloads(s Sizes) []Workload {
	return []Workload{
		{Name: "plain-pods", Nodes: s.Nodes, Pods: s.Pods, CPU: "100m"},
		{Name: "gangs", Nodes: s.GangNodes, Gangs: s.Gangs, GangSize: s.GangSize, CPU: "1"},
		// One gang of 4 GPUs per member, required inside one IB cluster.
		{Name: "topology", Nodes: s.TopologyNodes, Gangs: 1, GangSize: s.TopologyGang, CPU: "1", GPUs: 4, Topology: true, RequiredLevel: "ib-cluster"},
		// The gang workload again, its gangs spread over weighted queues.
		{Name: "queues", Nodes: s.GangNodes, Gangs: s.Gangs, GangSize: s.GangSize, CPU: "1", Queues: s.Queues},
		// Gangs whose members each claim one DRA device of 8 per node.
		{Name: "dra-gangs", Nodes: s.GangNodes, Gangs: s.Gangs, GangSize: s.DRAGangSize, CPU: "1", Devices: 8},
		// One gang of 1-GPU members in tensor-parallel sub-groups, each
		// required inside one NVLink clique, the gang inside one spine.
		{Name: "subgroups", Nodes: s.SubGroupNodes, Gangs: 1, GangSize: s.SubGroupGang, CPU: "1", GPUs: 1, Cliques: true, RequiredLevel: "spine",
			SubGroupSize: s.SubGroupSize, SubGroupLevel: "nvlink-clique"},
		// Scale: gangs of 8 to 256 (1 GPU per member), a third of them
		// required inside one IB cluster, and CPU-only plain pods.
		{Name: "scale", Nodes: s.ScaleNodes, CPU: "1", GPUs: 1, Topology: true, RequiredLevel: "ib-cluster",
			Mix: NewMix(ScaleGangSizes(s.ScaleGangs), 3, s.ScalePods, "100m")},
	}
}

// The DRA workload's driver, its DeviceClass (same name) and the claim
// template of its pods.
const (
	DRADriver   = "gpu.example.com"
	DRATemplate = "gpu"
)

// DeviceClass selects the DRA workload's devices by driver.
func DeviceClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: DRADriver},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
			CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", DRADriver)},
		}}},
	}
}

// ResourceSlice is node i's devices, as its DRA driver would publish them:
// one pool per node, one slice.
func (w Workload) ResourceSlice(i int) *resourceapi.ResourceSlice {
	node := w.Node(i).Name
	slice := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + DRADriver},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   DRADriver,
			NodeName: ptr.To(node),
			Pool:     resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1},
		},
	}
	for d := 0; d < w.Devices; d++ {
		slice.Spec.Devices = append(slice.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", d)})
	}
	return slice
}

// ClaimTemplate asks for one device of the class; the resourceclaim
// controller makes each pod its own claim from it.
func ClaimTemplate(ns string) *resourceapi.ResourceClaimTemplate {
	return &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: DRATemplate, Namespace: ns},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: DRADriver, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
			}}},
		}}},
	}
}

// nodeLabels are the network labels of node i ({{Index}} in templates).
func (w Workload) nodeLabels(i int) map[string]string {
	switch {
	case w.Cliques:
		return map[string]string{SpineLabel: fmt.Sprintf("spine-%d", i/(CliqueNodes*SpineCliques)), CliqueLabel: fmt.Sprintf("clique-%d", i/CliqueNodes)}
	case w.Topology:
		return map[string]string{IBLabel: fmt.Sprintf("ib-%d", i/IBSize), LeafLabel: fmt.Sprintf("leaf-%d", i/LeafSize)}
	}
	return nil
}

// Node is node i: 32 CPUs, 256Gi, 8 GPUs, publishing a NodeResourceTopology
// object with policy none (one zone), as NFD topology-updater would. With
// Cliques it is a GB200 compute tray: 2 Grace CPUs (144 cores), 960Gi and 4
// GPUs.
func (w Workload) Node(i int) testcluster.NodeSpec {
	if w.Cliques {
		return testcluster.NodeSpec{Name: fmt.Sprintf("node-%d", i), CPU: "144", Memory: "960Gi", GPUs: CliqueNodeGPUs, Pods: 110, NRTPolicy: "none", Labels: w.nodeLabels(i)}
	}
	return testcluster.NodeSpec{Name: fmt.Sprintf("node-%d", i), CPU: "32", Memory: "256Gi", GPUs: 8, Pods: 110, NRTPolicy: "none", Labels: w.nodeLabels(i)}
}

// LevelLabel is the node label of a network level of the workloads.
func LevelLabel(level string) string {
	return map[string]string{"ib-cluster": IBLabel, "leaf": LeafLabel, "spine": SpineLabel, "nvlink-clique": CliqueLabel, "host": v1.LabelHostname}[level]
}

// NetworkTopology is the phalanx NetworkTopology of the topology workload.
func NetworkTopology() *phalanxv1alpha1.NetworkTopology {
	return &phalanxv1alpha1.NetworkTopology{
		ObjectMeta: metav1.ObjectMeta{Name: phalanxv1alpha1.DefaultNetworkTopologyName},
		Spec: phalanxv1alpha1.NetworkTopologySpec{Levels: []phalanxv1alpha1.TopologyLevel{
			{Name: "ib-cluster", NodeLabel: IBLabel}, {Name: "leaf", NodeLabel: LeafLabel}, {Name: "host", NodeLabel: v1.LabelHostname},
		}},
	}
}

// CliqueNetworkTopology is the phalanx NetworkTopology of the sub-group
// workload: spine, NVLink clique, host.
func CliqueNetworkTopology() *phalanxv1alpha1.NetworkTopology {
	return &phalanxv1alpha1.NetworkTopology{
		ObjectMeta: metav1.ObjectMeta{Name: phalanxv1alpha1.DefaultNetworkTopologyName},
		Spec: phalanxv1alpha1.NetworkTopologySpec{Levels: []phalanxv1alpha1.TopologyLevel{
			{Name: "spine", NodeLabel: SpineLabel}, {Name: "nvlink-clique", NodeLabel: CliqueLabel}, {Name: "host", NodeLabel: v1.LabelHostname},
		}},
	}
}

// Queue is queue q of the queue workload (weight q+1).
func Queue(q int) *phalanxv1alpha1.Queue {
	return &phalanxv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("queue-%d", q)}, Spec: phalanxv1alpha1.QueueSpec{Weight: int32(q + 1)}}
}

// GangName is the name of gang g.
func GangName(g int) string { return fmt.Sprintf("gang-%d", g) }

// PodName is the name of pod i.
func (w Workload) PodName(i int) string {
	if g, r, ok := w.memberOf(i); ok {
		return fmt.Sprintf("gang-%d-%d", g, r)
	}
	return fmt.Sprintf("pod-%d", i-w.gangPods())
}

// Rank is pod i's rank in its gang (its index there).
func (w Workload) Rank(i int) int {
	_, r, _ := w.memberOf(i)
	return r
}

// SubGroupName is the upstream PodGroup of sub-group k of gang g.
func SubGroupName(g, k int) string { return UpstreamSubGroupName(GangName(g), k) }

// Pod is pod i for scheduler s. Every scheduler gets the same pod (gang
// members carry the PodGroup label, which the stock scheduler ignores, and,
// with sub-groups, their rank label); the upstream gang scheduler's pods
// also name their v1beta1 PodGroup (with sub-groups: their sub-group's).
// Pods of the DRA workload claim a device through the claim template.
func (w Workload) Pod(s Scheduler, ns string, i int) *v1.Pod {
	spec := testcluster.PodSpec{Name: w.PodName(i), Namespace: ns, SchedulerName: s.SchedulerName(), CPU: w.CPU, GPUs: w.GPUs}
	g, _, member := w.memberOf(i)
	if member {
		spec.PodGroup = GangName(g)
	} else if w.Mix != nil {
		spec.CPU, spec.GPUs = w.Mix.PodCPU, 0
	}
	if w.SubGroupSize > 0 {
		spec.Labels = map[string]string{phalanxv1alpha1.RankLabel: strconv.Itoa(w.Rank(i))}
	}
	pod := spec.Pod()
	if w.Devices > 0 {
		pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(DRATemplate)}}
		pod.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
	}
	if s == UpstreamGang && member {
		group := spec.PodGroup
		if w.SubGroupSize > 0 {
			group = SubGroupName(g, w.Rank(i)/w.SubGroupSize)
		}
		pod.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
	}
	return pod
}

// PodGroup is gang g as a scheduler-plugins PodGroup (phalanx's gang API):
// its level and, with sub-groups, their size and level as annotations.
func (w Workload) PodGroup(ns string, g int) *pgv1alpha1.PodGroup {
	pg := testcluster.PodGroup(ns, GangName(g), int32(w.SizeOf(g)))
	if level := w.RequiredOf(g); level != "" {
		pg.Annotations = map[string]string{phalanxv1alpha1.TopologyRequiredAnnotation: level}
	}
	if w.SubGroupSize > 0 {
		pg.Annotations[phalanxv1alpha1.SubGroupSizeAnnotation] = strconv.Itoa(w.SubGroupSize)
		pg.Annotations[phalanxv1alpha1.SubGroupTopologyRequiredAnnotation] = w.SubGroupLevel
	}
	if w.Queues > 0 {
		pg.Labels = map[string]string{phalanxv1alpha1.QueueLabel: fmt.Sprintf("queue-%d", g%w.Queues)}
	}
	return pg
}

// PodGroupFor is gang g's PodGroup for phalanx scheduler s: PhalanxFlat
// gets the gang at its own level alone, without the sub-group annotations.
func (w Workload) PodGroupFor(s Scheduler, ns string, g int) *pgv1alpha1.PodGroup {
	pg := w.PodGroup(ns, g)
	if s == PhalanxFlat {
		delete(pg.Annotations, phalanxv1alpha1.SubGroupSizeAnnotation)
		delete(pg.Annotations, phalanxv1alpha1.SubGroupTopologyRequiredAnnotation)
	}
	return pg
}

// upstream is gang g as upstream's Workload API writes it: a gang of
// GangSize with the gang's key (the topology workload's ib-cluster), or,
// with sub-groups, a composite of the gang's level over sub-groups of
// SubGroupSize of the sub-groups' level.
func (w Workload) upstream(ns string, g int) UpstreamObjects {
	u := UpstreamObjects{Namespace: ns, Name: GangName(g), MinCount: int32(w.SizeOf(g))}
	if w.SubGroupSize > 0 {
		u.SubGroupSize, u.Key, u.SubKey = int32(w.SubGroupSize), LevelLabel(w.RequiredLevel), LevelLabel(w.SubGroupLevel)
	} else if w.RequiredOf(g) == "ib-cluster" {
		u.Key = LevelLabel(w.RequiredLevel)
	}
	return u
}

// UpstreamWorkload is gang g's upstream Workload (UpstreamObjects.Workload).
func (w Workload) UpstreamWorkload(ns string, g int) *schedulingv1beta1.Workload {
	return w.upstream(ns, g).Workload()
}

// UpstreamPodGroup is gang g's runtime PodGroup (no sub-groups).
func (w Workload) UpstreamPodGroup(ns string, g int) *schedulingv1beta1.PodGroup {
	return w.upstream(ns, g).PodGroup()
}

// UpstreamCompositePodGroup is gang g's runtime CompositePodGroup.
func (w Workload) UpstreamCompositePodGroup(ns string, g int) *schedulingv1alpha3.CompositePodGroup {
	return w.upstream(ns, g).CompositePodGroup()
}

// UpstreamSubGroups are gang g's sub-groups' runtime PodGroups.
func (w Workload) UpstreamSubGroups(ns string, g int) []*schedulingv1beta1.PodGroup {
	return w.upstream(ns, g).SubGroups()
}

// upstreamGates are the gates of the API server and of the UpstreamGang
// scheduler for this workload.
func (w Workload) upstreamGates() []string {
	if w.SubGroupSize > 0 {
		return append(append([]string(nil), UpstreamGates...), CompositeGate)
	}
	return UpstreamGates
}
