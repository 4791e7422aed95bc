package workload

import (
	v1 "k8s.io/api/core/v1"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// Source is where a pod's gang is declared.
type Source int

const (
	// SourceNone: the pod is in no gang.
	SourceNone Source = iota
	// SourcePodGroupLabel: label scheduling.x-k8s.io/pod-group names a
	// scheduler-plugins PodGroup (hand-written or made by an operator).
	SourcePodGroupLabel
	// SourceWorkloadAPI: spec.schedulingGroup.podGroupName names an upstream
	// scheduling.k8s.io PodGroup.
	SourceWorkloadAPI
	// SourceImplicit: annotation scheduling.phalanx.dev/gang-size; phalanx
	// makes the scheduler-plugins PodGroup (see ImplicitGang).
	SourceImplicit
)

func (s Source) String() string {
	switch s {
	case SourcePodGroupLabel:
		return "PodGroupLabel"
	case SourceWorkloadAPI:
		return "WorkloadAPI"
	case SourceImplicit:
		return "Implicit"
	default:
		return "None"
	}
}

// Ref is a pod's gang: its source and the name of its PodGroup in the pod's
// namespace (a scheduler-plugins PodGroup for the label and implicit sources,
// a scheduling.k8s.io PodGroup for the Workload API).
type Ref struct {
	Source    Source
	Namespace string
	Name      string
	// Implicit is set for SourceImplicit.
	Implicit *Implicit
}

// GangOf finds a pod's gang. Declared objects come before the annotation:
// the pod-group label (an operator such as training-operator or Trainer made
// the PodGroup), then spec.schedulingGroup (which the API server keeps only
// where it serves the Workload API), then the gang-size annotation. An
// invalid annotation is an error; the pod is then in no gang.
func GangOf(pod *v1.Pod) (Ref, error) {
	if name := pod.Labels[pgv1alpha1.PodGroupLabel]; name != "" {
		return Ref{Source: SourcePodGroupLabel, Namespace: pod.Namespace, Name: name}, nil
	}
	if sg := pod.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil && *sg.PodGroupName != "" {
		return Ref{Source: SourceWorkloadAPI, Namespace: pod.Namespace, Name: *sg.PodGroupName}, nil
	}
	g, ok, err := ImplicitGang(pod)
	if err != nil || !ok {
		return Ref{}, err
	}
	return Ref{Source: SourceImplicit, Namespace: pod.Namespace, Name: g.Name, Implicit: &g}, nil
}
