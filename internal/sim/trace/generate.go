package trace

import (
	"bytes"
	"fmt"
	"math"
	"math/rand"
	"sort"
	"strconv"

	"github.com/phalanx-sched/phalanx/examples"
)

// Shapes are the distributions a generated trace draws from.
type Shapes struct {
	// Nodes and Pods are shapes with how often each occurs.
	Nodes []CountedShape
	Pods  []CountedShape
	// Durations are run-time percentiles: Durations[i] seconds at percentile
	// DurationPct[i].
	DurationPct, Durations []float64
}

// CountedShape is a shape (CPU in millicores, memory in MiB here) and how
// many nodes or pods have it.
type CountedShape struct {
	CPUMilli, MemoryMiB, GPUs int64
	Count                     int
}

// OpenbShapes are the shapes of Alibaba's openb GPU cluster (examples/trace).
func OpenbShapes() (Shapes, error) {
	var sh Shapes
	rows, err := numericRows(examples.OpenbNodeShapes, []string{"cpu_milli", "memory_mib", "gpus", "count"})
	if err != nil {
		return sh, fmt.Errorf("openb-node-shapes.csv: %w", err)
	}
	for _, r := range rows {
		sh.Nodes = append(sh.Nodes, CountedShape{CPUMilli: int64(r[0]), MemoryMiB: int64(r[1]), GPUs: int64(r[2]), Count: int(r[3])})
	}
	if rows, err = numericRows(examples.OpenbPodShapes, []string{"gpus", "cpu_milli", "memory_mib", "count"}); err != nil {
		return sh, fmt.Errorf("openb-pod-shapes.csv: %w", err)
	}
	for _, r := range rows {
		sh.Pods = append(sh.Pods, CountedShape{GPUs: int64(r[0]), CPUMilli: int64(r[1]), MemoryMiB: int64(r[2]), Count: int(r[3])})
	}
	if rows, err = numericRows(examples.OpenbDurations, []string{"percentile", "seconds"}); err != nil {
		return sh, fmt.Errorf("openb-durations.csv: %w", err)
	}
	for _, r := range rows {
		sh.DurationPct = append(sh.DurationPct, r[0])
		sh.Durations = append(sh.Durations, r[1])
	}
	return sh, nil
}

func numericRows(raw []byte, columns []string) ([][]float64, error) {
	_, rows, err := records(bytes.NewReader(raw), columns, len(columns))
	if err != nil {
		return nil, err
	}
	out := make([][]float64, len(rows))
	for i, row := range rows {
		for j := range columns {
			v, err := strconv.ParseFloat(row[j], 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: %s: %w", i+2, columns[j], err)
			}
			out[i] = append(out[i], v)
		}
	}
	return out, nil
}

// GangWeight is one entry of a gang-size mix: Size pods (1: a plain pod, no
// gang) with relative weight Weight.
type GangWeight struct {
	Size   int
	Weight float64
}

// GenOptions are the knobs of Generate.
type GenOptions struct {
	Seed int64
	// Load is the offered load: the jobs' GPU-seconds over the cluster's
	// GPU-seconds between 0 and the last arrival.
	Load  float64
	Nodes int
	Jobs  int
	// LeafSize nodes of the same shape share a leaf switch (network level
	// "leaf").
	LeafSize int
	// GangMix is the gang-size mix; TopologyShare the fraction of gangs
	// (size > 1) that require one leaf.
	GangMix       []GangWeight
	TopologyShare float64
	// MaxJobShare caps a job's GPUs at this fraction of the cluster's.
	MaxJobShare float64
	// DurationFrom and DurationTo clip the run-time distribution to these
	// percentiles (the openb tail runs for months).
	DurationFrom, DurationTo float64
	Queues                   []TraceQueue
	// Cliques > 0 makes the cluster GB200 NVL72-class instead of openb's
	// node shapes: Cliques NVLink cliques of CliqueNodes nodes (GB200Node),
	// SpineCliques cliques per spine (levels spine and nvlink-clique; Nodes
	// and LeafSize are not used). Gangs with a topology requirement then
	// require one nvlink-clique, and SubGroupShare of the multi-node gangs
	// (more GPUs than one node has) become tensor-parallel jobs: the gang
	// inside one spine, in sub-groups each inside one nvlink-clique.
	Cliques, SpineCliques int
	SubGroupShare         float64
	// IBLeaves > 0 adds a level above the leaves, "ib-cluster": IBLeaves
	// consecutive leaves per InfiniBand cluster; IBShare of the gangs
	// (size > 1) that do not require one leaf require one ib-cluster.
	IBLeaves int
	IBShare  float64
	// NodeGPUs > 0 keeps only the openb node shapes with this many GPUs
	// (e.g. 8: a cluster of 8-GPU servers).
	NodeGPUs int64
}

