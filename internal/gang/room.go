package gang

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/lifecycle"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
	"github.com/phalanx-sched/phalanx/internal/gang/preempt"
	"github.com/phalanx-sched/phalanx/internal/queue"
)

// Room is what MakeRoom decided: the node a plain pod is nominated to (""
// for a gang, which holds a reservation instead), and what to say.
type Room struct {
	Nominate string
	Message  string
}

// MakeRoom is the whole-gang answer to a pod (or gang) that fits nowhere:
//  1. priority: whole gangs of lower priority — of its own queue, or of
//     queues that stay at or above their deserved share without them;
//  2. reclaim: for a queue below its deserved share, whole gangs of
//     reclaimable queues above theirs that have run at least MinRuntime;
//  3. consolidation (when on): for a gang that waits for a domain of its
//     required level, whole gangs moved out of one, each proven to fit
//     elsewhere right away.
//
// Victims are chosen only if the planner, given the capacity they free,
// places the whole gang; the fewest, lowest priority first. The gang then
// holds the freed nodes (a reservation) until its victims are gone. A
// PriorityClass with preemptionPolicy Never makes no room. It returns nil
// when no room is made, with why.
func (m *Manager) MakeRoom(ctx context.Context, a *Attempt) (*Room, string) {
	if a.Spec != nil {
		if r, ok := m.ReservationOf(a.Ref); ok && r.Kind == lifecycle.ReservationPreempting {
			return nil, "waiting for the gangs it preempted to leave"
		}
	}
	if p := a.Pod.Spec.PreemptionPolicy; p != nil && *p == v1.PreemptNever {
		return nil, "preemptionPolicy Never: no gang is preempted for this pod"
	}
	if a.Spec != nil && a.Spec.NeverPreempts {
		return nil, "preemptionPolicy Never (the gang's PodGroup): no gang is preempted for it"
	}
	if a.Spec == nil {
		// A plain pod: the prober gives what the cycle's filters said.
		a.groups = planner.GroupPending(a.Pod, nil, 1, m.demand())
		a.view = a.Prober.Probe(ctx, a.Pod)
	}
	if a.view == nil {
		// Nothing was learned this cycle (a cached failure).
		return nil, ""
	}
	if a.devices == nil {
		m.openDevices(ctx, a)
	}
	qc := a.Queue
	all := m.running(a)
	planFor := func(victims []preempt.Victim) *planner.Plan {
		if a.devices != nil {
			// The victims' devices count as free.
			var pods []*v1.Pod
			for _, v := range victims {
				pods = append(pods, all.Pods[v.Key]...)
			}
			defer a.devices.Without(pods)()
		}
		req, _ := m.request(a, m.room(a, preempt.Freed(victims)), true)
		plan, _ := m.place(a, req)
		return plan
	}
	fits := func(victims []preempt.Victim) bool { return planFor(victims) != nil }
	if !fits(all.Victims) {
		// Not even an empty cluster takes it (a pod larger than any NUMA
		// zone, a gang larger than any domain): eviction cannot help, and
		// saying why none is chosen would bury the blocking reason.
		return nil, ""
	}

	if qc == nil || qc.Admitted {
		var cands []preempt.Victim
		for _, v := range all.Victims {
			if v.Priority >= a.Priority {
				continue
			}
			if qc != nil && v.Queue != qc.Queue && !qc.Snapshot().AboveDeserved(v.Queue, v.Total) {
				continue
			}
			cands = append(cands, v)
		}
		if chosen := preempt.ChooseVictims(cands, fits); chosen != nil {
			why := fmt.Sprintf("priority %d preempts lower priority", a.Priority)
			return m.evict(ctx, a, all, chosen, planFor(chosen), ReasonPreempted, why, "")
		}
	}
	why := "no lower-priority gang frees room for it"
	if qc != nil && qc.Reclaim {
		var room *Room
		if room, why = m.reclaim(ctx, a, all, planFor); room != nil {
			return room, why
		}
	}
	room, note := m.consolidate(ctx, a, all, planFor)
	if room != nil {
		return room, note
	}
	return nil, joinNotes(why, note)
}

// joinNotes joins the non-empty notes with "; ".
func joinNotes(notes ...string) string {
	var out []string
	for _, n := range notes {
		if n != "" {
			out = append(out, n)
		}
	}
	return strings.Join(out, "; ")
}

