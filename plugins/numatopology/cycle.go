package numatopology

import (
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/internal/gang/planner"
)

// stateKey holds this plugin's part of a scheduling cycle: how many members
// fit a node's zones, and whether the cycle's pod needs alignment.
const stateKey fwk.StateKey = "phalanx.dev/numa"

type cycleState struct {
	limiter planner.Limiter
	aligned bool
}

// Clone shares the limiter.
func (c *cycleState) Clone() fwk.StateData { return c }

func readCycle(state fwk.CycleState) *cycleState {
	d, err := state.Read(stateKey)
	if err != nil {
		return nil
	}
	c, _ := d.(*cycleState)
	return c
}

// aligned reports whether PreFilter found that the cycle's pod needs NUMA
// alignment.
func aligned(state fwk.CycleState) bool {
	c := readCycle(state)
	return c != nil && c.aligned
}

// Limiter is NUMATopology's per-node member limit for the gang planner; nil
// when the profile does not enable NUMATopology.
func Limiter(state fwk.CycleState) planner.Limiter {
	if c := readCycle(state); c != nil {
		return c.limiter
	}
	return nil
}
