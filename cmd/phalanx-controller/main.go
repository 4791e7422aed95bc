// Command phalanx-controller keeps the status of PodGroups and Queues.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/phalanx-sched/phalanx/internal/controller"
	"github.com/phalanx-sched/phalanx/internal/version"
)

func main() {
	if version.Requested(os.Args[1:]) {
		fmt.Println(version.String("phalanx-controller"))
		return
	}
	var o controller.Options
	flag.BoolVar(&o.LeaderElect, "leader-elect", false, "Elect a leader so that only one replica writes status.")
	flag.StringVar(&o.LeaderElectionNS, "leader-election-namespace", "", "Namespace of the leader lease (default: the pod's namespace).")
	flag.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8080", "Address of the metrics endpoint; 0 disables it.")
	flag.StringVar(&o.HealthProbeAddr, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz; 0 disables them.")
	flag.StringVar(&o.DefaultQueue, "default-queue", "default", "Queue of pods that name none (keep equal to CapacityQueueArgs.defaultQueue).")
	flag.DurationVar(&o.UsageHalfLife, "usage-half-life", 0,
		"Decayed fair share: the half-life of queues' recent usage (keep equal to CapacityQueueArgs.usageHalfLifeSeconds); 0 is off, at most 720h.")
	flag.DurationVar(&o.WorkloadAPIRecheck, "api-discovery-interval", 30*time.Second,
		"How often to ask the API server whether it serves the Workload API (scheduling.k8s.io/v1beta1), which may be turned on or off while phalanx runs; at least 1s.")
	klog.InitFlags(nil)
	flag.Parse()
	ctrl.SetLogger(klog.NewKlogr())
	if o.UsageHalfLife < 0 || o.UsageHalfLife > 720*time.Hour {
		fmt.Fprintf(os.Stderr, "--usage-half-life: %v is outside 0 (off) to 720h\n", o.UsageHalfLife)
		os.Exit(1)
	}
	if o.WorkloadAPIRecheck < time.Second {
		fmt.Fprintf(os.Stderr, "--api-discovery-interval: %v is shorter than 1s\n", o.WorkloadAPIRecheck)
		os.Exit(1)
	}

	ctx := ctrl.SetupSignalHandler()
	if err := controller.Run(ctx, ctrl.GetConfigOrDie(), o); err != nil {
		klog.ErrorS(err, "phalanx-controller failed")
		os.Exit(1)
	}
}
