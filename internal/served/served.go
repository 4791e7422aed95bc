// Package served asks the API server's discovery which resources it serves.
// The scheduler and the controller ask it the same way, at start and again
// while they run (an API such as the Workload API can be turned on later).
package served

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// Resource reports whether the API server serves the resource in
// groupVersion ("group/version", or "v1"). A missing group or version is
// (false, nil); other discovery failures are errors.
func Resource(cfg *rest.Config, groupVersion, resource string) (bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false, err
	}
	list, err := dc.ServerResourcesForGroupVersion(groupVersion)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("discovering %s: %w", groupVersion, err)
	}
	for _, res := range list.APIResources {
		if res.Name == resource {
			return true, nil
		}
	}
	return false, nil
}

// For is Resource on the API server of cfg.
func For(cfg *rest.Config) Func {
	return func(groupVersion, resource string) (bool, error) { return Resource(cfg, groupVersion, resource) }
}
