package testcluster

import (
	"fmt"
	"os"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	pgclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	phalanxclientset "github.com/phalanx-sched/phalanx/pkg/generated/clientset/versioned"
)

// Connect returns a Cluster for an existing cluster (any kubeconfig, e.g.
// kind): the same clients and helpers as Start, nothing to tear down but the
// scratch directory. Stop removes it; for tests, tb.Cleanup does it too.
func Connect(tb TB, kubeconfig string) (*Cluster, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	dir, err := os.MkdirTemp("", "phalanx-cluster-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Kubeconfig: kubeconfig}
	c.onStop(func() { _ = os.RemoveAll(dir) })
	tb.Cleanup(c.Stop)
	if err := c.setClients(cfg); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// setClients builds every client of c from an admin config.
func (c *Cluster) setClients(cfg *rest.Config) error {
	var err error
	c.Config = rest.CopyConfig(cfg)
	c.Config.QPS, c.Config.Burst = 5000, 10000
	c.CRDConfig = rest.CopyConfig(c.Config)
	c.CRDConfig.ContentType = "application/json"
	c.CRDConfig.AcceptContentTypes = "application/json"
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		return err
	}
	if c.PodGroups, err = pgclientset.NewForConfig(c.CRDConfig); err != nil {
		return err
	}
	if c.Phalanx, err = phalanxclientset.NewForConfig(c.CRDConfig); err != nil {
		return err
	}
	c.Dynamic, err = dynamic.NewForConfig(c.CRDConfig)
	return err
}
