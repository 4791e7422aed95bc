// Package estimates gives a replay's pods the run-time estimates users
// give (the expected-runtime annotation): none, exact, or over-estimates
// by a factor, drawn per job name so every scheduler and run sees the same.
package estimates

import (
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/sim/scenario"
)

// Model is how a replay's jobs estimate their own run times (the
// expected-runtime annotation on their pods), as users do: not at all,
// exactly, or over by a factor.
type Model struct {
	// Over is the largest factor of over-estimate: each job's estimate is
	// its run time times a factor drawn uniformly from [1, Over], the same
	// for a job name in every run. 1 is exact; 0 gives no estimates.
	Over float64
}

// Parse reads -estimates: "" or "none", "exact", or "over:K"
// (K ≥ 1).
func Parse(raw string) (Model, error) {
	switch {
	case raw == "" || raw == "none":
		return Model{}, nil
	case raw == "exact":
		return Model{Over: 1}, nil
	case strings.HasPrefix(raw, "over:"):
		k, err := strconv.ParseFloat(strings.TrimPrefix(raw, "over:"), 64)
		if err != nil || k < 1 || math.IsInf(k, 0) {
			return Model{}, fmt.Errorf("estimates %q: over:K needs a factor K ≥ 1, e.g. over:5", raw)
		}
		return Model{Over: k}, nil
	}
	return Model{}, fmt.Errorf("estimates %q: want none, exact or over:K", raw)
}

// String is the flag's form of e.
func (e Model) String() string {
	switch {
	case e.Over <= 0:
		return "none"
	case e.Over == 1:
		return "exact"
	}
	return fmt.Sprintf("over:%g", e.Over)
}

// Of is job j's estimate (0: none).
func (e Model) Of(j scenario.Job) time.Duration {
	if e.Over <= 0 || j.Duration.Duration <= 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(j.Name))
	u := float64(h.Sum64()%1_000_000) / 1_000_000
	return time.Duration(float64(j.Duration.Duration) * (1 + (e.Over-1)*u))
}

// Annotate sets the pod's expected-runtime to job j's estimate (whole
// seconds, rounded up).
func (e Model) Annotate(pod *v1.Pod, j scenario.Job) {
	d := e.Of(j)
	if d <= 0 {
		return
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[phalanxv1alpha1.ExpectedRuntimeAnnotation] = fmt.Sprintf("%ds", int64(math.Ceil(d.Seconds())))
}
