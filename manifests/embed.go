// Package manifests embeds the CRDs and the canonical scheduler configuration,
// so the test harness and the simulator use exactly the files users apply.
package manifests

import "embed"

// CRDs holds manifests/crds/*.yaml.
//
//go:embed crds/*.yaml
var CRDs embed.FS

// SchedulerConfig is manifests/scheduler-config.yaml, the canonical profile.
//
//go:embed scheduler-config.yaml
var SchedulerConfig []byte
