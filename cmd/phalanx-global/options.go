package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/phalanx-sched/phalanx/internal/global"
	"github.com/phalanx-sched/phalanx/internal/global/estimators"
	"github.com/phalanx-sched/phalanx/internal/global/plane"
)

// options are phalanx-global's flags.
type options struct {
	kubeconfig  string
	qps         float32
	burst       int
	plane       plane.Options
	estimators  estimators.Config
	leaderElect bool
	leaseNS     string
	leaseName   string
	metricsAddr string
	healthAddr  string
}

func defaultOptions() *options {
	return &options{
		qps: 50, burst: 100,
		plane: plane.Options{SchedulerName: "phalanx-global", DefaultQueue: "default", Interval: 5 * time.Second,
			Tier: global.Config{StarvedAfter: 10 * time.Minute, MovesPerHour: 6}},
		estimators:  estimators.DefaultConfig(),
		leaderElect: true, leaseNS: "karmada-system", leaseName: "phalanx-global",
		metricsAddr: ":10362", healthAddr: ":10363",
	}
}

func (o *options) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", o.kubeconfig, "Kubeconfig of the Karmada control plane (karmada-apiserver); empty: in-cluster.")
	fs.Float32Var(&o.qps, "kube-api-qps", o.qps, "QPS to the Karmada API server.")
	fs.IntVar(&o.burst, "kube-api-burst", o.burst, "Burst to the Karmada API server.")
	fs.StringVar(&o.plane.SchedulerName, "scheduler-name", o.plane.SchedulerName, "The schedulerName of the ResourceBindings this tier decides (PropagationPolicy spec.schedulerName).")
	fs.StringVar(&o.plane.DefaultQueue, "default-queue", o.plane.DefaultQueue, "Queue of jobs whose template and namespace name none.")
	fs.DurationVar(&o.plane.Interval, "interval", o.plane.Interval, "Longest time between passes; changes on the plane trigger them sooner.")
	fs.DurationVar(&o.plane.Tier.StarvedAfter, "starved-after", o.plane.Tier.StarvedAfter,
		"Bounded wait: a job at the head of its queue that fits no member now keeps one member from later jobs after this long; 0 never.")
	fs.DurationVar(&o.plane.Tier.MoveAfter, "move-after", o.plane.Tier.MoveAfter,
		"Move a job that has not started in its member after this long to a member where it starts now; 0 (default) is off.")
	fs.IntVar(&o.plane.Tier.MovesPerHour, "moves-per-hour", o.plane.Tier.MovesPerHour, "At most this many moves over any hour.")
	fs.BoolVar(&o.leaderElect, "leader-elect", o.leaderElect, "Elect a leader so that one replica decides.")
	fs.StringVar(&o.leaseNS, "leader-elect-resource-namespace", o.leaseNS, "Namespace of the leader Lease on the Karmada plane.")
	fs.StringVar(&o.leaseName, "leader-elect-resource-name", o.leaseName, "Name of the leader Lease.")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", o.metricsAddr, "Address of /metrics; 0 disables it.")
	fs.StringVar(&o.healthAddr, "health-probe-bind-address", o.healthAddr, "Address of /healthz; 0 disables it.")
	o.estimators.AddFlags(fs)
}

// validate names the flag of the first problem of each kind.
func (o *options) validate() error {
	var errs []error
	if o.plane.SchedulerName == "" {
		errs = append(errs, errors.New("--scheduler-name: must not be empty"))
	} else if o.plane.SchedulerName == "default-scheduler" {
		errs = append(errs, errors.New("--scheduler-name: default-scheduler is karmada-scheduler's; choose another name (phalanx-global)"))
	}
	if o.plane.DefaultQueue == "" {
		errs = append(errs, errors.New("--default-queue: must not be empty"))
	}
	if o.plane.Interval < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("--interval: %v is shorter than 100ms", o.plane.Interval))
	}
	if o.plane.Tier.StarvedAfter < 0 {
		errs = append(errs, fmt.Errorf("--starved-after: %v is negative", o.plane.Tier.StarvedAfter))
	}
	if o.plane.Tier.MoveAfter < 0 {
		errs = append(errs, fmt.Errorf("--move-after: %v is negative", o.plane.Tier.MoveAfter))
	}
	if o.plane.Tier.MovesPerHour < 0 {
		errs = append(errs, fmt.Errorf("--moves-per-hour: %d is negative", o.plane.Tier.MovesPerHour))
	}
	if o.qps <= 0 || o.burst <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps, --kube-api-burst: %v and %d must be positive", o.qps, o.burst))
	}
	if o.leaderElect && (o.leaseNS == "" || o.leaseName == "") {
		errs = append(errs, errors.New("--leader-elect-resource-namespace, --leader-elect-resource-name: must not be empty with --leader-elect"))
	}
	if err := o.estimators.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
