// +k8s:deepcopy-gen=package
// +k8s:conversion-gen=github.com/phalanx-sched/phalanx/apis/config
// +k8s:defaulter-gen=TypeMeta
// +groupName=kubescheduler.config.k8s.io

// Package v1 holds the versioned phalanx plugin args, as written in pluginConfig.
package v1
