package testcluster

import "github.com/phalanx-sched/phalanx/internal/testcluster/kwok"

// RunForAnnotation makes a pod under kwok complete (phase Succeeded) this long
// after it started, e.g. "30s". Pods without it run until they are deleted.
const RunForAnnotation = kwok.RunForAnnotation

// StartKwok runs a kwok controller in-process as the kubelet of every node:
// bound pods become Running, pods with RunForAnnotation complete after their
// run time, and deleted pods go away at once (there is nothing to stop).
// It stops with the cluster.
func (c *Cluster) StartKwok() error {
	return c.startKwok("")
}

// StartKwokFor is StartKwok for the nodes whose annotations match selector
// (e.g. "kwok.x-k8s.io/node=fake") only, so that it can share a real cluster
// with real kubelets.
func (c *Cluster) StartKwokFor(nodeAnnotationSelector string) error {
	return c.startKwok(nodeAnnotationSelector)
}

func (c *Cluster) startKwok(nodeAnnotationSelector string) error {
	stop, err := kwok.Start(c.Kubeconfig, nodeAnnotationSelector)
	if err != nil {
		return err
	}
	c.onStop(stop)
	return nil
}
