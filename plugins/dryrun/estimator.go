package dryrun

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	schedulerserverconfig "k8s.io/kubernetes/cmd/kube-scheduler/app/config"
	"k8s.io/kubernetes/pkg/scheduler"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/phalanx-sched/phalanx/internal/estimator"
	"github.com/phalanx-sched/phalanx/plugins/runtime"
)

// EstimatorConfig is the Karmada estimator of a phalanx-scheduler; flags
// --karmada-estimator-* of cmd/phalanx-scheduler.
type EstimatorConfig struct {
	// Address to listen on (host:port); empty: no estimator.
	Address string
	TLS     estimator.TLSFiles
	// Profile whose plugins answer (default phalanx-scheduler).
	Profile string
	// Cluster is this member's name in Karmada.
	Cluster string
	// KarmadaKubeconfig reaches the Karmada API server, to read workload
	// templates; empty: answers apply no template labels or annotations.
	KarmadaKubeconfig string
	// Fields name the flags in errors.
	Fields EstimatorFields
}

// EstimatorFields name the settings in errors (flags for the binary).
type EstimatorFields struct {
	Address, Profile, KarmadaKubeconfig string
	TLS                                 estimator.Field
}

// StartEstimator listens and serves the estimator over the scheduler that
// app.Setup built, until ctx ends. Bad settings fail here, naming the field.
func StartEstimator(ctx context.Context, cfg EstimatorConfig, cc *schedulerserverconfig.CompletedConfig, sched *scheduler.Scheduler, rt *runtime.Runtime, outOfTree []app.Option) (net.Addr, error) {
	creds, err := cfg.TLS.Credentials(cfg.Fields.TLS)
	if err != nil {
		return nil, err
	}
	srv := &estimator.Server{Cluster: cfg.Cluster}
	if cfg.KarmadaKubeconfig != "" {
		rc, err := clientcmd.BuildConfigFromFlags("", cfg.KarmadaKubeconfig)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.Fields.KarmadaKubeconfig, err)
		}
		if srv.Templates, err = estimator.NewKarmadaTemplates(rc); err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.Fields.KarmadaKubeconfig, err)
		}
	}
	registry := frameworkruntime.Registry{}
	for _, o := range outOfTree {
		if err := o(registry); err != nil {
			return nil, err
		}
	}
	planner, err := New(ctx, cc, sched, rt, cfg.Profile, registry)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Fields.Profile, err)
	}
	srv.Planner = planner
	srv.Unschedulable = &Unschedulable{
		Pods:        cc.InformerFactory.Core().V1().Pods().Lister(),
		ReplicaSets: cc.InformerFactory.Apps().V1().ReplicaSets().Lister(),
		Now:         time.Now,
	}
	cc.InformerFactory.Start(ctx.Done())
	lis, err := net.Listen("tcp", cfg.Address)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Fields.Address, err)
	}
	var opts []grpc.ServerOption
	if creds != nil {
		opts = append(opts, creds)
	}
	go func() {
		// Answers need the informers' first lists (pods, nodes, priority
		// classes); until then connections wait in the listen backlog.
		cc.InformerFactory.WaitForCacheSync(ctx.Done())
		if err := srv.Serve(ctx, lis, opts...); err != nil {
			klog.FromContext(ctx).Error(err, "Karmada estimator stopped")
		}
	}()
	return lis.Addr(), nil
}
