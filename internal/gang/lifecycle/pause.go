package lifecycle

import (
	"time"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
)

// Pauses after timed-out plans: the first lasts half the plan's timeout,
// each further one in a row twice the last, within these bounds.
const (
	minTimeoutPause = time.Second
	maxTimeoutPause = 5 * time.Minute
)

// TimeoutPause is how long a gang waits before it plans again after its
// n-th plan in a row ended at its timeout ttl: a member that cannot reach the
// scheduler (a missing volume or claim, a wrong schedulerName) would
// otherwise make the gang hold its nodes again at once, over and over.
func TimeoutPause(ttl time.Duration, n int) time.Duration {
	pause := ttl / 2
	for i := 1; i < n && pause < maxTimeoutPause; i++ {
		pause *= 2
	}
	return min(max(pause, minTimeoutPause), maxTimeoutPause).Round(100 * time.Millisecond)
}

func (lc *Lifecycle) pauseLocked(g *gangState) time.Duration {
	g.timeouts++
	pause := TimeoutPause(g.ttl, g.timeouts)
	lc.endPauseLocked(g)
	g.pausedUntil = lc.clock.Now().Add(pause)
	ref, until := g.ref, g.pausedUntil
	g.pauseTimer = lc.clock.AfterFunc(pause, func() { go lc.resume(ref, until) })
	return pause
}

func (lc *Lifecycle) endPauseLocked(g *gangState) {
	if g.pauseTimer != nil {
		g.pauseTimer.Stop()
		g.pauseTimer = nil
	}
	g.pausedUntil = time.Time{}
}

// resume ends a pause that is still the gang's and tells the listener.
func (lc *Lifecycle) resume(ref ident.Ref, until time.Time) {
	lc.mu.Lock()
	g := lc.gangs[ref]
	ended := g != nil && g.pausedUntil.Equal(until)
	if ended {
		g.pauseTimer = nil
		g.pausedUntil = time.Time{}
	}
	lc.unlock()
	if rl, ok := lc.listener.(ResumeListener); ended && ok {
		rl.Resumed(ref)
	}
}

// Paused reports whether the gang waits out a pause after a timed-out plan,
// and until when. Its members are turned away meanwhile.
func (lc *Lifecycle) Paused(ref ident.Ref) (time.Time, bool) {
	lc.mu.Lock()
	defer lc.unlock()
	g := lc.gangs[ref]
	if g == nil || g.pausedUntil.IsZero() || !lc.clock.Now().Before(g.pausedUntil) {
		return time.Time{}, false
	}
	return g.pausedUntil, true
}
