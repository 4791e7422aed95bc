package queue

import (
	"math"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

// recentUsage is decayed fair share's memory: per leaf queue, its
// allocation averaged over time with weights that halve every halfLife (an
// exponential moving average). A queue that held 16 GPUs for one half-life
// and then nothing shows 8 at that moment, 4 one half-life later.
// Allocation is piecewise constant between cache changes, so advancing at
// each change of a queue's allocation is exact.
type recentUsage struct {
	halfLife time.Duration
	clock    clock.PassiveClock
	queues   map[string]*decayed
	// seen: queues followed or seeded since the start; a seed applies only
	// before (status written before a restart, not an echo of our own).
	seen map[string]bool
}

type decayed struct {
	at  time.Time
	use map[v1.ResourceName]float64
}

// advance brings q's average to now, given that q held alloc since the last
// advance.
func (r *recentUsage) advance(q string, alloc resources.List, now time.Time) {
	d := r.queues[q]
	if d == nil {
		r.queues[q] = &decayed{at: now, use: map[v1.ResourceName]float64{}}
		r.seen[q] = true
		return
	}
	dt := now.Sub(d.at)
	if dt <= 0 {
		return
	}
	keep := math.Exp2(-dt.Seconds() / r.halfLife.Seconds())
	for res, u := range d.use {
		a := float64(alloc[res])
		d.use[res] = a + (u-a)*keep
	}
	for res, a := range alloc {
		if _, ok := d.use[res]; !ok && a > 0 {
			d.use[res] = float64(a) * (1 - keep)
		}
	}
	d.at = now
}

// seed sets q's average when nothing is known of it yet (a restart: the
// average the controller last wrote in Queue.status).
func (r *recentUsage) seed(q string, use resources.List, now time.Time) bool {
	if r.seen[q] || use.IsZero() {
		return false
	}
	r.seen[q] = true
	d := &decayed{at: now, use: map[v1.ResourceName]float64{}}
	for res, v := range use {
		if v > 0 {
			d.use[res] = float64(v)
		}
	}
	r.queues[q] = d
	return true
}

// snapshot advances every queue to now and returns the averages, rounded.
func (r *recentUsage) snapshot(placed map[string]resources.List) map[string]resources.List {
	now := r.clock.Now()
	for q, d := range r.queues {
		r.advance(q, placed[q], now)
		if placed[q].IsZero() && !anyAbove(d.use, 0.5) {
			delete(r.queues, q) // decayed to nothing
		}
	}
	out := make(map[string]resources.List, len(r.queues))
	for q, d := range r.queues {
		l := make(resources.List, len(d.use))
		for res, u := range d.use {
			if v := int64(math.Round(u)); v > 0 {
				l[res] = v
			}
		}
		out[q] = l
	}
	return out
}

// orderUse is what queue order counts as a queue's use with decayed fair
// share: per resource, the larger of its allocation now and its recent
// average (so a queue that just took a lot counts it at once, and one that
// ran hot keeps counting it while it decays).
func orderUse(allocated, recent map[string]resources.List) map[string]resources.List {
	out := make(map[string]resources.List, len(allocated)+len(recent))
	for q, l := range allocated {
		out[q] = l.Clone()
	}
	for q, l := range recent {
		if out[q] == nil {
			out[q] = resources.List{}
		}
		for res, v := range l {
			out[q][res] = max(out[q][res], v)
		}
	}
	return out
}

func anyAbove(use map[v1.ResourceName]float64, v float64) bool {
	for _, u := range use {
		if u >= v {
			return true
		}
	}
	return false
}