// IBLevel is the generated InfiniBand-cluster level (GenOptions.IBLeaves).
const IBLevel = "ib-cluster"

// GB200-class clusters (GenOptions.Cliques): an NVL72 rack is one NVLink
// clique of 18 compute trays of 4 GPUs (2 Grace CPUs of 72 cores, 960 GiB).
const (
	CliqueNodes  = 18
	CliqueLevel  = "nvlink-clique"
	SpineLevel   = "spine"
	cliqueGPUs   = 4
	cliqueCPU    = 144000
	cliqueMemMiB = 960 * 1024
)

// GB200Node is the node shape of a GB200-class cluster.
var GB200Node = CountedShape{CPUMilli: cliqueCPU, MemoryMiB: cliqueMemMiB, GPUs: cliqueGPUs}

// DefaultSpineCliques and DefaultSubGroupShare are -generate's defaults for
// GB200-class clusters.
const (
	DefaultSpineCliques  = 4
	DefaultSubGroupShare = 0.2
)

// DefaultGangMix is the stated assumption of issue 21's generated traces:
// the openb trace has no gangs, so 60% of jobs stay single pods and the rest
// become gangs of 2, 4 and 8 members of the same pod shape.
var DefaultGangMix = []GangWeight{{1, 0.6}, {2, 0.15}, {4, 0.15}, {8, 0.1}}

// DefaultGenOptions are `phalanx-sim trace -generate`'s defaults.
var DefaultGenOptions = GenOptions{
	Seed: 1, Load: 1.25, Nodes: 16, Jobs: 200, LeafSize: 4,
	GangMix: DefaultGangMix, TopologyShare: 0.5, MaxJobShare: 0.25,
	DurationFrom: 10, DurationTo: 90,
	Queues:       []TraceQueue{{Name: "team-a", Weight: 1}, {Name: "team-b", Weight: 2}},
	SpineCliques: DefaultSpineCliques, SubGroupShare: DefaultSubGroupShare,
}

// Generate draws a trace: Nodes nodes in the proportions of sh.Nodes
// (largest remainder), grouped by shape into leaves of LeafSize (or, with
// Cliques, GB200-class nodes in NVLink cliques under spines); Jobs jobs
// with a pod shape drawn from sh.Pods (a gang's members share it), a gang
// size from GangMix, a run time from sh.Durations between the clip
// percentiles, a queue uniformly, and arrivals uniform over the span that
// makes the offered load Load. Every job fits the empty cluster (and, with
// a topology requirement, one empty leaf or clique; with sub-groups, one
// empty clique per sub-group in one spine); draws that do not are redrawn.
func Generate(sh Shapes, o GenOptions) (*Trace, error) {
	rng := rand.New(rand.NewSource(o.Seed))
	t := &Trace{Levels: []string{"leaf"}, Queues: o.Queues}
	switch {
	case o.Jobs <= 0 || o.Load <= 0:
		return nil, fmt.Errorf("generate: jobs and load must be > 0")
	case o.Cliques > 0:
		if o.SpineCliques <= 0 || o.SubGroupShare < 0 || o.SubGroupShare > 1 {
			return nil, fmt.Errorf("generate: cliques per spine must be > 0, the sub-group share in [0, 1]")
		}
		o.Nodes = o.Cliques * CliqueNodes
		t.Levels = []string{SpineLevel, CliqueLevel}
		for i := 0; i < o.Nodes; i++ {
			clique := i / CliqueNodes
			t.Nodes = append(t.Nodes, TraceNode{
				Name: fmt.Sprintf("node-%03d", i), CPUMilli: GB200Node.CPUMilli, MemoryMiB: GB200Node.MemoryMiB, GPUs: GB200Node.GPUs,
				Domains: []string{fmt.Sprintf("spine-%d", clique/o.SpineCliques), fmt.Sprintf("clique-%d", clique)},
			})
		}
		return t.drawJobs(rng, sh, o)
	case o.Nodes <= 0 || o.LeafSize <= 0:
		return nil, fmt.Errorf("generate: nodes, jobs, load and leaf size must be > 0")
	case o.IBLeaves < 0 || o.IBShare < 0 || o.TopologyShare+o.IBShare > 1:
		return nil, fmt.Errorf("generate: leaves per IB cluster must be >= 0, the leaf and IB shares in [0, 1] together")
	}
	shapes := sh.Nodes
	if o.NodeGPUs > 0 {
		shapes = nil
		for _, s := range sh.Nodes {
			if s.GPUs == o.NodeGPUs {
				shapes = append(shapes, s)
			}
		}
		if len(shapes) == 0 {
			return nil, fmt.Errorf("generate: no openb node shape has %d GPUs", o.NodeGPUs)
		}
	}
	if o.IBLeaves > 0 {
		t.Levels = []string{IBLevel, "leaf"}
	}
	counts := largestRemainder(shapes, o.Nodes)
	var nodes []CountedShape
	for i, s := range shapes {
		for k := 0; k < counts[i]; k++ {
			nodes = append(nodes, s)
		}
	}
	sort.SliceStable(nodes, func(i, j int) bool {
		if nodes[i].GPUs != nodes[j].GPUs {
			return nodes[i].GPUs > nodes[j].GPUs
		}
		return nodes[i].CPUMilli > nodes[j].CPUMilli
	})
	for i, s := range nodes {
		leaf := i / o.LeafSize
		domains := []string{fmt.Sprintf("leaf-%d", leaf)}
		if o.IBLeaves > 0 {
			domains = []string{fmt.Sprintf("ib-%d", leaf/o.IBLeaves), domains[0]}
		}
		t.Nodes = append(t.Nodes, TraceNode{
			Name: fmt.Sprintf("node-%03d", i), CPUMilli: s.CPUMilli, MemoryMiB: s.MemoryMiB, GPUs: s.GPUs,
			Domains: domains,
		})
	}
	return t.drawJobs(rng, sh, o)
}

