package consolidate

import (
	"sync"
	"time"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/preempt"
)

// Log remembers when consolidations happened, per queue of the gang they
// were for, and which gangs were moved. Its zero value is empty and ready.
type Log struct {
	mu      sync.Mutex
	byQueue map[string][]time.Time
	moved   map[ident.Ref]time.Time
	// wakeAt is when a gang's pending retry fires: one per gang, however
	// often its members fail meanwhile.
	wakeAt map[ident.Ref]time.Time
}

// ClaimWake reports whether a retry of the gang at at must be scheduled:
// not when one is pending that fires no later.
func (l *Log) ClaimWake(ref ident.Ref, now, at time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.wakeAt[ref]; ok && t.After(now) && !t.After(at) {
		return false
	}
	if l.wakeAt == nil {
		l.wakeAt = map[ident.Ref]time.Time{}
	}
	for r, t := range l.wakeAt {
		if !t.After(now) {
			delete(l.wakeAt, r)
		}
	}
	l.wakeAt[ref] = at
	return true
}

// Allowed reports whether the queue may consolidate now, and if not, when.
func (l *Log) Allowed(queue string, now time.Time, perHour int) (bool, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	recent := l.byQueue[queue][:0]
	for _, t := range l.byQueue[queue] {
		if now.Sub(t) < time.Hour {
			recent = append(recent, t)
		}
	}
	if l.byQueue != nil {
		l.byQueue[queue] = recent
	}
	if len(recent) < perHour {
		return true, time.Time{}
	}
	return false, recent[0].Add(time.Hour)
}

// MovedAt is when the gang was last moved (zero: not within a day).
func (l *Log) MovedAt(ref ident.Ref) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.moved[ref]
}

// Record counts a consolidation for the queue and the victims it moved.
func (l *Log) Record(queue string, now time.Time, victims []preempt.Victim) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byQueue == nil {
		l.byQueue, l.moved = map[string][]time.Time{}, map[ident.Ref]time.Time{}
	}
	l.byQueue[queue] = append(l.byQueue[queue], now)
	for ref, t := range l.moved {
		if now.Sub(t) > 24*time.Hour {
			delete(l.moved, ref)
		}
	}
	for _, v := range victims {
		l.moved[v.Ref] = now
	}
}
