package testcluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/phalanx-sched/phalanx/internal/controller"
)

var setLoggerOnce sync.Once

// StartController runs phalanx-controller in-process (no metrics or health
// endpoints, no leader election) until Stop.
func (c *Cluster) StartController(options ...func(*controller.Options)) error {
	setLoggerOnce.Do(func() { ctrllog.SetLogger(klog.NewKlogr()) })
	opts := controller.Options{MetricsAddr: "0", HealthProbeAddr: "0", Repeatable: true}
	for _, o := range options {
		o(&opts)
	}
	mgr, err := controller.NewManager(c.Config, opts)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	c.onStop(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			klog.Background().Error(fmt.Errorf("timeout"), "phalanx-controller did not stop")
		}
	})
	return nil
}
