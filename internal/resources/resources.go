// Package resources is integer resource arithmetic shared by the phalanx core:
// CPU in millicores, everything else in its base unit.
package resources

import (
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// List maps a resource name to an amount (millicores for CPU).
type List map[v1.ResourceName]int64

// FromResourceList converts an API ResourceList.
func FromResourceList(rl v1.ResourceList) List {
	out := make(List, len(rl))
	for name, q := range rl {
		if name == v1.ResourceCPU {
			out[name] = q.MilliValue()
		} else {
			out[name] = q.Value()
		}
	}
	return out
}

// PodRequests is the effective request of a pod (init containers, overhead and
// pod-level resources included), as the scheduler computes it.
func PodRequests(pod *v1.Pod) List {
	return FromResourceList(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))
}

// Clone returns a copy.
func (l List) Clone() List {
	out := make(List, len(l))
	for k, v := range l {
		out[k] = v
	}
	return out
}

// Add adds o to l in place.
func (l List) Add(o List) {
	for k, v := range o {
		l[k] += v
	}
}

// AddScaled adds n×o to l in place.
func (l List) AddScaled(o List, n int64) {
	for k, v := range o {
		l[k] += v * n
	}
}

// Sub subtracts o from l in place.
func (l List) Sub(o List) {
	for k, v := range o {
		l[k] -= v
	}
}

// Fits reports whether req fits in l. Resources absent from l count as zero.
func (l List) Fits(req List) bool {
	for k, v := range req {
		if v > 0 && l[k] < v {
			return false
		}
	}
	return true
}

// Copies returns how many times req fits in l, capped at limit. A request of
// nothing fits limit times.
func (l List) Copies(req List, limit int64) int64 {
	n := limit
	for k, v := range req {
		if v <= 0 {
			continue
		}
		c := l[k] / v
		if c < 0 {
			c = 0
		}
		if c < n {
			n = c
		}
	}
	return n
}

// IsZero reports whether every amount is zero.
func (l List) IsZero() bool {
	for _, v := range l {
		if v != 0 {
			return false
		}
	}
	return true
}

// String renders the list deterministically, e.g. "cpu=4000m nvidia.com/gpu=2".
// Zero amounts are left out: {cpu: 1} and {cpu: 1, memory: 0} are the same.
func (l List) String() string {
	names := make([]string, 0, len(l))
	for k, v := range l {
		if v != 0 {
			names = append(names, string(k))
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(n)
		b.WriteByte('=')
		b.WriteString(formatAmount(v1.ResourceName(n), l[v1.ResourceName(n)]))
	}
	return b.String()
}

func formatAmount(name v1.ResourceName, v int64) string {
	if name == v1.ResourceCPU {
		return strconv.FormatInt(v, 10) + "m"
	}
	return strconv.FormatInt(v, 10)
}
