package devices

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// ClaimRiders counts a gang's pending members (of members; reserved and
// placed are the UIDs its plan reserved and placed) that wait on a claim a
// reserved (not yet bound) member shares with them: named by both, or their
// PodGroup's group-level claim. The DynamicResources plugin keeps such a
// member out until the claim's allocation, in flight for the reserved
// member, is written in PreBind; so it cannot reserve before the gang is let
// through. A rider's other claims must be its own (made from a template for
// it): their devices, like its node, are held by the plan. So it counts
// toward the quorum and follows once the shared claim is allocated.
func ClaimRiders(members []*v1.Pod, reserved, placed sets.Set[types.UID]) int {
	if reserved.Len() == 0 {
		return 0
	}
	held := sets.New[string]()
	for _, m := range members {
		if reserved.Has(m.UID) {
			for i := range m.Spec.ResourceClaims {
				if name := ClaimName(m, i); name != "" {
					held.Insert(name)
				}
			}
		}
	}
	if held.Len() == 0 {
		return 0
	}
	riders := 0
	for _, m := range members {
		if m.Spec.NodeName != "" || m.DeletionTimestamp != nil || placed.Has(m.UID) {
			continue
		}
		waits, rides := false, len(m.Spec.ResourceClaims) > 0
		for i, pc := range m.Spec.ResourceClaims {
			switch {
			case held.Has(ClaimName(m, i)):
				waits = true
			case pc.ResourceClaimTemplateName == nil:
				rides = false
			}
		}
		if waits && rides {
			riders++
		}
	}
	return riders
}
