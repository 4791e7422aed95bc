package queue

import (
	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

const gpu v1.ResourceName = "nvidia.com/gpu"

func cpuGPU(m, g int64) resources.List { return resources.List{v1.ResourceCPU: m, gpu: g} }

func q(name, parent string, weight int32) Queue {
	return Queue{Name: name, Parent: parent, Weight: weight, Open: true, Reclaimable: true}
}
