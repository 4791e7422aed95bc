// Package kwok runs a kwok controller in-process as the kubelet of a test
// cluster's nodes, with the stages under stages/ (pods run, complete after
// RunForAnnotation, and go away at once when deleted).
package kwok

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

// Start runs the kwok controller against the cluster of kubeconfig until
// stop is called: as the kubelet of every node, or with
// nodeAnnotationSelector set (e.g. "kwok.x-k8s.io/node=fake") of the nodes
// whose annotations match it only.
func Start(kubeconfig, nodeAnnotationSelector string) (stop func(), err error) {
	stages, err := Stages()
	if err != nil {
		return nil, err
	}
	clients, err := kwokclient.NewClientset("", kubeconfig)
	if err != nil {
		return nil, err
	}
	restConfig, err := clients.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	dynamicClient, err := clients.ToDynamicClient()
	if err != nil {
		return nil, err
	}
	restMapper, err := clients.ToRESTMapper()
	if err != nil {
		return nil, err
	}
	restClient, err := rest.RESTClientFor(restConfig)
	if err != nil {
		return nil, err
	}
	typedClient, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return nil, err
	}
	kwokClient, err := kwokclientset.NewForConfig(restConfig)
	if err != nil {
		return nil, err
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
		return nil, fmt.Errorf("kwok: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := ctrl.Start(ctx); err != nil {
		cancel()
		return nil, fmt.Errorf("kwok: %w", err)
	}
	return cancel, nil
}

// Stages reads the embedded stages (stages/*.yaml), grouped by the kind
// of object they act on.
func Stages() (map[internalversion.StageResourceRef][]*internalversion.Stage, error) {
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
