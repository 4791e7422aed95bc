package resources

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// RequestCache remembers PodRequests by pod UID and resourceVersion. Every
// scheduling cycle's queue snapshot sums the demand of the pending members
// of gangs that wait, and room-making sums every running pod's: on the
// 512-node trace, adding up the same pods' containers again and again took
// most of the scheduling loop. The lists it returns are shared: callers
// must not change them.
//
// Entries of deleted pods go without a delete hook: the cache keeps two
// generations and starts a new one every generationAge; a pod asked for
// again moves to the current one, a pod not asked for in two generations is
// forgotten.
type RequestCache struct {
	mu        sync.Mutex
	cur, prev map[types.UID]cachedRequests
	started   time.Time
}

type cachedRequests struct {
	resourceVersion string
	list            List
}

const generationAge = time.Minute

// Of returns the pod's requests (PodRequests); the list is shared.
func (c *RequestCache) Of(pod *v1.Pod) List {
	if pod.UID == "" {
		return PodRequests(pod)
	}
	c.mu.Lock()
	if e, ok := c.cur[pod.UID]; ok && e.resourceVersion == pod.ResourceVersion {
		c.mu.Unlock()
		return e.list
	}
	e, ok := c.prev[pod.UID]
	c.mu.Unlock()
	if !ok || e.resourceVersion != pod.ResourceVersion {
		e = cachedRequests{resourceVersion: pod.ResourceVersion, list: PodRequests(pod)}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := time.Now(); c.cur == nil || now.Sub(c.started) >= generationAge {
		c.prev, c.cur, c.started = c.cur, make(map[types.UID]cachedRequests, len(c.cur)), now
	}
	c.cur[pod.UID] = e
	return e.list
}
