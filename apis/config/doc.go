// +k8s:deepcopy-gen=package

// Package config holds the internal types of the phalanx plugin args. They are
// registered in the kube-scheduler config group so that pluginConfig decodes them.
package config
