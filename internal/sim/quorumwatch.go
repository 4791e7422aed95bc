package sim

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"

	"github.com/phalanx-sched/phalanx/internal/sim/scenario"
)

// quorumWatch decides when each gang started (minMember members bound and
// not finished at one moment) from every pod transition, seen through a
// watch. Samples cannot: at 50x a 91 s job runs 1.8 s, and a job whose
// members all ran and completed between two samples would count as never
// started, its wait running to the end of the replay.
type quorumWatch struct {
	mu    sync.Mutex
	since func() time.Duration
	need  map[string]int // per gang's key: its minMember
	gangs map[string]*gangRun
}

// gangRun is one gang's pods as the watch saw them.
type gangRun struct {
	live map[string]bool // bound, not finished, not being deleted
	// firstBound, quorumAt: the first bind, the first moment minMember
	// members were live. restartedAt: the last moment it reached its quorum
	// again after an eviction took it below.
	firstBound, quorumAt, restartedAt time.Duration
	broken                            bool
}

func newQuorumWatch(jobs []scenario.Job, since func() time.Duration) *quorumWatch {
	w := &quorumWatch{since: since, need: map[string]int{}, gangs: map[string]*gangRun{}}
	for _, j := range jobs {
		if j.MinMember > 0 {
			w.need[j.Key()] = int(j.MinMember)
		}
	}
	return w
}

// handler feeds the watch from the replay's pod informer (jobPods).
func (w *quorumWatch) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.pod(obj, false) },
		UpdateFunc: func(_, obj any) { w.pod(obj, false) },
		DeleteFunc: func(obj any) { w.pod(finalState(obj), true) },
	}
}

func (w *quorumWatch) pod(obj any, gone bool) {
	if p, ok := obj.(*v1.Pod); ok {
		w.observe(p, gone, w.since())
	}
}

// observe applies one pod's state at now.
func (w *quorumWatch) observe(p *v1.Pod, gone bool, now time.Duration) {
	key := p.Namespace + "/" + p.Labels[jobLabel]
	w.mu.Lock()
	defer w.mu.Unlock()
	need, ok := w.need[key]
	if !ok {
		return
	}
	g := w.gangs[key]
	if g == nil {
		g = &gangRun{live: map[string]bool{}}
		w.gangs[key] = g
	}
	live := !gone && p.Spec.NodeName != "" && p.DeletionTimestamp == nil && !podutil.IsPodTerminal(p)
	switch {
	case live && !g.live[p.Name]:
		g.live[p.Name] = true
		if g.firstBound == 0 {
			g.firstBound = now
		}
		if len(g.live) < need {
			return
		}
		if g.quorumAt == 0 {
			g.quorumAt = now
		} else if g.broken {
			g.broken, g.restartedAt = false, now
		}
	case !live && g.live[p.Name]:
		delete(g.live, p.Name)
		// Completing is not an eviction; being deleted or killed is.
		if p.Status.Phase != v1.PodSucceeded && g.quorumAt > 0 && len(g.live) < need {
			g.broken = true
		}
	}
}

// times returns a gang's first bind, its quorum and its last restart (zero:
// not yet).
func (w *quorumWatch) times(key string) (firstBound, quorumAt, restartedAt time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if g := w.gangs[key]; g != nil {
		return g.firstBound, g.quorumAt, g.restartedAt
	}
	return 0, 0, 0
}
