// Command phalanx-global is phalanx's global tier on a Karmada control
// plane: a second Karmada scheduler that dispatches each ResourceBinding
// naming its schedulerName whole to one member cluster, in the order of
// phalanx's Queues with shares over the sum of the members
// (docs/multicluster.md).
package main

import (
	"context"
	"errors"
	goflag "flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/phalanx-sched/phalanx/internal/estimator"
	"github.com/phalanx-sched/phalanx/internal/global/estimators"
	"github.com/phalanx-sched/phalanx/internal/global/plane"
	"github.com/phalanx-sched/phalanx/internal/version"
)

func main() {
	if version.Requested(os.Args[1:]) {
		fmt.Println(version.String("phalanx-global"))
		return
	}
	o := defaultOptions()
	fs := pflag.NewFlagSet("phalanx-global", pflag.ContinueOnError)
	o.addFlags(fs)
	klogFlags := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	if err := fs.Parse(os.Args[1:]); err != nil {
		// ContinueOnError: pflag prints the usage for --help, nothing for
		// an error.
		if errors.Is(err, pflag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := o.validate(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background())
	if err := run(ctx, o); err != nil {
		klog.ErrorS(err, "phalanx-global failed")
		os.Exit(1)
	}
}

func run(ctx context.Context, o *options) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = o.qps, o.burst
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	templates, err := estimator.NewKarmadaTemplates(cfg)
	if err != nil {
		return err
	}
	services := informers.NewSharedInformerFactoryWithOptions(kube, 10*time.Minute, informers.WithNamespace(o.estimators.Namespace))
	pool, err := estimators.New(o.estimators, estimators.FromLister(services.Core().V1().Services().Lister()))
	if err != nil {
		return err
	}
	defer pool.Close()
	services.Start(ctx.Done())
	services.WaitForCacheSync(ctx.Done())

	plane.RegisterMetrics()
	serve(ctx, o.metricsAddr, "/metrics", legacyregistry.Handler())
	serve(ctx, o.healthAddr, "/healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))

	p := plane.New(o.plane, dyn, kube, templates, plane.Estimator(pool), clock.RealClock{})
	if !o.leaderElect {
		return p.Run(ctx)
	}
	return lead(ctx, o, kube, p.Run)
}

// lead runs fn while this replica holds the Lease; losing it ends the
// process (a restart reads every decision back from the bindings).
func lead(ctx context.Context, o *options, kube kubernetes.Interface, fn func(context.Context) error) error {
	id, err := os.Hostname()
	if err != nil {
		return err
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, o.leaseNS, o.leaseName, kube.CoreV1(), kube.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: fmt.Sprintf("%s_%d", id, os.Getpid())})
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) { errc <- fn(ctx) },
			OnStoppedLeading: func() {
				select {
				case errc <- nil:
				default:
				}
			},
		},
	})
	select {
	case err := <-errc:
		if ctx.Err() == nil && err == nil {
			return fmt.Errorf("lost the leader Lease %s/%s", o.leaseNS, o.leaseName)
		}
		return err
	default:
		return ctx.Err()
	}
}

func serve(ctx context.Context, addr, path string, h http.Handler) {
	if addr == "" || addr == "0" {
		return
	}
	mux := http.NewServeMux()
	mux.Handle(path, h)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
			klog.FromContext(ctx).Error(err, "Serving", "address", addr, "path", path)
		}
	}()
}
