//go:build tools

// Package upstream only pins the Karmada components the test runs as
// processes: karmada-aggregated-apiserver, karmada-controller-manager,
// karmada-scheduler and karmada-scheduler-estimator, built here at Karmada's own dependency
// versions (k8s.io/* v0.35.x for v1.18.2). The parent module cannot build
// them: it links phalanx's test harness, which needs k8s.io/* v0.36, and
// Karmada v1.18.2's generated OpenAPI (used by the aggregated apiserver)
// does not compile against k8s.io/api v0.36. This file is never built;
// TestMain runs `go build` of the four commands in this module.
package upstream

import (
	_ "github.com/karmada-io/karmada/cmd/aggregated-apiserver"
	_ "github.com/karmada-io/karmada/cmd/controller-manager"
	_ "github.com/karmada-io/karmada/cmd/scheduler"
	_ "github.com/karmada-io/karmada/cmd/scheduler-estimator"
)
