// Package consolidate plans consolidation: which running gangs to move out
// of one domain so that a gang waiting for a domain of its required level
// fits there, each moved gang proven to fit elsewhere before anything is
// evicted, and how often a queue may have it done. The manager decides when
// it applies and carries the move out.
package consolidate

import (
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/gang/planner"
	"github.com/phalanx-sched/phalanx/internal/gang/preempt"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// AnnotationCheckpointedAt, on a PodGroup or its pods, is when the job last
// saved a checkpoint (RFC 3339): consolidation counts the work a move loses
// from there rather than from the gang's start.
const AnnotationCheckpointedAt = "scheduling.phalanx.dev/checkpointed-at"

// cpuCoresPerGPU prices a gang without GPUs: its CPU cores count as GPUs at
// this rate (a GPU node has about this many cores per GPU).
const cpuCoresPerGPU = 8

// maxTries bounds the planner calls of one search.
const maxTries = 256

// Config is when consolidation moves running gangs to free a domain for a
// gang that waits for one: off while After is 0.
type Config struct {
	// After is how long a gang with a required level waits before running
	// gangs may be moved for it.
	After time.Duration
	// MinRuntime is how long a gang runs before it may be moved.
	MinRuntime time.Duration
	// PerHour bounds the consolidations done for the gangs of one queue
	// within any hour.
	PerHour int
	// EvictionGrace is how long moved gangs asked to leave through
	// EvictionRequests may take: the freed room is held that much longer.
	EvictionGrace time.Duration
}

// Candidate is a running gang that consolidation may move, with what moving
// it costs.
type Candidate struct {
	preempt.Victim
	Pods []*v1.Pod
	// Cost is the GPU-seconds of work lost: GPUs times the time since the
	// gang last started, or since its last checkpoint.
	Cost float64
	// Domains are its domains at the waiting gang's required level.
	Domains []string
}

// Candidates lists the victims consolidation may move for a gang of
// priority, cheapest first, and the shortest time until a gang too young to
// move may be. settled says whether a gang may be moved at all (bound,
// whole, no sub-groups) and gives its group object's annotations; tree and
// li are the waiting gang's required level.
func (c Config) Candidates(victims []preempt.Victim, pods map[string][]*v1.Pod, priority int32, settled func(preempt.Victim) (map[string]string, bool),
	log *Log, now time.Time, tree planner.Topology, li int) ([]Candidate, time.Duration) {
	var out []Candidate
	var youngest time.Duration
	for _, v := range victims {
		if v.Ref.IsZero() || v.Of != "" || v.Priority > priority {
			continue
		}
		annotations, ok := settled(v)
		if !ok || !Movable(pods[v.Key]) {
			continue
		}
		started := v.Started
		if t := log.MovedAt(v.Ref); t.After(started) {
			started = t
		}
		if age := now.Sub(started); age < c.MinRuntime {
			if wait := c.MinRuntime - age; youngest == 0 || wait < youngest {
				youngest = wait
			}
			continue
		}
		out = append(out, price(v, pods[v.Key], annotations, now, tree, li))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Cost != out[j].Cost {
			return out[i].Cost < out[j].Cost
		}
		return out[i].Key < out[j].Key
	})
	return out, youngest
}

// price is what moving v costs and the domains of level li it is in.
func price(v preempt.Victim, pods []*v1.Pod, annotations map[string]string, now time.Time, tree planner.Topology, li int) Candidate {
	from := v.Started
	if t := CheckpointedAt(annotations, pods); t.After(from) && !t.After(now) {
		from = t
	}
	cand := Candidate{Victim: v, Pods: pods, Cost: GPUs(v.Total) * now.Sub(from).Seconds()}
	seen := map[string]bool{}
	for node := range v.OnNode {
		if d := tree.Domains(node); li < len(d) && d[li] != "" && !seen[d[li]] {
			seen[d[li]] = true
			cand.Domains = append(cand.Domains, d[li])
		}
	}
	return cand
}

// Movable: pods whose new place the planner can prove from their spec alone
// (resources, node selector and affinity, taints). Pod affinity, topology
// spread and resource claims depend on other pods and devices.
func Movable(pods []*v1.Pod) bool {
	for _, p := range pods {
		s := p.Spec
		if len(s.ResourceClaims) > 0 || len(s.TopologySpreadConstraints) > 0 ||
			(s.Affinity != nil && (s.Affinity.PodAffinity != nil || s.Affinity.PodAntiAffinity != nil)) {
			return false
		}
	}
	return len(pods) > 0
}

// GPUs is what a gang's work is priced in: its GPUs, else its CPU cores at
// cpuCoresPerGPU to a GPU.
func GPUs(total resources.List) float64 {
	n := int64(0)
	for name, v := range total {
		if strings.HasSuffix(string(name), "/gpu") {
			n += v
		}
	}
	if n > 0 {
		return float64(n)
	}
	return float64(total[v1.ResourceCPU]) / 1000 / cpuCoresPerGPU
}

// CheckpointedAt is the latest checkpoint time the gang's group object (its
// annotations) or pods announce (zero when none, or unreadable).
func CheckpointedAt(annotations map[string]string, pods []*v1.Pod) time.Time {
	var out time.Time
	read := func(ann map[string]string) {
		if t, err := time.Parse(time.RFC3339, ann[AnnotationCheckpointedAt]); err == nil && t.After(out) {
			out = t
		}
	}
	read(annotations)
	for _, p := range pods {
		read(p.Annotations)
	}
	return out
}
