package coscheduling

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/internal/gang"
	"github.com/phalanx-sched/phalanx/internal/queue"
	"github.com/phalanx-sched/phalanx/internal/resources"
	"github.com/phalanx-sched/phalanx/plugins/runtime"
)

// running is every gang and plain pod on the nodes, as eviction candidates.
type running struct {
	victims []gang.Victim
	pods    map[string][]*v1.Pod
}

// makeRoom is the whole-gang answer to a pod (or gang) that fits nowhere:
//  1. priority: whole gangs of lower priority — of its own queue, or of
//     queues that stay at or above their deserved share without them;
//  2. reclaim: for a queue below its deserved share, whole gangs of
//     reclaimable queues above theirs that have run at least MinRuntime.
//
// Victims are chosen only if the planner, given the capacity they free,
// places the whole gang; the fewest, lowest priority first. The gang then
// holds the freed nodes (a reservation) until its victims are gone. A
// PriorityClass with preemptionPolicy Never makes no room.
func (pl *Coscheduling) makeRoom(ctx context.Context, state fwk.CycleState, pod *v1.Pod, cs *cycleState, statuses fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	if cs.spec != nil {
		if r, ok := pl.lc.ReservationOf(cs.ref); ok && r.Kind == gang.ReservationPreempting {
			return nil, fwk.NewStatus(fwk.Unschedulable, "waiting for the gangs it preempted to leave")
		}
	}
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == v1.PreemptNever {
		return nil, fwk.NewStatus(fwk.Unschedulable, "preemptionPolicy Never: no gang is preempted for this pod")
	}
	qc := runtime.ReadQueueCycle(state)
	pr := pl.probeForRoom(ctx, state, pod, cs, statuses, qc)
	if pr == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	all := pl.running(pr.infos, cs, qc)
	planFor := func(victims []gang.Victim) *gang.Plan {
		freed := gang.Freed(victims)
		room := func(i int) (resources.List, int64) {
			node := pr.nodes[i].Node.Name
			free, pods := pr.nodes[i].Free.Clone(), pr.nodes[i].FreePods
			held, heldPods := pl.lc.Held(node, cs.ref, cs.priority)
			free.Sub(held)
			if f, ok := freed[node]; ok {
				free.Add(f.Request)
				pods += f.Pods
			}
			return free, pods - heldPods
		}
		req, _ := pl.request(state, pr, room, true)
		plan, _ := gang.Place(req)
		return plan
	}
	fits := func(victims []gang.Victim) bool { return planFor(victims) != nil }

	if qc == nil || qc.Admitted {
		var cands []gang.Victim
		for _, v := range all.victims {
			if v.Priority >= cs.priority {
				continue
			}
			if qc != nil && v.Queue != qc.Queue && !qc.Snapshot().AboveDeserved(v.Queue, v.Total) {
				continue
			}
			cands = append(cands, v)
		}
		if chosen := gang.ChooseVictims(cands, fits); chosen != nil {
			why := fmt.Sprintf("priority %d preempts lower priority", cs.priority)
			return pl.evict(ctx, pod, cs, all, chosen, planFor(chosen), runtime.ReasonPreempted, why, "")
		}
	}
	if qc == nil || !qc.Reclaim {
		return nil, fwk.NewStatus(fwk.Unschedulable, "no lower-priority gang frees room for it")
	}
	return pl.reclaim(ctx, pod, cs, qc, all, planFor)
}

