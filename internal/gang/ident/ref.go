// Package ident names gangs — the kind, namespace and name of the object
// that groups them — and orders them: the one order of pending gangs, and of
// a gang's members.
package ident

import (
	"cmp"
	"slices"
)

// Ref names a gang: the kind, namespace and name of the object that groups it.
type Ref struct {
	// Source is the kind of group object; the zero value is a
	// scheduler-plugins PodGroup.
	Source          Source
	Namespace, Name string
}

// String is "namespace/name" for a PodGroup and "namespace/workload:name" for
// an upstream PodGroup: the key used in logs, metrics and messages.
func (r Ref) String() string {
	switch r.Source {
	case SourceWorkload:
		return r.Namespace + "/workload:" + r.Name
	case SourceComposite:
		return r.Namespace + "/composite:" + r.Name
	}
	return r.Namespace + "/" + r.Name
}

// SortRefs puts refs in a fixed order (namespace, name, kind), so that what is
// done to several gangs in turn (wakes, messages) never follows a map's order.
func SortRefs(refs []Ref) {
	slices.SortFunc(refs, func(a, b Ref) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Source, b.Source))
	})
}

// IsZero reports whether r names no gang.
func (r Ref) IsZero() bool { return r.Name == "" }

// Source says where a gang's definition comes from.
type Source string

const (
	// SourcePodGroup is a scheduler-plugins PodGroup, named by the pods'
	// scheduling.x-k8s.io/pod-group label or created for an implicit gang.
	SourcePodGroup Source = ""
	// SourceWorkload is an upstream scheduling.k8s.io PodGroup, named by the
	// pods' spec.schedulingGroup.
	SourceWorkload Source = "Workload"
	// SourceComposite is an upstream CompositePodGroup
	// (scheduling.k8s.io/v1alpha3) with a gang policy: the parent of the
	// PodGroups the pods name, each of which is one of its sub-groups.
	SourceComposite Source = "Composite"
)
