package plane

import (
	"context"

	"github.com/phalanx-sched/phalanx/internal/estimator/karmadapb"
	"github.com/phalanx-sched/phalanx/internal/global"
	"github.com/phalanx-sched/phalanx/internal/global/estimators"
)

// Asker asks the members' estimators (estimators.Pool).
type Asker interface {
	SetsEach(ctx context.Context, questions map[string]estimators.Question) map[string]estimators.Result
}

// Estimator asks every member at once, each with the jobs dispatched to it
// that have not started there as assumed workloads (their pods may not
// exist yet, so the member's planner would not see their room taken).
func Estimator(a Asker) global.Estimator { return estimatorFunc{a} }

type estimatorFunc struct{ a Asker }

func (e estimatorFunc) Sets(ctx context.Context, job *global.Job, asks []global.Ask) map[string]global.Answer {
	questions := make(map[string]estimators.Question, len(asks))
	for _, ask := range asks {
		q := estimators.Question{Namespace: job.Namespace, Kind: job.Kind, Name: job.Name, Components: job.Components}
		for _, j := range ask.Assumed {
			q.Assumed = append(q.Assumed, &karmadapb.AssumedWorkload{Namespace: j.Namespace, Components: j.Components})
		}
		questions[ask.Member] = q
	}
	out := make(map[string]global.Answer, len(questions))
	for member, r := range e.a.SetsEach(ctx, questions) {
		out[member] = global.Answer{Sets: r.Sets, Err: r.Err}
	}
	return out
}
