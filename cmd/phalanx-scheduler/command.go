package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apiserver/pkg/server"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/cli/globalflag"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/term"
	"k8s.io/component-base/version/verflag"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"

	"github.com/phalanx-sched/phalanx/internal/estimator"
	"github.com/phalanx-sched/phalanx/internal/workload/apifollow"
	"github.com/phalanx-sched/phalanx/plugins"
	"github.com/phalanx-sched/phalanx/plugins/dryrun"
	"github.com/phalanx-sched/phalanx/plugins/runtime"
)

// newCommand is kube-scheduler's command (app.NewSchedulerCommand: the same
// flags, help and start-up) with the phalanx plugins registered and the
// --karmada-estimator-* flags, which need the scheduler plugins.Setup builds:
// upstream's command runs Setup and Run back to back with no hook between.
func newCommand() *cobra.Command {
	opts := options.NewOptions()
	est := &dryrun.EstimatorConfig{Fields: estimatorFields}
	cmd := &cobra.Command{
		Use:   "phalanx-scheduler",
		Short: "phalanx: kube-scheduler with gang, queue, network-topology and NUMA plugins",
		PersistentPreRunE: func(*cobra.Command, []string) error {
			return opts.ComponentGlobalsRegistry.Set()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validateEstimator(est); err != nil {
				return err
			}
			if apifollow.Recheck < time.Second {
				return fmt.Errorf("--api-discovery-interval: %v is shorter than 1s", apifollow.Recheck)
			}
			return run(cmd, opts, est)
		},
		Args: func(cmd *cobra.Command, args []string) error {
			for _, arg := range args {
				if len(arg) > 0 {
					return fmt.Errorf("%q does not take any arguments, got %q", cmd.CommandPath(), args)
				}
			}
			return nil
		},
	}
	nfs := opts.Flags
	verflag.AddFlags(nfs.FlagSet("global"))
	globalflag.AddGlobalFlags(nfs.FlagSet("global"), cmd.Name(), logs.SkipLoggingConfigurationFlags())
	addEstimatorFlags(nfs.FlagSet("karmada estimator"), est)
	nfs.FlagSet("phalanx").DurationVar(&apifollow.Recheck, "api-discovery-interval", apifollow.Recheck,
		"How often to ask the API server whether it serves the Workload API (scheduling.k8s.io/v1beta1), which may be turned on or off while phalanx runs; at least 1s.")
	fs := cmd.Flags()
	for _, f := range nfs.FlagSets {
		fs.AddFlagSet(f)
	}
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(cmd, *nfs, cols)
	_ = cmd.MarkFlagFilename("config", "yaml", "yml", "json")
	return cmd
}

// run is upstream's runCommand with the estimator started between Setup
// and Run.
func run(cmd *cobra.Command, opts *options.Options, est *dryrun.EstimatorConfig) error {
	verflag.PrintAndExitIfRequested()
	fg := opts.ComponentGlobalsRegistry.FeatureGateFor(basecompatibility.DefaultKubeComponent)
	if err := logsapi.ValidateAndApply(opts.Logs, fg); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1)
	}
	cliflag.PrintFlags(cmd.Flags())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-server.SetupSignalHandler()
		cancel()
	}()
	rt := runtime.New(ctx, nil)
	// The plugins' informers list together while every profile is built;
	// they must have synced before Run starts the scheduler's.
	rt.DeferSyncs()
	pluginOpts := plugins.OptionsWith(rt)
	cc, sched, err := plugins.Setup(ctx, opts, pluginOpts...)
	if err != nil {
		return err
	}
	if err := rt.AwaitSyncs(ctx); err != nil {
		return err
	}
	// What only scheduling cycles read lists beside the scheduler's own
	// informers; its readers wait for it. It must still sync, or stop us.
	go func() {
		if err := rt.AwaitCycleSyncs(ctx); err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "Stopping: a part of the scheduler did not sync")
			klog.FlushAndExit(klog.ExitFlushTimeout, 1)
		}
	}()
	fg.(featuregate.MutableFeatureGate).AddMetrics()
	opts.ComponentGlobalsRegistry.AddMetrics()
	if est.Address != "" {
		addr, err := dryrun.StartEstimator(ctx, *est, cc, sched, rt, pluginOpts)
		if err != nil {
			return err
		}
		klog.FromContext(ctx).Info("Karmada estimator listening", "address", addr.String())
	}
	return app.Run(ctx, cc, sched)
}

var estimatorFields = dryrun.EstimatorFields{
	Address:           "--karmada-estimator-address",
	Profile:           "--karmada-estimator-profile",
	KarmadaKubeconfig: "--karmada-kubeconfig",
	TLS: estimator.Field{
		Cert:     "--karmada-estimator-cert-file",
		Key:      "--karmada-estimator-key-file",
		ClientCA: "--karmada-estimator-client-ca-file",
	},
}

func addEstimatorFlags(fs *pflag.FlagSet, est *dryrun.EstimatorConfig) {
	fs.StringVar(&est.Address, "karmada-estimator-address", "",
		fmt.Sprintf("Serve Karmada's scheduler-estimator gRPC service on this address (e.g. :%d); empty: off. Answers are dry runs of this scheduler's planner.", estimator.DefaultPort))
	fs.StringVar(&est.Profile, "karmada-estimator-profile", "phalanx-scheduler", "The profile whose plugins answer the estimator.")
	fs.StringVar(&est.Cluster, "karmada-cluster-name", "", "This member cluster's name in Karmada; calls naming another cluster are refused. Empty: not checked.")
	fs.StringVar(&est.KarmadaKubeconfig, "karmada-kubeconfig", "", "Kubeconfig of the Karmada API server, to read a workload's template (queue label, topology annotations). Empty: not read.")
	fs.StringVar(&est.TLS.CertFile, "karmada-estimator-cert-file", "", "Serving certificate (PEM). With the key, the estimator serves TLS.")
	fs.StringVar(&est.TLS.KeyFile, "karmada-estimator-key-file", "", "Serving key (PEM).")
	fs.StringVar(&est.TLS.ClientCAFile, "karmada-estimator-client-ca-file", "", "CA of the client certificates to require (karmada-scheduler's --scheduler-estimator-cert-file).")
}

// validateEstimator checks the flags before anything starts; errors name
// the flag.
func validateEstimator(est *dryrun.EstimatorConfig) error {
	if est.Address == "" {
		for _, f := range []struct{ flag, v string }{
			{"--karmada-estimator-cert-file", est.TLS.CertFile}, {"--karmada-estimator-key-file", est.TLS.KeyFile},
			{"--karmada-estimator-client-ca-file", est.TLS.ClientCAFile}, {"--karmada-kubeconfig", est.KarmadaKubeconfig},
		} {
			if f.v != "" {
				return fmt.Errorf("%s is set but --karmada-estimator-address is empty (the estimator is off)", f.flag)
			}
		}
		return nil
	}
	_, port, err := net.SplitHostPort(est.Address)
	if err != nil {
		return fmt.Errorf("--karmada-estimator-address: %q: %w", est.Address, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("--karmada-estimator-address: port %q of %q is not a number in 0-65535", port, est.Address)
	}
	if est.Profile == "" {
		return fmt.Errorf("--karmada-estimator-profile: required with --karmada-estimator-address")
	}
	if _, err := est.TLS.Credentials(estimatorFields.TLS); err != nil {
		return err
	}
	if est.KarmadaKubeconfig != "" {
		if _, err := os.Stat(est.KarmadaKubeconfig); err != nil {
			return fmt.Errorf("--karmada-kubeconfig: %w", err)
		}
	}
	return nil
}
