package testcluster

import (
	"context"
	"embed"
	"fmt"
	"io/fs"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/kwok/pkg/apis/internalversion"
	kwokv1alpha1 "sigs.k8s.io/kwok/pkg/apis/v1alpha1"
	kwokclientset "sigs.k8s.io/kwok/pkg/client/clientset/versioned"
	kwokcontrollers "sigs.k8s.io/kwok/pkg/kwok/controllers"
	kwokclient "sigs.k8s.io/kwok/pkg/utils/client"
	"sigs.k8s.io/yaml"
)

// RunForAnnotation makes a pod under kwok complete (phase Succeeded) this long
// after it started, e.g. "30s". Pods without it run until they are deleted.
const RunForAnnotation = "sim.phalanx.dev/run-for"

//go:embed stages/*.yaml
var stageFiles embed.FS

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
	stages, err := kwokStages()
	if err != nil {
		return err
	}
	clients, err := kwokclient.NewClientset("", c.Kubeconfig)
	if err != nil {
		return err
	}
	restConfig, err := clients.ToRESTConfig()
	if err != nil {
		return err
	}
	dynamicClient, err := clients.ToDynamicClient()
	if err != nil {
		return err
	}
	restMapper, err := clients.ToRESTMapper()
	if err != nil {
		return err
	}
	restClient, err := rest.RESTClientFor(restConfig)
	if err != nil {
		return err
	}
	typedClient, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	kwokClient, err := kwokclientset.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	ctrl, err := kwokcontrollers.NewController(kwokcontrollers.Config{
		Clock:                             clock.RealClock{},
		DynamicClient:                     dynamicClient,
		RESTClient:                        restClient,
		RESTMapper:                        restMapper,
		ImpersonatingDynamicClient:        clients.ToImpersonatingDynamicClient(),
		ImpersonatingTypedClient:          clients.ToImpersonatingTypedClient(),
		TypedClient:                       typedClient,
		TypedKwokClient:                   kwokClient,
		ManageAllNodes:                    nodeAnnotationSelector == "",
		ManageNodesWithAnnotationSelector: nodeAnnotationSelector,
		LocalStages:                       stages,
		CIDR:                              "10.0.0.1/16",
		NodeIP:                            "192.168.0.1",
		PodPlayStageParallelism:           8,
		NodePlayStageParallelism:          2,
		NodeLeaseParallelism:              1,
		PodsOnNodeSyncParallelism:         2,
		ID:                                "phalanx-testcluster",
	})
	if err != nil {
		return fmt.Errorf("kwok: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := ctrl.Start(ctx); err != nil {
		cancel()
		return fmt.Errorf("kwok: %w", err)
	}
	c.onStop(cancel)
	return nil
}

// kwokStages reads the embedded stages (stages/*.yaml), grouped by the kind
// of object they act on.
func kwokStages() (map[internalversion.StageResourceRef][]*internalversion.Stage, error) {
	files, err := fs.Glob(stageFiles, "stages/*.yaml")
	if err != nil {
		return nil, err
	}
	out := map[internalversion.StageResourceRef][]*internalversion.Stage{}
	for _, f := range files {
		raw, err := stageFiles.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var s kwokv1alpha1.Stage
		if err := yaml.UnmarshalStrict(raw, &s); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		in, err := internalversion.ConvertToInternalStage(&s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out[in.Spec.ResourceRef] = append(out[in.Spec.ResourceRef], in)
	}
	return out, nil
}
