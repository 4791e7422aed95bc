// Command phalanx-scheduler is kube-scheduler with the phalanx plugins compiled
// in. It accepts every kube-scheduler flag, and serves Karmada's
// scheduler-estimator with --karmada-estimator-address (docs/multicluster.md).
package main

import (
	"fmt"
	"os"

	"k8s.io/component-base/cli"
	// client-go's request and rate-limiter metrics and the version metric,
	// registered as kube-scheduler registers them.
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"

	"github.com/phalanx-sched/phalanx/internal/version"
	"github.com/phalanx-sched/phalanx/plugins"
)

func main() {
	if version.Requested(os.Args[1:]) {
		fmt.Println(version.String("phalanx-scheduler"))
		return
	}
	args, err := honourKubeconfig(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := plugins.SetFeatureDefaults(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cmd := newCommand()
	cmd.SetArgs(args)
	os.Exit(cli.Run(cmd))
}
