package gangspec

import (
	"encoding/json"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
)

// SpecFromPodGroup reads a scheduler-plugins PodGroup.
func SpecFromPodGroup(pg *pgv1alpha1.PodGroup) *Spec {
	s := &Spec{
		Ref:         ident.Ref{Namespace: pg.Namespace, Name: pg.Name},
		UID:         pg.UID,
		Generation:  pg.Generation,
		MinMember:   int(pg.Spec.MinMember),
		Created:     pg.CreationTimestamp.Time,
		Labels:      pg.Labels,
		Annotations: pg.Annotations,
		Succeeded:   int(pg.Status.Succeeded),
		Running:     int(pg.Status.Running),
		Finished:    pg.Status.Phase == pgv1alpha1.PodGroupFinished,
	}
	if t := pg.Spec.ScheduleTimeoutSeconds; t != nil && *t > 0 {
		s.Timeout = time.Duration(*t) * time.Second
	}
	return s
}

// ReadConditions decodes status.conditions from a PodGroup's raw JSON: the
// scheduler-plugins Go type has no such field. It is the one decoder of
// PodGroup conditions (scheduler, controller, simulator and tests).
func ReadConditions(raw []byte) ([]metav1.Condition, error) {
	var obj struct {
		Status struct {
			Conditions []metav1.Condition `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	return obj.Status.Conditions, nil
}
