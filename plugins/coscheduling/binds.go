package coscheduling

import (
	"context"
	"sync"
	"time"

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

// BindBacklog is how many released members may wait for a bind slot before
// a new gang's plan waits for them (BindSlots.WaitForBacklog): about half a
// second of binds at the API server's pace keeps the binds in flight busy.
// Planning further ahead binds nothing sooner, and each waiting member
// holds a binding goroutine, its stack and its cycle's state: with no bound,
// a thousand members waited in the 1000-node scale bench and the peak RSS
// was 1.45x stock's.
const BindBacklog = 4 * GangBindConcurrency

// BacklogMaxWait bounds one plan's wait for the backlog, so a stalled API
// server slows new gangs' plans but never stops the scheduling loop.
const BacklogMaxWait = 2 * time.Second

// BindSlots is the process-wide bound on gang binds in flight.
type BindSlots struct {
	slots chan struct{}
	mu    sync.Mutex
	held  map[types.UID]bool
	// waiting counts members in Acquire without a slot; fewer is closed
	// (and replaced) when that count drops while a plan waits for it.
	waiting int
	fewer   chan struct{}
}

// NewBindSlots returns a bound of n binds in flight.
func NewBindSlots(n int) *BindSlots {
	return &BindSlots{slots: make(chan struct{}, n), held: map[types.UID]bool{}}
}

// Acquire waits for a slot for the pod, or for ctx to end.
func (b *BindSlots) Acquire(ctx context.Context, uid types.UID) error {
	b.mu.Lock()
	b.waiting++
	b.mu.Unlock()
	var err error
	select {
	case b.slots <- struct{}{}:
	case <-ctx.Done():
		err = ctx.Err()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waiting--
	if b.fewer != nil {
		close(b.fewer)
		b.fewer = nil
	}
	if err == nil {
		b.held[uid] = true
	}
	return err
}

// Waiting is the number of members waiting for a slot.
func (b *BindSlots) Waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiting
}

// WaitForBacklog waits until at most n members wait for a slot, for ctx to
// end, or for maxWait to pass, and says how long it waited.
func (b *BindSlots) WaitForBacklog(ctx context.Context, n int, maxWait time.Duration) time.Duration {
	start := time.Now()
	var timeout <-chan time.Time
	for {
		b.mu.Lock()
		if b.waiting <= n {
			b.mu.Unlock()
			return time.Since(start)
		}
		if b.fewer == nil {
			b.fewer = make(chan struct{})
		}
		fewer := b.fewer
		b.mu.Unlock()
		if timeout == nil {
			timer := time.NewTimer(maxWait)
			defer timer.Stop()
			timeout = timer.C
		}
		select {
		case <-fewer:
		case <-ctx.Done():
			return time.Since(start)
		case <-timeout:
			return time.Since(start)
		}
	}
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
