// Package workloads tests phalanx with the operators' own controllers and
// CRDs (JobSet, LeaderWorkerSet, KubeRay, training-operator, Kubeflow
// Trainer). It is a separate module so that the operators' dependencies do
// not move the main module's.
package workloads
