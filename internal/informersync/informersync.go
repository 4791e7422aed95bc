// Package informersync starts informers and waits for their first lists,
// at once or, after Defer, all together: one after another the first lists
// of a scheduler's parts delayed its start by their sum.
package informersync

import (
	"context"
	"fmt"
	"k8s.io/apimachinery/pkg/api/meta"
	"sort"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// Timeout bounds the wait for an informer's first list at start.
const Timeout = time.Minute

// Syncs are the first lists of one process's parts; its informers run until ctx ends.
type Syncs struct {
	ctx context.Context
	mu  sync.Mutex
	// defers: waits are left for Await (Defer); pending are those left.
	defers  bool
	pending []pendingSync
	// cycle are the cycle-only syncs Await left to AwaitCycle.
	cycle []pendingSync
}

// New returns the syncs of parts whose informers run until ctx ends.
func New(ctx context.Context) *Syncs { return &Syncs{ctx: ctx} }

// pendingSync is a part's informer sync, started and not yet waited for, or
// a step to run once every part synced.
type pendingSync struct {
	what  string
	wait  func(<-chan struct{}) []string
	after func()
	// synced is set for a part that only scheduling cycles read: it closes
	// once the part synced, and AwaitCycle, not Await, waits.
	synced chan struct{}
}

// await waits, up to Timeout, for the part's first list, then closes
// synced for its readers.
func (p pendingSync) await(ctx context.Context) error {
	if err := waitSynced(ctx, p.what, p.wait); err != nil {
		return err
	}
	if p.synced != nil {
		close(p.synced)
	}
	return nil
}

// Defer makes the parts built from now on start their informers and
// leave the wait for Await, so that the first lists of every part run
// together: one after another they delayed the scheduler's start by their
// sum (the NRTs of 4,096 nodes alone take half a second).
func (s *Syncs) Defer() {
	s.mu.Lock()
	s.defers = true
	s.mu.Unlock()
}

// Await waits, up to Timeout each, for the informers the parts started
// since Defer, then runs the parts' post-sync steps (After) in
// order; parts built later sync at once again. The scheduler's own
// informers must not start before it returns: their events reach the
// parts' handlers, which read the parts' listers.
// Parts that only scheduling cycles read are left to AwaitCycle.
func (s *Syncs) Await(ctx context.Context) error {
	s.mu.Lock()
	pending := s.pending
	s.pending, s.defers = nil, false
	for _, p := range pending {
		if p.synced != nil {
			s.cycle = append(s.cycle, p)
		}
	}
	s.mu.Unlock()
	for _, p := range pending {
		if p.wait != nil && p.synced == nil {
			if err := p.await(ctx); err != nil {
				return err
			}
		}
	}
	for _, p := range pending {
		if p.after != nil {
			p.after()
		}
	}
	return nil
}

// AwaitCycle waits, up to Timeout each, for the parts that only
// scheduling cycles read (CyclePart), which Await left out: their
// first lists may run beside kube-scheduler's own, since no cycle runs
// before those synced, and their readers wait for them.
func (s *Syncs) AwaitCycle(ctx context.Context) error {
	s.mu.Lock()
	pending := s.cycle
	s.cycle = nil
	s.mu.Unlock()
	for _, p := range pending {
		if err := p.await(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Part starts a part's informers and waits, up to Timeout, for their
// first list; after Defer, Await waits.
func (s *Syncs) Part(what string, start func(<-chan struct{}), wait func(<-chan struct{}) []string) error {
	return s.start(pendingSync{what: what, wait: wait}, start)
}

// CyclePart is Part for a part that only scheduling cycles read (no
// event handler reads it): after Defer, AwaitCycle waits. The
// returned channel closes once the part synced; its readers wait on it.
func (s *Syncs) CyclePart(what string, start func(<-chan struct{}), wait func(<-chan struct{}) []string) (<-chan struct{}, error) {
	synced := make(chan struct{})
	if err := s.start(pendingSync{what: what, wait: wait, synced: synced}, start); err != nil {
		return nil, err
	}
	return synced, nil
}

// start starts a part's informers and waits for them, or leaves the
// wait for Await after Defer.
func (s *Syncs) start(p pendingSync, start func(<-chan struct{})) error {
	start(s.ctx.Done())
	if s.deferred(p) {
		return nil
	}
	return p.await(s.ctx)
}

// After runs a part's step that reads its synced listers: now, or after
// Defer in Await once every part synced.
func (s *Syncs) After(step func()) {
	if !s.deferred(pendingSync{after: step}) {
		step()
	}
}

// deferred queues p for Await when syncs are deferred.
func (s *Syncs) deferred(p pendingSync) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.defers {
		s.pending = append(s.pending, p)
	}
	return s.defers
}

// StartAndWait starts informers and waits, up to Timeout, for their
// first list.
func StartAndWait(ctx context.Context, what string, start func(<-chan struct{}), wait func(<-chan struct{}) []string) error {
	start(ctx.Done())
	return waitSynced(ctx, what, wait)
}

// waitSynced waits, up to Timeout, for started informers' first list;
// the error names what did not sync.
func waitSynced(ctx context.Context, what string, wait func(<-chan struct{}) []string) error {
	syncCtx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	if failed := wait(syncCtx.Done()); len(failed) > 0 {
		return fmt.Errorf("%s: informers for %v did not sync within %v (check the scheduler's RBAC and the API server)", what, failed, Timeout)
	}
	klog.FromContext(ctx).V(2).Info("Informers synced", "for", what)
	return nil
}

// Unsynced names the informers a WaitForCacheSync reports not synced.
func Unsynced[K comparable](m map[K]bool) []string {
	var out []string
	for k, ok := range m {
		if !ok {
			out = append(out, fmt.Sprint(k))
		}
	}
	sort.Strings(out)
	return out
}

// TrimManagedFields drops metadata.managedFields from the objects the
// phalanx informers cache, as kube-scheduler does for pods: nothing reads
// them, and on a NodeResourceTopology object they are a large share of its size.
func TrimManagedFields(obj any) (any, error) {
	if a, err := meta.Accessor(obj); err == nil && a.GetManagedFields() != nil {
		a.SetManagedFields(nil)
	}
	return obj, nil
}