// reclaim evicts whole gangs of queues above their deserved share for a
// queue below its own.
func (m *Manager) reclaim(ctx context.Context, a *Attempt, all *preempt.Running, planFor func([]preempt.Victim) *planner.Plan) (*Room, string) {
	qc := a.Queue
	others := false
	for _, v := range all.Victims {
		others = others || (v.Queue != qc.Queue && v.Of == "")
	}
	if !others {
		// No other queue runs a gang: reclaim does not apply, and saying
		// why it takes nothing would bury the blocking reason.
		return nil, ""
	}
	if r, over := qc.Snapshot().Exceeds(qc.Queue, qc.Need); over {
		return nil, fmt.Sprintf("nothing to reclaim: queue %s would go above its deserved share (%s)", qc.Queue, r)
	}
	now := m.Now()
	var cands []queue.Gang
	var youngest time.Duration
	byKey := make(map[string]preempt.Victim, len(all.Victims))
	for _, v := range all.Victims {
		if v.Queue == qc.Queue || v.Of != "" {
			continue
		}
		if age := now.Sub(v.Started); age < qc.MinRuntime {
			if wait := qc.MinRuntime - age; youngest == 0 || wait < youngest {
				youngest = wait
			}
			continue
		}
		byKey[v.Key] = v
		cands = append(cands, queue.Gang{Key: v.Key, Queue: v.Queue, Priority: v.Priority, Usage: v.Total,
			Members: v.Members, MinMember: v.Members, CreatedUnix: v.Started.Unix()})
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].Key < cands[j].Key })
	picked, why := qc.Snapshot().Reclaim(qc.Queue, qc.Need, cands)
	if len(picked) == 0 && why == "" {
		// The queue's accounting misses nothing for the gang (a plan that
		// failed on a stale snapshot): reclaim has nothing to say.
		return nil, ""
	}
	if len(picked) == 0 {
		if youngest > 0 {
			m.retryAfter(a, youngest)
			why = fmt.Sprintf("%s; gangs that ran less than %v are not reclaimed (retrying in %v)", why, qc.MinRuntime, youngest.Round(time.Second))
		}
		return nil, "nothing to reclaim: " + why
	}
	if !qc.Admitted && !qc.Snapshot().AdmitsWithout(qc.Queue, qc.Need, picked) {
		return nil, qc.Refusal
	}
	chosen := make([]preempt.Victim, 0, len(picked))
	for _, g := range picked {
		chosen = append(chosen, byKey[g.Key])
	}
	plan := planFor(chosen)
	if plan == nil {
		return nil, fmt.Sprintf("nothing reclaimed: the gangs queue %s may reclaim (%s) free room on nodes where it still would not fit", qc.Queue, preempt.Names(chosen))
	}
	why = fmt.Sprintf("queue %s is below its deserved share", qc.Queue)
	return m.evict(ctx, a, all, chosen, plan, ReasonReclaimed, why, qc.Queue)
}

// retryAfter wakes the pod (or its gang) after d, planning afresh: a victim
// becomes old enough to reclaim without any cluster event.
func (m *Manager) retryAfter(a *Attempt, d time.Duration) {
	ref, pod := a.Ref, a.Pod
	m.AfterFunc(d, func() {
		if !ref.IsZero() {
			m.Retry(ref)
			m.fx.WakeOne(ref, WakeRetryAfter)
			return
		}
		m.fx.Activate(pod)
	})
}

// running lists the gangs and plain pods on the view's nodes, other than the
// attempt's own gang, with what each uses where.
func (m *Manager) running(a *Attempt) *preempt.Running {
	c := preempt.Census{RefOf: m.dir.RefOf, PriorityOf: m.dir.PriorityOf, Demand: m.Demand, Single: m.single}
	if a.Queue != nil {
		c.QueueOf = a.Queue.QueueOf
	}
	return c.Running(a.view.NodeNames(), a.view.PodsOn, a.Ref)
}

// single gives the minimum of a gang whose disruptionMode is single.
func (m *Manager) single(ref ident.Ref) (int, bool) {
	spec, err := m.dir.Spec(ref)
	if err != nil || spec.Disruption != gangspec.DisruptSingle {
		return 0, false
	}
	return spec.MinMember, true
}

// evict deletes every pod of every victim, says why on the victims' pods and
// group objects, and lets the preemptor hold the room it frees: a gang
// reserves the planned nodes against pods of equal or lower priority; a plain
// pod is nominated to its node.
func (m *Manager) evict(ctx context.Context, a *Attempt, all *preempt.Running, victims []preempt.Victim, plan *planner.Plan, reason, why, forQueue string) (*Room, string) {
	who := a.Pod.Namespace + "/" + a.Pod.Name
	if a.Spec != nil {
		who = "gang " + a.Ref.String()
	}
	for _, v := range victims {
		if v.Of != "" {
			// A member above its gang's minimum (disruptionMode single):
			// the gang keeps running.
			msg := fmt.Sprintf("evicted alone (above its gang's minimum, disruptionMode single) for %s: %s", who, why)
			m.fx.Evict(ctx, all.Pods[v.Key], reason, msg)
			continue
		}
		msg := fmt.Sprintf("evicted whole for %s: %s", who, why)
		if !v.Ref.IsZero() {
			if spec, err := m.dir.Spec(v.Ref); err == nil {
				m.fx.SetCondition(spec, reason, msg)
			}
		}
		m.fx.Evict(ctx, all.Pods[v.Key], reason, msg)
	}
	m.fx.Evicted(reason, forQueue, len(victims))
	names := preempt.Names(victims)
	klog.FromContext(ctx).V(2).Info("Evicting whole gangs", "for", who, "reason", reason, "victims", names, "queue", forQueue)
	msg := fmt.Sprintf("%s: evicting %s; the freed nodes are held for it until they leave", why, names)
	if a.Spec == nil {
		for node := range plan.Slots {
			return &Room{Nominate: node, Message: msg}, msg
		}
	}
	_, shapes := planner.Shapes(a.groups)
	ttl := 2 * m.scheduleTimeout(a.Spec)
	if reason == ReasonConsolidated {
		ttl += m.Consolidation.EvictionGrace
	}
	m.Reserve(a.Ref, lifecycle.ReservationRequest{
		Kind: lifecycle.ReservationPreempting, Priority: a.Priority, Created: a.Spec.Created,
		Plan: plan, Shapes: shapes, TTL: ttl,
	})
	m.Retry(a.Ref)
	m.fx.SetCondition(a.Spec, ReasonPreempting, msg)
	return &Room{Message: msg}, msg
}
