package testcluster

import "github.com/phalanx-sched/phalanx/internal/testcluster/kcm"

// controllerManager returns the cluster's kube-controller-manager, created
// at first use and stopped with the cluster.
func (c *Cluster) controllerManager() *kcm.Manager {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kcm == nil {
		c.kcm = kcm.New(c.Config)
		c.stops = append(c.stops, c.kcm.Stop)
	}
	return c.kcm
}

// StartJobController runs kube-controller-manager's Job controller
// in-process until Stop; idempotent. With the WorkloadWithJob feature gate
// on, the API server must serve scheduling.k8s.io/v1beta1 (see
// kcm.Manager.StartJobController).
func (c *Cluster) StartJobController() error {
	return c.controllerManager().StartJobController()
}

// StartResourceClaimController runs kube-controller-manager's resourceclaim
// controller in-process until Stop; idempotent.
func (c *Cluster) StartResourceClaimController() error {
	return c.controllerManager().StartResourceClaimController()
}

// StartStatefulSetController runs kube-controller-manager's StatefulSet
// controller in-process until Stop; idempotent.
func (c *Cluster) StartStatefulSetController() error {
	return c.controllerManager().StartStatefulSetController()
}

// StartClusterRoleAggregation runs kube-controller-manager's ClusterRole
// aggregation controller in-process until Stop; idempotent.
func (c *Cluster) StartClusterRoleAggregation() error {
	return c.controllerManager().StartClusterRoleAggregation()
}

// StartGarbageCollector runs kube-controller-manager's garbage collector
// in-process until Stop, following CRDs installed later; idempotent.
func (c *Cluster) StartGarbageCollector() error {
	return c.controllerManager().StartGarbageCollector()
}
