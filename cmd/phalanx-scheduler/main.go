// Command phalanx-scheduler is kube-scheduler with the phalanx plugins compiled
// in. It accepts every kube-scheduler flag.
package main

import (
	"context"
	"fmt"
	"os"

	"k8s.io/component-base/cli"
	// client-go's request and rate-limiter metrics and the version metric,
	// registered as kube-scheduler registers them.
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

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
	cmd := app.NewSchedulerCommand(plugins.Options(context.Background())...)
	cmd.SetArgs(args)
	cmd.Use = "phalanx-scheduler"
	cmd.Short = "phalanx: kube-scheduler with gang, queue, network-topology and NUMA plugins"
	os.Exit(cli.Run(cmd))
}
