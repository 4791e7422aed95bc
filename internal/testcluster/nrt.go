package testcluster

import (
	"context"
	"fmt"

	"github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/apis/topology/v1alpha2"
	nrtclientset "github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/generated/clientset/versioned"
	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/phalanx-sched/phalanx/internal/testcluster/objects"
)

// ZoneSpec describes one NUMA zone of a NodeResourceTopology object
// (objects.ZoneSpec).
type ZoneSpec = objects.ZoneSpec

// NRT builds the NodeResourceTopology object of a node as NFD
// topology-updater publishes it (see objects.NRT).
func NRT(node, policy, scope string, zones ...ZoneSpec) *v1alpha2.NodeResourceTopology {
	return objects.NRT(node, policy, scope, zones...)
}

// NRTClient returns a typed NodeResourceTopology clientset for the cluster,
// speaking JSON (the CRD cannot take protobuf).
func (c *Cluster) NRTClient() (nrtclientset.Interface, error) {
	return nrtclientset.NewForConfig(c.CRDConfig)
}

// CreateNRT publishes the NodeResourceTopology object of a node (see NRT). If
// the object exists it is replaced, as topology-updater refreshes it.
func (c *Cluster) CreateNRT(ctx context.Context, node, policy, scope string, zones ...ZoneSpec) error {
	return c.ApplyNRT(ctx, NRT(node, policy, scope, zones...))
}

// ApplyNRT creates a NodeResourceTopology object or replaces the existing one
// of the same name.
func (c *Cluster) ApplyNRT(ctx context.Context, want *v1alpha2.NodeResourceTopology) error {
	client, err := c.NRTClient()
	if err != nil {
		return err
	}
	nrts := client.TopologyV1alpha2().NodeResourceTopologies()
	_, err = nrts.Create(ctx, want, metav1.CreateOptions{})
	if err == nil {
		return nil
	}
	if !errors.IsAlreadyExists(err) {
		return fmt.Errorf("creating NodeResourceTopology %s: %w", want.Name, err)
	}
	got, err := nrts.Get(ctx, want.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("getting NodeResourceTopology %s: %w", want.Name, err)
	}
	update := want.DeepCopy()
	update.ResourceVersion = got.ResourceVersion
	update.UID = got.UID
	if _, err := nrts.Update(ctx, update, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating NodeResourceTopology %s: %w", want.Name, err)
	}
	return nil
}
