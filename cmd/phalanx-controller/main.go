// Command phalanx-controller keeps the status of PodGroups and Queues.
package main

import (
	"flag"
	"fmt"
	"os"

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
	klog.InitFlags(nil)
	flag.Parse()
	ctrl.SetLogger(klog.NewKlogr())

	ctx := ctrl.SetupSignalHandler()
	if err := controller.Run(ctx, ctrl.GetConfigOrDie(), o); err != nil {
		klog.ErrorS(err, "phalanx-controller failed")
		os.Exit(1)
	}
}
