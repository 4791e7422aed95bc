// Package version reports the phalanx version and the Kubernetes version the
// binary is built on.
package version

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// Version is set at build time with -ldflags "-X .../internal/version.Version=...".
var Version = "v0.0.0-dev"

// Kubernetes returns the k8s.io/kubernetes module version compiled in.
func Kubernetes() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, dep := range info.Deps {
		if dep.Path == "k8s.io/kubernetes" {
			return dep.Version
		}
	}
	return "unknown"
}

// String is the one-line version banner of a phalanx binary.
func String(binary string) string {
	return fmt.Sprintf("%s %s (Kubernetes %s)", binary, Version, Kubernetes())
}

// Requested reports whether args ask for the version (--version, --version=true
// or --version=raw), which phalanx answers before kube-scheduler's own flag.
func Requested(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--version" || a == "-version" {
			return true
		}
		if v, ok := strings.CutPrefix(a, "--version="); ok && v != "false" {
			return true
		}
	}
	return false
}
