//go:build tools

// The operators whose CRDs validate examples/workloads: requiring them here
// pins their versions and checksums (go.sum). Only their files are used;
// this file is never built.
package workloads

import (
	_ "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	_ "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	_ "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	_ "sigs.k8s.io/lws/api/leaderworkerset/v1"
)
