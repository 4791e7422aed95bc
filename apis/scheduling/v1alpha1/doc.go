// +k8s:deepcopy-gen=package
// +groupName=scheduling.phalanx.dev

// Package v1alpha1 holds the phalanx scheduling API: Queue and NetworkTopology,
// both cluster-scoped, in group scheduling.phalanx.dev.
package v1alpha1
