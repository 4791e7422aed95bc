// Package examples embeds the simulator's scenario files.
package examples

import _ "embed"

// Demo is examples/demo.yaml, the scenario `make demo` runs.
//
//go:embed demo.yaml
var Demo []byte

// OpenbNodeShapes, OpenbPodShapes and OpenbDurations are the tables
// hack/openb-shapes.sh derives from Alibaba's cluster-trace-gpu-v2023
// (examples/trace/README.md): the trace generator's distributions.
//
//go:embed trace/openb-node-shapes.csv
var OpenbNodeShapes []byte

//go:embed trace/openb-pod-shapes.csv
var OpenbPodShapes []byte

//go:embed trace/openb-durations.csv
var OpenbDurations []byte
