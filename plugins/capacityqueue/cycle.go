package capacityqueue

import (
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/internal/gang"
)

// stateKey holds this plugin's part of a scheduling cycle: the gang
// manager's Admission, its queue snapshot taken once, so PreFilter and
// PostFilter see the same numbers.
const stateKey fwk.StateKey = "phalanx.dev/queue"

type cycleState struct{ *gang.Admission }

// Clone shares the admission: PreFilter writes it before any copy is made,
// and the snapshot is read-only.
func (c *cycleState) Clone() fwk.StateData { return c }

// Admission is what CapacityQueue's PreFilter decided in this cycle, for the
// gang planner; nil when the profile does not enable CapacityQueue.
func Admission(state fwk.CycleState) *gang.Admission {
	d, err := state.Read(stateKey)
	if err != nil {
		return nil
	}
	if c, ok := d.(*cycleState); ok {
		return c.Admission
	}
	return nil
}
