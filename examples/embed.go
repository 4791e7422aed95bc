// Package examples embeds the simulator's scenario files.
package examples

import _ "embed"

// Demo is examples/demo.yaml, the scenario `make demo` runs.
//
//go:embed demo.yaml
var Demo []byte
