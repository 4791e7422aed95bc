package v1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	schedschemev1 "k8s.io/kube-scheduler/config/v1"
)

// SchemeGroupVersion is kubescheduler.config.k8s.io/v1.
var SchemeGroupVersion = schema.GroupVersion{Group: "kubescheduler.config.k8s.io", Version: "v1"}

var (
	// Registering into kube-scheduler's own v1 builder makes the upstream
	// defaulting add our args to profiles that enable a plugin without args.
	localSchemeBuilder = &schedschemev1.SchemeBuilder
	// AddToScheme registers the v1 args types.
	AddToScheme = localSchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&CoschedulingArgs{},
		&CapacityQueueArgs{},
		&NetworkTopologyArgs{},
		&NUMATopologyArgs{},
	)
	return nil
}

func init() {
	localSchemeBuilder.Register(addKnownTypes)
	localSchemeBuilder.Register(RegisterDefaults)
	localSchemeBuilder.Register(RegisterConversions)
}
