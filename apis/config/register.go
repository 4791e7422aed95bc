package config

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
)

// SchemeGroupVersion is the internal version of the kube-scheduler config group.
var SchemeGroupVersion = schema.GroupVersion{Group: schedconfig.GroupName, Version: runtime.APIVersionInternal}

var (
	localSchemeBuilder = &schedconfig.SchemeBuilder
	// AddToScheme registers the internal args types.
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
}