// drawJobs draws the jobs of a trace whose nodes are there.
func (t *Trace) drawJobs(rng *rand.Rand, sh Shapes, o GenOptions) (*Trace, error) {
	total := t.GPUs()
	var work float64
	for i := 0; i < o.Jobs; i++ {
		var j TraceJob
		for attempt := 0; ; attempt++ {
			if attempt > 1000 {
				return nil, fmt.Errorf("generate: no job shape fits this cluster of %d nodes", o.Nodes)
			}
			pod := pick(rng, sh.Pods)
			size := pickGang(rng, o.GangMix)
			j = TraceJob{Name: fmt.Sprintf("job-%04d", i), Pods: size, CPUMilli: pod.CPUMilli, GPUs: pod.GPUs, MemoryMiB: pod.MemoryMiB}
			if size > 1 {
				j.MinMember = size
				switch {
				case o.Cliques == 0:
					switch r := rng.Float64(); {
					case r < o.TopologyShare:
						j.Topology = "leaf"
					case o.IBLeaves > 0 && r < o.TopologyShare+o.IBShare:
						j.Topology = IBLevel
					}
				case j.GPUs*int64(size) > GB200Node.GPUs && rng.Float64() < o.SubGroupShare:
					// A multi-node gang made tensor-parallel: the gang in
					// one spine, sub-groups of a node's GPUs or more each
					// in one NVLink clique.
					j.Topology, j.SubGroupTopology = SpineLevel, CliqueLevel
					j.SubGroupSize = subGroupSize(size, j.GPUs, GB200Node.GPUs)
				case rng.Float64() < o.TopologyShare:
					j.Topology = CliqueLevel
				}
			}
			if o.MaxJobShare > 0 && float64(j.GPUs)*float64(size) > o.MaxJobShare*float64(total) {
				continue
			}
			if t.fits(j) {
				break
			}
		}
		j.Duration = math.Round(percentile(sh.DurationPct, sh.Durations, o.DurationFrom+rng.Float64()*(o.DurationTo-o.DurationFrom)))
		j.Duration = math.Max(j.Duration, 1)
		if len(o.Queues) > 0 {
			j.Queue = o.Queues[rng.Intn(len(o.Queues))].Name
		}
		work += float64(j.GPUs) * float64(j.Pods) * j.Duration
		t.Jobs = append(t.Jobs, j)
	}
	span := work / (float64(total) * o.Load)
	arrivals := make([]float64, len(t.Jobs))
	for i := range arrivals {
		arrivals[i] = math.Round(rng.Float64() * span)
	}
	sort.Float64s(arrivals)
	// The last arrival ends the span, so the offered load is what was asked.
	arrivals[len(arrivals)-1] = math.Round(span)
	for i := range t.Jobs {
		t.Jobs[i].Arrival = arrivals[i]
	}
	return t, t.Validate()
}