// reclaim evicts whole gangs of queues above their deserved share for a
// queue below its own.
func (pl *Coscheduling) reclaim(ctx context.Context, pod *v1.Pod, cs *cycleState, qc *runtime.QueueCycle, all *running, planFor func([]gang.Victim) *gang.Plan) (*fwk.PostFilterResult, *fwk.Status) {
	if r, over := qc.Snapshot().Exceeds(qc.Queue, qc.Need); over {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("nothing to reclaim: queue %s would go above its deserved share (%s)", qc.Queue, r))
	}
	now := pl.lc.Now()
	var cands []queue.Gang
	var youngest time.Duration
	byKey := make(map[string]gang.Victim, len(all.victims))
	for _, v := range all.victims {
		if v.Queue == qc.Queue {
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
	if len(picked) == 0 {
		if youngest > 0 {
			pl.retryAfter(cs, pod, youngest)
			why = fmt.Sprintf("%s; gangs that ran less than %v are not reclaimed (retrying in %v)", why, qc.MinRuntime, youngest.Round(time.Second))
		}
		return nil, fwk.NewStatus(fwk.Unschedulable, "nothing to reclaim: "+why)
	}
	if !qc.Admitted && !qc.Snapshot().AdmitsWithout(qc.Queue, qc.Need, picked) {
		return nil, fwk.NewStatus(fwk.Unschedulable, qc.Refusal)
	}
	chosen := make([]gang.Victim, 0, len(picked))
	for _, g := range picked {
		chosen = append(chosen, byKey[g.Key])
	}
	plan := planFor(chosen)
	if plan == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf(
			"nothing reclaimed: the gangs queue %s may reclaim (%s) free room on nodes where it still would not fit", qc.Queue, victimNames(chosen)))
	}
	runtime.Reclaims.WithLabelValues(qc.Queue).Add(float64(len(chosen)))
	why = fmt.Sprintf("queue %s is below its deserved share", qc.Queue)
	return pl.evict(ctx, pod, cs, all, chosen, plan, runtime.ReasonReclaimed, why, qc.Queue)
}

// retryAfter wakes the pod (or its gang) after d, planning afresh: a victim
// becomes old enough to reclaim without any cluster event.
func (pl *Coscheduling) retryAfter(cs *cycleState, pod *v1.Pod, d time.Duration) {
	ref := cs.ref
	pl.rt.Clock().AfterFunc(d, func() {
		if !ref.IsZero() {
			pl.lc.Retry(ref)
			pl.gangs.Wake(ref)
			return
		}
		pl.rt.Activate(map[string]*v1.Pod{pod.Namespace + "/" + pod.Name: pod})
	})
}

// probeForRoom is what the filters say about the pod (or the gang's member)
// on every node: a gang's planning probe of this cycle, a plain pod's
// filter statuses, or a fresh probe where the filters did not run (a queue's
// refusal ended the cycle before them). nil when nothing was learned this
// cycle (a cached failure) or nothing could free room.
func (pl *Coscheduling) probeForRoom(ctx context.Context, state fwk.CycleState, pod *v1.Pod, cs *cycleState, statuses fwk.NodeToStatusReader, qc *runtime.QueueCycle) *probe {
	if cs.spec != nil {
		if cs.planning == nil || cs.planning.probe == nil {
			return nil
		}
		return cs.planning.probe
	}
	infos, err := pl.h.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil
	}
	groups := gang.GroupPending(pod, nil, 1)
	if qc != nil && !qc.Admitted {
		return pl.probe(ctx, state, pod, groups, infos)
	}
	pr := &probe{groups: groups, infos: infos, nodes: make([]gang.NodeState, len(infos)), verdicts: make([]gang.Verdict, len(infos))}
	for i, ni := range infos {
		free, pods := freeOn(ni)
		pr.nodes[i] = gang.NodeState{Node: ni.Node(), Free: free, FreePods: pods}
		pr.verdicts[i] = verdictOf(statuses.Get(ni.Node().Name))
	}
	return pr
}

