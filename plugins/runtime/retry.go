package runtime

import "time"

// MaxFailedWakeInterval bounds how long a change waits before the gangs
// whose plans failed are woken to plan again (see failedWakes).
const MaxFailedWakeInterval = 30 * time.Second

// failedWakes paces the wakes of gangs whose plans failed. Each wake
// re-plans every such gang, and a plan that fails costs what the gang's
// last failed plan cost (at 10,000 nodes, 0.1–0.4 s and its reservation's
// pass over every node's pods).
// Changes come far more often in a full cluster: every gang that starts,
// every hold given up. Woken on each, the failed gangs — ahead in the
// queue's order — kept the scheduler re-planning them while the gangs and
// pods behind them, which fit, were never tried. So after a wake the next
// one waits as long as the failed plans took: re-planning them takes at
// most half the scheduler's time.
type failedWakes struct {
	// next is the earliest time of the next wake; pending: a wake is set
	// for then, or under way.
	next    time.Time
	pending bool
}

// wakeFailedGangs wakes the gangs whose plans failed (their representative
// members), now or, within the pace, once at its end. The lifecycle is read
// outside g.mu: the two locks are never held together.
func (g *Gangs) wakeFailedGangs() {
	now := g.rt.clock.Now()
	g.mu.Lock()
	if g.failedWakes.pending {
		g.mu.Unlock()
		return
	}
	g.failedWakes.pending = true
	wait := g.failedWakes.next.Sub(now)
	g.mu.Unlock()
	if wait > 0 {
		g.rt.clock.AfterFunc(wait, func() {
			go g.wakeFailedGangsNow() // a fake clock calls back under its lock
		})
		return
	}
	g.wakeFailedGangsNow()
}

// wakeFailedGangsNow wakes them and sets when the next wake may come.
func (g *Gangs) wakeFailedGangsNow() {
	refs, cost := g.Lifecycle.FailedGangs()
	g.mu.Lock()
	g.failedWakes.next = g.rt.clock.Now().Add(min(cost, MaxFailedWakeInterval))
	g.failedWakes.pending = false
	g.mu.Unlock()
	for _, ref := range refs {
		g.wakeOne(wokenFailedRetry, ref)
	}
}