// subGroupSize is the tensor-parallel group of a gang of members pods of
// gpus GPUs each on nodes of nodeGPUs: the fewest members (at least 2)
// that divide the gang and hold at least one node's GPUs.
func subGroupSize(members int, gpus, nodeGPUs int64) int {
	for s := 2; s < members; s++ {
		if members%s == 0 && int64(s)*gpus >= nodeGPUs {
			return s
		}
	}
	return members
}

// fits reports whether job j fits the empty cluster (one empty domain of its
// required level; with sub-groups, min_member/subgroup_size of them, each
// in one empty domain of their level, inside that domain).
func (t *Trace) fits(j TraceJob) bool {
	need := j.MinMember
	if need == 0 {
		need = j.Pods
	}
	level, subLevel := -1, -1
	for i, l := range t.Levels {
		if l == j.Topology {
			level = i
		}
		if l == j.SubGroupTopology {
			subLevel = i
		}
	}
	// Members each node takes, by domain of the job's level and (with
	// sub-groups) of theirs.
	perDomain := map[string]int{}
	perSub := map[[2]string]int{}
	for _, n := range t.Nodes {
		k := math.MaxInt
		for _, pair := range [][2]int64{{n.CPUMilli, j.CPUMilli}, {n.MemoryMiB, j.MemoryMiB}, {n.GPUs, j.GPUs}} {
			if pair[1] > 0 {
				k = min(k, int(pair[0]/pair[1]))
			}
		}
		if k == math.MaxInt {
			k = need
		}
		domain := ""
		if level >= 0 {
			domain = n.Domains[level]
		}
		if j.SubGroupSize > 0 {
			sub := n.Name // host
			if subLevel >= 0 {
				sub = n.Domains[subLevel]
			}
			perSub[[2]string{domain, sub}] += k
			continue
		}
		perDomain[domain] += k
		if perDomain[domain] >= need {
			return true
		}
	}
	if j.SubGroupSize == 0 {
		return false
	}
	groups := map[string]int{}
	for key, k := range perSub {
		groups[key[0]] += k / j.SubGroupSize
		if groups[key[0]] >= need/j.SubGroupSize {
			return true
		}
	}
	return false
}

func largestRemainder(shapes []CountedShape, n int) []int {
	var sum int
	for _, s := range shapes {
		sum += s.Count
	}
	out := make([]int, len(shapes))
	if sum == 0 {
		return out
	}
	type rem struct {
		i int
		r float64
	}
	var rems []rem
	given := 0
	for i, s := range shapes {
		exact := float64(s.Count) * float64(n) / float64(sum)
		out[i] = int(exact)
		given += out[i]
		rems = append(rems, rem{i, exact - float64(out[i])})
	}
	sort.SliceStable(rems, func(a, b int) bool { return rems[a].r > rems[b].r })
	for k := 0; given < n; k++ {
		out[rems[k%len(rems)].i]++
		given++
	}
	return out
}

func pick(rng *rand.Rand, shapes []CountedShape) CountedShape {
	var sum int
	for _, s := range shapes {
		sum += s.Count
	}
	x := rng.Intn(sum)
	for _, s := range shapes {
		if x < s.Count {
			return s
		}
		x -= s.Count
	}
	return shapes[len(shapes)-1]
}

func pickGang(rng *rand.Rand, mix []GangWeight) int {
	var sum float64
	for _, g := range mix {
		sum += g.Weight
	}
	x := rng.Float64() * sum
	for _, g := range mix {
		if x < g.Weight {
			return g.Size
		}
		x -= g.Weight
	}
	return mix[len(mix)-1].Size
}

// percentile interpolates linearly in a percentile table.
func percentile(pct, values []float64, p float64) float64 {
	if len(pct) == 0 {
		return 0
	}
	if p <= pct[0] {
		return values[0]
	}
	for i := 1; i < len(pct); i++ {
		if p <= pct[i] {
			f := (p - pct[i-1]) / (pct[i] - pct[i-1])
			return values[i-1] + f*(values[i]-values[i-1])
		}
	}
	return values[len(values)-1]
}