// running lists the gangs and plain pods on the nodes, other than the pod's
// own gang, with what each uses where.
func (pl *Coscheduling) running(infos []fwk.NodeInfo, cs *cycleState, qc *runtime.QueueCycle) *running {
	out := &running{pods: map[string][]*v1.Pod{}}
	index := map[string]int{}
	for _, ni := range infos {
		node := ni.Node().Name
		for _, pi := range ni.GetPods() {
			p := pi.GetPod()
			if p.DeletionTimestamp != nil {
				continue
			}
			ref, member := pl.gangs.RefOf(p)
			if member && ref == cs.ref {
				continue
			}
			key := p.Namespace + "/pod:" + p.Name
			if member {
				key = ref.String()
			} else {
				ref = gang.Ref{}
			}
			prio := pl.gangs.PriorityOf(p)
			i, ok := index[key]
			if !ok {
				i = len(out.victims)
				index[key] = i
				v := gang.Victim{Key: key, Ref: ref, Priority: prio, OnNode: map[string]gang.Usage{}, Total: resources.List{}}
				if qc != nil {
					v.Queue = qc.QueueOf(p)
				}
				out.victims = append(out.victims, v)
			}
			v := &out.victims[i]
			req := resources.PodRequests(p)
			u := v.OnNode[node]
			if u.Request == nil {
				u.Request = resources.List{}
			}
			u.Request.Add(req)
			u.Pods++
			v.OnNode[node] = u
			v.Total.Add(req)
			v.Members++
			v.Priority = max(v.Priority, prio)
			if t := boundAt(p); t.After(v.Started) {
				v.Started = t
			}
			out.pods[key] = append(out.pods[key], p)
		}
	}
	return out
}

// boundAt is when a pod was bound: its PodScheduled condition's transition,
// else its start or creation time.
func boundAt(p *v1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	if p.Status.StartTime != nil {
		return p.Status.StartTime.Time
	}
	return p.CreationTimestamp.Time
}

// evict deletes every pod of every victim, says why on the victims' pods and
// group objects, and lets the preemptor hold the room it frees: a gang
// reserves the planned nodes against pods of equal or lower priority; a plain
// pod is nominated to its node.
func (pl *Coscheduling) evict(ctx context.Context, pod *v1.Pod, cs *cycleState, all *running, victims []gang.Victim, plan *gang.Plan, reason, why, forQueue string) (*fwk.PostFilterResult, *fwk.Status) {
	who := pod.Namespace + "/" + pod.Name
	if cs.spec != nil {
		who = "gang " + cs.ref.String()
	}
	for _, v := range victims {
		msg := fmt.Sprintf("evicted whole for %s: %s", who, why)
		if v.Ref != (gang.Ref{}) {
			if spec, err := pl.gangs.Spec(v.Ref); err == nil {
				pl.gangs.Status.Set(spec, runtime.Condition{Status: metav1.ConditionFalse, Reason: reason, Message: msg})
			}
		}
		pl.gangs.Evict(ctx, all.pods[v.Key], reason, msg)
		runtime.Evictions.WithLabelValues(reason).Inc()
	}
	names := victimNames(victims)
	klog.FromContext(ctx).V(2).Info("Evicting whole gangs", "for", who, "reason", reason, "victims", names, "queue", forQueue)
	msg := fmt.Sprintf("%s: evicting %s; the freed nodes are held for it until they leave", why, names)
	if cs.spec == nil {
		for node := range plan.Slots {
			return &fwk.PostFilterResult{NominatingInfo: &fwk.NominatingInfo{NominatedNodeName: node, NominatingMode: fwk.ModeOverride}},
				fwk.NewStatus(fwk.Unschedulable, msg)
		}
	}
	_, shapes := gang.Shapes(cs.planning.probe.groups)
	pl.lc.Reserve(cs.ref, gang.ReservationRequest{
		Kind: gang.ReservationPreempting, Priority: cs.priority, Created: cs.spec.Created,
		Plan: plan, Shapes: shapes, TTL: 2 * pl.scheduleTimeout(cs.spec),
	})
	pl.lc.Retry(cs.ref)
	pl.gangs.Status.Set(cs.spec, runtime.Condition{Status: metav1.ConditionFalse, Reason: runtime.ReasonPreempting, Message: msg})
	return nil, fwk.NewStatus(fwk.Unschedulable, msg)
}

func victimNames(victims []gang.Victim) string {
	names := make([]string, len(victims))
	for i, v := range victims {
		names[i] = v.Key
		if v.Queue != "" {
			names[i] += " (queue " + v.Queue + ")"
		}
	}
	return strings.Join(names, ", ")
}
