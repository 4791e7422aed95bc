// Package metrics holds the simulator's placement-quality measures as pure
// functions over what it observed: fragmentation, why a job waited, the
// scheduler's word on a pod, fair shares by water-filling, and the time
// means and percentiles the reports are made of.
package metrics

import (
	"maps"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Shape is what one pod asks for.
type Shape struct {
	CPU    int64 // millicores
	Memory int64 // bytes
	GPUs   int64
}

// Room is what a node has left: allocatable minus the requests of the pods
// bound to it that have not completed.
type Room struct {
	CPU    int64 // millicores
	Memory int64 // bytes
	GPUs   int64
}

// Fits reports whether a pod of shape s fits room r.
func (s Shape) Fits(r Room) bool {
	return s.CPU <= r.CPU && s.Memory <= r.Memory && s.GPUs <= r.GPUs
}

// FragmentedGPUs counts the free GPUs no waiting pod could use: the free
// GPUs of every node on which no waiting shape that asks for GPUs fits
// (FGD's notion of fragmentation, measured against the shapes actually
// waiting rather than an expected workload). Without waiting GPU shapes
// nothing is fragmented: no one is being kept out.
func FragmentedGPUs(rooms []Room, waiting []Shape) int64 {
	var gpuShapes []Shape
	for _, s := range waiting {
		if s.GPUs > 0 {
			gpuShapes = append(gpuShapes, s)
		}
	}
	if len(gpuShapes) == 0 {
		return 0
	}
	var frag int64
	for _, r := range rooms {
		if r.GPUs <= 0 {
			continue
		}
		usable := false
		for _, s := range gpuShapes {
			if s.Fits(r) {
				usable = true
				break
			}
		}
		if !usable {
			frag += r.GPUs
		}
	}
	return frag
}

// Percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of values;
// 0 for no values. values need not be sorted and are not modified.
func Percentile(values []float64, p float64) float64 {
	if len(values) == 0 {
		return 0
	}
	s := append([]float64(nil), values...)
	sort.Float64s(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

// CDF returns the sorted values and, for each, the fraction of values at or
// below it: the points of an empirical cumulative distribution.
func CDF(values []float64) (xs, ps []float64) {
	xs = append([]float64(nil), values...)
	sort.Float64s(xs)
	ps = make([]float64, len(xs))
	for i := range xs {
		ps[i] = float64(i+1) / float64(len(xs))
	}
	return xs, ps
}

// TimeMean is the time-weighted mean of value over the samples for which
// include is true: sample i stands for the time until sample i+1 (the last
// one for the time until end). ok is false when no time was included.
func TimeMean(at []time.Duration, end time.Duration, value []float64, include []bool) (mean float64, ok bool) {
	var sum, span float64
	EachSpan(at, end, include, func(i int, dt float64) {
		sum += value[i] * dt
		span += dt
	})
	if span == 0 {
		return 0, false
	}
	return sum / span, true
}

// EachSpan calls f with the length in seconds of each included sample's
// span: sample i stands for the time until sample i+1 (the last one until
// end); empty spans are skipped.
func EachSpan(at []time.Duration, end time.Duration, include []bool, f func(i int, dt float64)) {
	for i := range at {
		if !include[i] {
			continue
		}
		next := end
		if i+1 < len(at) {
			next = at[i+1]
		}
		if dt := (next - at[i]).Seconds(); dt > 0 {
			f(i, dt)
		}
	}
}

// WaterFill splits capacity between queues in proportion to their weights,
// never giving a queue more than it asks for (demand), and handing what a
// satisfied queue leaves to the others, again by weight: the deserved share
// of max-min weighted fairness (as Volcano's proportion plugin and phalanx's
// internal/queue compute it, without guarantees or capabilities). Queues with
// weight ≤ 0 count as weight 1.
func WaterFill(capacity float64, weight, demand map[string]float64) map[string]float64 {
	out := map[string]float64{}
	active := map[string]bool{}
	for q, d := range demand {
		out[q] = 0
		if d > 0 {
			active[q] = true
		}
	}
	left := capacity
	for left > 1e-9 && len(active) > 0 {
		// Sorted: float sums in map order differ in the last bits.
		queues := slices.Sorted(maps.Keys(active))
		var wsum float64
		for _, q := range queues {
			wsum += w(weight, q)
		}
		// Give each active queue its weighted part of what is left, capped
		// by its remaining demand; repeat with the queues still unsatisfied.
		given := 0.0
		for _, q := range queues {
			part := left * w(weight, q) / wsum
			need := demand[q] - out[q]
			if part >= need {
				part = need
				delete(active, q)
			}
			out[q] += part
			given += part
		}
		left -= given
		if given <= 1e-12 {
			break
		}
	}
	return out
}

func w(weight map[string]float64, q string) float64 {
	if v := weight[q]; v > 0 {
		return v
	}
	return 1
}

// GangOutcome is what a trace replay needs to know about one gang.
type GangOutcome struct {
	// Started: minMember members were bound at some moment.
	Started bool
	// MaxBound is the most members bound at once.
	MaxBound int
	// Domains is how many domains of the gang's required level its members
	// ran in (0 without a requirement or before anything was bound).
	Domains int
}

// GangCounts counts split gangs (members in more than one domain of the
// required level) and partial gangs (some members bound, minMember never
// reached).
func GangCounts(gangs []GangOutcome) (split, partial int) {
	for _, g := range gangs {
		if g.Domains > 1 {
			split++
		}
		if !g.Started && g.MaxBound > 0 {
			partial++
		}
	}
	return split, partial
}

// Why a waiting job had not started at a sample, judged on the free room of
// the nodes alone (GPUs, CPU and memory, per node), from the worst to the
// scheduler's own choice.
const (
	// WaitNoRoom: the free room of all nodes takes fewer of its pods than
	// it needs to start (too little free, or free in pieces too small).
	WaitNoRoom = "no room"
	// WaitNoDomain: the cluster's free room would take them, but no single
	// domain of its required level would.
	WaitNoDomain = "no domain"
	// WaitRoomHeld: the room was there: queue order, reservations, queue
	// limits or the scheduler's pace kept it waiting.
	WaitRoomHeld = "room held"
)

// DomainKey names a domain of a network level in a sample's idle GPUs.
func DomainKey(level, domain string) string { return level + "=" + domain }

// WordNotTried is SchedulerWord for a pod with no PodScheduled condition:
// not tried yet, or held back before the scheduling cycle (a scheduling
// gate, PreEnqueue).
const WordNotTried = "no PodScheduled condition"

// SchedulerWord is the scheduler's last word on an unbound pod: its
// PodScheduled condition's reason and message, numbers and names of
// objects made alike so that the same cause counts once.
func SchedulerWord(p *v1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type != v1.PodScheduled {
			continue
		}
		msg := c.Message
		if i := strings.IndexAny(msg, ";\n"); i >= 0 {
			msg = msg[:i]
		}
		msg = wordNumbers.ReplaceAllString(msg, "#")
		if r := []rune(msg); len(r) > 100 {
			msg = string(r[:100]) + "…" // by runes: a cut byte would leave invalid UTF-8
		}
		return strings.TrimSpace(c.Reason + ": " + msg)
	}
	return WordNotTried
}

// wordNumbers matches numbers, quantities and generated names' suffixes.
var wordNumbers = regexp.MustCompile(`[0-9]+(\.[0-9]+)?[a-zA-Z]{0,2}`)

// WaitCauses lists the causes in report order.
var WaitCauses = []string{WaitNoRoom, WaitNoDomain, WaitRoomHeld}

// WaitCause says why a job whose pods ask for s and that needs need more of
// them bound to start had not started, given every node's room and, for a
// job with a required level, each node's domain at that level (nil
// otherwise; "" where the node lacks the level's label).
func WaitCause(rooms []Room, domains []string, s Shape, need int) string {
	total := 0
	perDomain := map[string]int{}
	for i, r := range rooms {
		c := copiesIn(s, r)
		total += c
		if domains != nil && domains[i] != "" {
			perDomain[domains[i]] += c
		}
	}
	if total < need {
		return WaitNoRoom
	}
	if domains != nil {
		best := 0
		for _, c := range perDomain {
			best = max(best, c)
		}
		if best < need {
			return WaitNoDomain
		}
	}
	return WaitRoomHeld
}

// copiesIn is how many pods of shape s fit room r.
func copiesIn(s Shape, r Room) int {
	n := math.MaxInt
	for _, p := range [][2]int64{{s.CPU, r.CPU}, {s.Memory, r.Memory}, {s.GPUs, r.GPUs}} {
		if p[0] <= 0 {
			continue
		}
		if p[1] < p[0] {
			return 0
		}
		n = min(n, int(p[1]/p[0]))
	}
	if n == math.MaxInt {
		return 1 << 20
	}
	return n
}
