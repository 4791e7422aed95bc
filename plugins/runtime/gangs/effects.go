package gangs

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/phalanx-sched/phalanx/internal/gang"
	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/metrics"
	"github.com/phalanx-sched/phalanx/internal/status"
)

// effects is the gang manager's effects port over the runtime: conditions
// through the status writer, wakes through the scheduling queue, evictions
// through the API, metrics through component-base.
type effects struct{ g *Gangs }

var _ gang.Effects = effects{}

func (e effects) SetCondition(spec *gangspec.Spec, reason, message string) {
	e.g.Status.Set(spec, status.Condition{Status: metav1.ConditionFalse, Reason: reason, Message: message})
}

func (e effects) Wake(ref ident.Ref) { e.g.Wake(ref) }

// WakeOne goes through one member: woken whole before a plan, members keep
// the place they entered the queue at, behind the pods then ahead of them.
func (e effects) WakeOne(ref ident.Ref, why string) { e.g.wakes.WakeOne(why, ref) }

func (e effects) Activate(pod *v1.Pod) {
	e.g.host.Activate(gang.WakeRetryAfter, map[string]*v1.Pod{pod.Namespace + "/" + pod.Name: pod})
}

func (e effects) Evict(ctx context.Context, pods []*v1.Pod, reason, message string) {
	e.g.Evict(ctx, pods, reason, message)
}

func (e effects) Observe(outcome string, d time.Duration) {
	if d > 0 {
		metrics.PlanDuration.Observe(d.Seconds())
	}
	metrics.PlanOutcomes.WithLabelValues(outcome).Inc()
}

func (e effects) Evicted(reason, forQueue string, victims int) {
	metrics.Evictions.WithLabelValues(reason).Add(float64(victims))
	if forQueue != "" {
		metrics.Reclaims.WithLabelValues(forQueue).Add(float64(victims))
	}
}
