// Package fragment scores how a placement fragments a node's GPUs for the
// expected workload, and keeps the GPU pod shapes that workload is made of.
package fragment

import (
	"math"
	"sort"
	"sync"
	"time"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Fragmentation-aware GPU placement (issue 21), after FGD (Weng et al.,
// "Beware of Fragmentation", USENIX ATC '23): a node's GPUs are fragmented
// for a pod shape when the node has free GPUs but the shape does not fit
// there (too few GPUs, or no CPU or memory left beside them). Over the
// workload's shape distribution, a node's expected fragmentation is
//
//	F(node) = Σ_m p_m · (free GPUs of the node, if shape m does not fit it; else 0)
//
// and placing a pod should increase the cluster's expected fragmentation as
// little as possible: FragmentationDelta is F after the placement minus F
// before, on the one node that changes. Filling a half-used node up (its
// leftovers were unusable anyway) costs little; breaking into an empty
// 8-GPU node that the workload's 8-GPU pods need costs the most. Whole GPUs
// only: phalanx schedules nvidia.com/gpu as integers, so FGD's partial-GPU
// term does not arise.
//
// The workload is what the cluster has been asked to run: ShapeHistory
// keeps the GPU pod shapes seen, weighted by count and fading with a
// half-life, so the score keeps room for the shapes that keep coming. The
// planner breaks ties between equally tight nodes with it (fill), and
// Coscheduling scores nodes with it for pods outside gangs.

// WorkloadShape is one pod shape of the expected workload and its weight
// (its frequency; weights need not sum to 1).
type WorkloadShape struct {
	Request resources.List
	Weight  float64
}

// GPUResource is the resource whose fragmentation is measured.
const GPUResource = "nvidia.com/gpu"

// ExpectedFragmentation is F(node) for a node with free resources, over
// the workload (weights normalised). Shapes that ask for no GPU are left
// out: they cannot use GPUs, so they neither fragment nor defragment them.
func ExpectedFragmentation(free resources.List, workload []WorkloadShape) float64 {
	gpus := free[GPUResource]
	if gpus <= 0 {
		return 0
	}
	var sum, frag float64
	for _, m := range workload {
		if m.Weight <= 0 || m.Request[GPUResource] <= 0 {
			continue
		}
		sum += m.Weight
		if !free.Fits(m.Request) {
			frag += m.Weight * float64(gpus)
		}
	}
	if sum == 0 {
		return 0
	}
	return frag / sum
}

// FragmentationDelta is how much placing n pods of request on a node with
// free resources raises its expected fragmentation (negative: lowers it).
// Smaller is better; the planner would prefer, among nodes of equal
// capacity for the shape, the one with the smallest delta.
func FragmentationDelta(free, request resources.List, n int64, workload []WorkloadShape) float64 {
	after := free.Clone()
	after.AddScaled(request, -n)
	return ExpectedFragmentation(after, workload) - ExpectedFragmentation(free, workload)
}

// MaxWorkloadShapes bounds the shapes a ShapeHistory keeps: the rarest go
// first, and the score costs one fit test per shape and node.
const MaxWorkloadShapes = 32

// ShapeHistory is the workload's GPU pod shapes as the scheduler has seen
// them: each observed pod adds 1 to its shape's weight, and weights halve
// every half-life. Safe for concurrent use; a nil history, or one with no
// half-life, is empty and observes nothing.
type ShapeHistory struct {
	halfLife time.Duration
	mu       sync.Mutex
	shapes   map[string]*seenShape
}

type seenShape struct {
	request resources.List
	weight  float64
	at      time.Time
}

// NewShapeHistory returns a history whose weights halve every halfLife.
func NewShapeHistory(halfLife time.Duration) *ShapeHistory {
	return &ShapeHistory{halfLife: halfLife, shapes: map[string]*seenShape{}}
}

// SetHalfLife changes the half-life; not positive turns the history off and
// forgets what it saw.
func (h *ShapeHistory) SetHalfLife(halfLife time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.halfLife = halfLife
	if halfLife <= 0 {
		clear(h.shapes)
	}
}

func (h *ShapeHistory) decayed(s *seenShape, now time.Time) float64 {
	age := now.Sub(s.at)
	if age <= 0 {
		return s.weight
	}
	return s.weight * math.Exp2(-float64(age)/float64(h.halfLife))
}

// Observe counts one pod that asks for request. Pods without GPUs are not
// counted: they neither fragment GPUs nor need whole GPU nodes.
func (h *ShapeHistory) Observe(request resources.List, now time.Time) {
	if h == nil || request[GPUResource] <= 0 {
		return
	}
	key := request.String()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.halfLife <= 0 {
		return
	}
	if s, ok := h.shapes[key]; ok {
		s.weight, s.at = h.decayed(s, now)+1, now
		return
	}
	if len(h.shapes) >= MaxWorkloadShapes {
		rarest, least := "", math.Inf(1)
		for k, s := range h.shapes {
			if w := h.decayed(s, now); w < least || (w == least && k < rarest) {
				rarest, least = k, w
			}
		}
		delete(h.shapes, rarest)
	}
	h.shapes[key] = &seenShape{request: request.Clone(), weight: 1, at: now}
}

// Workload is the shapes and their weights at now, in a stable order.
func (h *ShapeHistory) Workload(now time.Time) []WorkloadShape {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.halfLife <= 0 {
		return nil
	}
	keys := make([]string, 0, len(h.shapes))
	for k := range h.shapes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]WorkloadShape, 0, len(keys))
	for _, k := range keys {
		s := h.shapes[k]
		out = append(out, WorkloadShape{Request: s.request, Weight: h.decayed(s, now)})
	}
	return out
}
