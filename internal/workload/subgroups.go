package workload

import (
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
)

// Index labels operators put on the pods they create, read for a member's
// rank (their contract: batch/v1 Indexed Jobs, JobSet, training-operator,
// StatefulSets, LeaderWorkerSet).
const (
	JobCompletionIndexLabel = "batch.kubernetes.io/job-completion-index"
	JobSetJobGlobalIndexKey = "jobset.sigs.k8s.io/job-global-index"
	ReplicaIndexLabel       = "training.kubeflow.org/replica-index"
	ReplicaTypeLabel        = "training.kubeflow.org/replica-type"
	StatefulSetPodIndex     = "apps.kubernetes.io/pod-index"
)

// Rank is a member's place in its workload: ranks i … i+size−1 share a
// sub-group. Scope separates independent rank spaces (a JobSet's child
// Jobs, each with its own completion indexes).
type Rank struct {
	Scope string
	Index int
}

// RankOf reads a member's rank: the label scheduling.phalanx.dev/rank, else
// what its operator sets: a JobSet pod's completion index within its child
// Job (scope: the Job's global index), an Indexed Job's completion index, a
// training-operator replica's index (a worker after the master: index + 1),
// a StatefulSet pod's ordinal, a LeaderWorkerSet worker's index.
func RankOf(pod *v1.Pod) (Rank, bool) {
	if i, ok := intLabel(pod, phalanxv1alpha1.RankLabel); ok {
		return Rank{Index: i}, true
	}
	if i, ok := intLabel(pod, JobCompletionIndexLabel); ok {
		return Rank{Scope: pod.Labels[JobSetJobGlobalIndexKey], Index: i}, true
	}
	if i, ok := intLabel(pod, ReplicaIndexLabel); ok {
		if t := pod.Labels[ReplicaTypeLabel]; t == "worker" || t == "Worker" {
			i++
		}
		return Rank{Index: i}, true
	}
	for _, key := range []string{StatefulSetPodIndex, LWSWorkerIndexLabel} {
		if i, ok := intLabel(pod, key); ok {
			return Rank{Index: i}, true
		}
	}
	return Rank{}, false
}

// intLabel reads a non-negative integer from a label, else an annotation of
// the same key (Indexed Jobs set both).
func intLabel(pod *v1.Pod, key string) (int, bool) {
	v, ok := pod.Labels[key]
	if !ok {
		v, ok = pod.Annotations[key]
	}
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(v)
	return i, err == nil && i >= 0
}

// SubGroupsByRank is the sub-group model of the sub-group annotations, on
// the group object or else on the members' pod template (pod): nil without
// subgroup-size. Members map to sub-groups by rank: "<scope>/<rank/size>"
// (just "<rank/size>" without a scope); a member without a rank has none
// yet. An invalid value, or a size that does not divide minMember, is an
// error naming the annotation.
func SubGroupsByRank(group, pod map[string]string, minMember int) (*gangspec.SubGroups, error) {
	ann := group
	if ann[phalanxv1alpha1.SubGroupSizeAnnotation] == "" {
		ann = pod
	}
	raw := ann[phalanxv1alpha1.SubGroupSizeAnnotation]
	if raw == "" {
		return nil, nil
	}
	size, err := strconv.Atoi(raw)
	if err != nil || size < 1 {
		return nil, fmt.Errorf("annotation %s: %q is not a positive integer", phalanxv1alpha1.SubGroupSizeAnnotation, raw)
	}
	if minMember%size != 0 {
		return nil, fmt.Errorf("annotation %s: %d does not divide the gang's minMember %d into whole sub-groups", phalanxv1alpha1.SubGroupSizeAnnotation, size, minMember)
	}
	sg := &gangspec.SubGroups{Size: size, Source: "by rank",
		Required:  ann[phalanxv1alpha1.SubGroupTopologyRequiredAnnotation],
		Preferred: ann[phalanxv1alpha1.SubGroupTopologyPreferredAnnotation]}
	if raw := ann[phalanxv1alpha1.SubGroupMinAnnotation]; raw != "" {
		sg.Min, err = strconv.Atoi(raw)
		if err != nil || sg.Min < 1 || sg.Min*size > minMember {
			return nil, fmt.Errorf("annotation %s: %q is not a number of sub-groups from 1 to %d (minMember %d / subgroup-size %d)",
				phalanxv1alpha1.SubGroupMinAnnotation, raw, minMember/size, minMember, size)
		}
	}
	if sg.Required != "" && sg.Preferred != "" {
		return nil, fmt.Errorf("annotations %s and %s: name one level, required or preferred",
			phalanxv1alpha1.SubGroupTopologyRequiredAnnotation, phalanxv1alpha1.SubGroupTopologyPreferredAnnotation)
	}
	if sg.Required == "" && sg.Preferred == "" {
		return nil, fmt.Errorf("annotation %s needs %s (or %s): the level each sub-group fits inside",
			phalanxv1alpha1.SubGroupSizeAnnotation, phalanxv1alpha1.SubGroupTopologyRequiredAnnotation, phalanxv1alpha1.SubGroupTopologyPreferredAnnotation)
	}
	sg.Of = func(p *v1.Pod) string {
		r, ok := RankOf(p)
		if !ok {
			return ""
		}
		idx := strconv.Itoa(r.Index / size)
		if r.Scope != "" {
			return r.Scope + "/" + idx
		}
		return idx
	}
	return sg, nil
}
