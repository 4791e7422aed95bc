package sim

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/phalanx-sched/phalanx/internal/sim/scenario"
)

func TestQuorumWatch(t *testing.T) {
	const s = time.Second
	type step struct {
		pod   string
		state string // pending, bound, succeeded, failed, deleting, gone
		at    time.Duration
	}
	tests := []struct {
		name                    string
		steps                   []step
		wantQuorum, wantRestart time.Duration
	}{
		{
			// What a sample every few seconds misses: both members run
			// and complete between two samples.
			name:       "short job seen whole",
			steps:      []step{{"g-0", "bound", 1 * s}, {"g-1", "bound", 2 * s}, {"g-0", "succeeded", 3 * s}, {"g-1", "succeeded", 3 * s}},
			wantQuorum: 2 * s,
		},
		{
			name:  "members that never ran together",
			steps: []step{{"g-0", "bound", 1 * s}, {"g-0", "succeeded", 2 * s}, {"g-1", "bound", 3 * s}, {"g-1", "succeeded", 4 * s}},
		},
		{
			name:  "a member being deleted is not live",
			steps: []step{{"g-0", "bound", 1 * s}, {"g-0", "deleting", 2 * s}, {"g-1", "bound", 3 * s}},
		},
		{
			name:  "pending members are not live",
			steps: []step{{"g-0", "pending", 1 * s}, {"g-1", "bound", 2 * s}},
		},
		{
			name: "evicted and restarted",
			steps: []step{{"g-0", "bound", 1 * s}, {"g-1", "bound", 2 * s}, {"g-1", "gone", 5 * s},
				{"g-1", "pending", 5 * s}, {"g-1", "bound", 9 * s}},
			wantQuorum: 2 * s, wantRestart: 9 * s,
		},
		{
			name: "a member completing is no eviction",
			steps: []step{{"g-0", "bound", 1 * s}, {"g-1", "bound", 2 * s}, {"g-1", "succeeded", 5 * s},
				{"g-2", "bound", 9 * s}},
			wantQuorum: 2 * s,
		},
		{
			name: "a member killed by its deadline breaks the gang",
			steps: []step{{"g-0", "bound", 1 * s}, {"g-1", "bound", 2 * s}, {"g-1", "failed", 5 * s},
				{"g-2", "bound", 7 * s}},
			wantQuorum: 2 * s, wantRestart: 7 * s,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := scenario.Job{Name: "g", MinMember: 2, Replicas: 3}
			w := newQuorumWatch([]scenario.Job{job, {Name: "plain", Replicas: 1}}, nil)
			for _, st := range tt.steps {
				p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: st.pod, Namespace: job.EffectiveNamespace(), Labels: map[string]string{jobLabel: "g"}}}
				gone := false
				switch st.state {
				case "bound":
					p.Spec.NodeName, p.Status.Phase = "n0", v1.PodRunning
				case "succeeded":
					p.Spec.NodeName, p.Status.Phase = "n0", v1.PodSucceeded
				case "failed":
					p.Spec.NodeName, p.Status.Phase = "n0", v1.PodFailed
				case "deleting":
					p.Spec.NodeName, p.DeletionTimestamp = "n0", &metav1.Time{}
				case "gone":
					p.Spec.NodeName, gone = "n0", true
				}
				w.observe(p, gone, st.at)
			}
			_, quorum, restart := w.times(job.Key())
			if quorum != tt.wantQuorum || restart != tt.wantRestart {
				t.Errorf("quorum %v, restart %v; want %v, %v", quorum, restart, tt.wantQuorum, tt.wantRestart)
			}
		})
	}
}
