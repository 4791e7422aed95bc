package preempt

import (
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Running is every gang and plain pod on some nodes, as eviction candidates.
type Running struct {
	Victims []Victim
	// Pods are each victim's pods, by its key.
	Pods map[string][]*v1.Pod
}

// Census is what listing the running victims reads of the scheduler's gangs.
type Census struct {
	RefOf      func(*v1.Pod) (ident.Ref, bool)
	PriorityOf func(*v1.Pod) int32
	// QueueOf is a pod's queue (nil: no queues).
	QueueOf func(*v1.Pod) string
	Demand  func(*v1.Pod) resources.List
	// Single gives the minimum of a gang whose disruptionMode is single
	// (false: the gang is evicted whole or not at all).
	Single func(ident.Ref) (int, bool)
}

// Running lists the gangs and plain pods on the nodes (podsOn(i) runs on
// nodes[i]), other than the gang except, with what each uses where.
func (c Census) Running(nodes []string, podsOn func(i int) []*v1.Pod, except ident.Ref) *Running {
	out := &Running{Pods: map[string][]*v1.Pod{}}
	index := map[string]int{}
	for i, node := range nodes {
		for _, p := range podsOn(i) {
			if p.DeletionTimestamp != nil {
				continue
			}
			ref, member := c.RefOf(p)
			if member && ref == except {
				continue
			}
			key := p.Namespace + "/pod:" + p.Name
			if member {
				key = ref.String()
			} else {
				ref = ident.Ref{}
			}
			prio := c.PriorityOf(p)
			i, ok := index[key]
			if !ok {
				i = len(out.Victims)
				index[key] = i
				v := Victim{Key: key, Ref: ref, Priority: prio, OnNode: map[string]Usage{}, Total: resources.List{}}
				if c.QueueOf != nil {
					v.Queue = c.QueueOf(p)
				}
				out.Victims = append(out.Victims, v)
			}
			v := &out.Victims[i]
			req := c.Demand(p)
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
			if t := BoundAt(p); t.After(v.Started) {
				v.Started = t
			}
			out.Pods[key] = append(out.Pods[key], p)
		}
	}
	c.addSurplus(out)
	return out
}

// addSurplus adds, for each running gang whose disruptionMode is single, a
// one-member victim per member above its minimum (the newest first): such a
// member may be evicted alone; the gang is never left below its minimum.
func (c Census) addSurplus(out *Running) {
	n := len(out.Victims)
	for i := 0; i < n; i++ {
		v := out.Victims[i]
		if v.Ref.IsZero() {
			continue
		}
		minMember, single := c.Single(v.Ref)
		if !single || v.Members <= minMember {
			continue
		}
		pods := append([]*v1.Pod(nil), out.Pods[v.Key]...)
		sort.SliceStable(pods, func(a, b int) bool { return BoundAt(pods[a]).After(BoundAt(pods[b])) })
		for _, p := range pods[:v.Members-minMember] {
			req := c.Demand(p)
			key := v.Key + "/member:" + p.Name
			out.Victims = append(out.Victims, Victim{
				Key: key, Ref: v.Ref, Of: v.Key, Queue: v.Queue, Priority: v.Priority, Members: 1,
				Started: BoundAt(p), OnNode: map[string]Usage{p.Spec.NodeName: {Request: req, Pods: 1}}, Total: req.Clone(),
			})
			out.Pods[key] = []*v1.Pod{p}
		}
	}
}

// BoundAt is when a pod was bound: its PodScheduled condition's transition,
// else its start or creation time.
func BoundAt(p *v1.Pod) time.Time {
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

// Names lists the victims' keys, each with its queue, for messages.
func Names(victims []Victim) string {
	names := make([]string, len(victims))
	for i, v := range victims {
		names[i] = v.Key
		if v.Queue != "" {
			names[i] += " (queue " + v.Queue + ")"
		}
	}
	return strings.Join(names, ", ")
}
