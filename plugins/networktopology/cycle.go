package networktopology

import (
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/internal/gang"
)

// stateKey holds this plugin's part of a scheduling cycle: the gang's
// topology constraint and the tree it refers to.
const stateKey fwk.StateKey = "phalanx.dev/topology"

type cycleState struct{ gang.Constraint }

// Clone shares the tree: it is read-only.
func (c *cycleState) Clone() fwk.StateData { return c }

// Constraint is the topology constraint NetworkTopology's PreFilter found
// for the cycle's gang, for the gang planner; nil when the profile does not
// enable NetworkTopology or the pod is in no gang.
func Constraint(state fwk.CycleState) *gang.Constraint {
	d, err := state.Read(stateKey)
	if err != nil {
		return nil
	}
	if c, ok := d.(*cycleState); ok {
		constraint := c.Constraint
		return &constraint
	}
	return nil
}
