package runtime

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// GangBindConcurrency bounds the binds of gang members in flight at once.
// A gang that reaches its quorum releases all its members from Permit
// together; unbounded, a 1024-pod gang opens over a thousand requests at
// once, more than an HTTP/2 connection to the API server carries (250
// streams by default), and the client dials a new TLS connection per
// request over the limit — in the 1024-pod benchmark a third of the
// scheduler's CPU went to those handshakes. The API server binds no faster
// with more in flight, so the gang binds as fast with a bound.
const GangBindConcurrency = 64

// BindSlots is the process-wide bound on gang binds in flight.
type BindSlots struct {
	slots chan struct{}
	mu    sync.Mutex
	held  map[types.UID]bool
}

// NewBindSlots returns a bound of n binds in flight.
func NewBindSlots(n int) *BindSlots {
	return &BindSlots{slots: make(chan struct{}, n), held: map[types.UID]bool{}}
}

// Acquire waits for a slot for the pod, or for ctx to end.
func (b *BindSlots) Acquire(ctx context.Context, uid types.UID) error {
	select {
	case b.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	b.mu.Lock()
	b.held[uid] = true
	b.mu.Unlock()
	return nil
}

// Release frees the pod's slot; a pod that holds none is a no-op, so both
// PostBind and Unreserve may call it.
func (b *BindSlots) Release(uid types.UID) {
	b.mu.Lock()
	held := b.held[uid]
	delete(b.held, uid)
	b.mu.Unlock()
	if held {
		<-b.slots
	}
}

// InFlight is the number of slots held.
func (b *BindSlots) InFlight() int { return len(b.slots) }
