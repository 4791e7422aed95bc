package queue

import (
	"encoding/json"

	v1 "k8s.io/api/core/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// HeldAnnotation carries, on a gang's group object, what the gang's plan or
// reservation holds (EncodeHeld): the scheduler writes it, the controller
// reads it, and both charge it with ChargeHeld.
const HeldAnnotation = phalanxv1alpha1.HeldAnnotation

// ChargeHeld is what gangs hold, per gang, added up per queue: capacity that
// a plan or a reservation holds counts against its gang's queue, as if its
// pods ran there. queueOf resolves a gang's queue (queue.Of); false skips
// the gang (its group object is unknown). The result is Cache.Snapshot's
// held argument, in the scheduler and in the controller alike.
func ChargeHeld[K comparable](byGang map[K]resources.List, queueOf func(K) (string, bool)) map[string]resources.List {
	out := map[string]resources.List{}
	for k, l := range byGang {
		if l.IsZero() {
			continue
		}
		name, ok := queueOf(k)
		if !ok {
			continue
		}
		if out[name] == nil {
			out[name] = resources.List{}
		}
		out[name].Add(l)
	}
	return out
}

// EncodeHeld renders what a gang holds as the value of HeldAnnotation: a
// compact JSON object of quantities, keys sorted; "" when it holds nothing.
func EncodeHeld(l resources.List) string {
	if l.IsZero() {
		return ""
	}
	out := make(map[v1.ResourceName]string, len(l))
	for r, v := range l {
		if v == 0 {
			continue
		}
		q := Quantity(r, v)
		out[r] = q.String()
	}
	b, err := json.Marshal(out)
	if err != nil {
		return ""
	}
	return string(b)
}

// DecodeHeld reads a HeldAnnotation value ("": nothing held).
func DecodeHeld(s string) (resources.List, error) {
	if s == "" {
		return nil, nil
	}
	var rl v1.ResourceList
	if err := json.Unmarshal([]byte(s), &rl); err != nil {
		return nil, err
	}
	return resources.FromResourceList(rl), nil
}

// Quantity renders an amount of a resource (CPU in millicores) as an API
// quantity.
func Quantity(r v1.ResourceName, v int64) apiresource.Quantity {
	if r == v1.ResourceCPU {
		return *apiresource.NewMilliQuantity(v, apiresource.DecimalSI)
	}
	return *apiresource.NewQuantity(v, apiresource.BinarySI)
}
