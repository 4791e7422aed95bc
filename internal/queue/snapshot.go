package queue

import (
	"fmt"
	"sort"

	"github.com/phalanx-sched/phalanx/internal/queue/tree"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// Snapshot is the queue state one decision reads: the tree, the schedulable
// cluster total, and per leaf queue what is allocated (placed pods plus
// capacity that plans hold), pending and deserved. It is not modified after
// Cache.Snapshot returns it.
type Snapshot struct {
	Tree     *tree.Tree
	Problems []tree.QueueError
	Total    resources.List
	// Allocated, Pending and Deserved are keyed by leaf queue (Deserved by
	// every queue of the tree).
	Allocated, Pending, Deserved map[string]resources.List
	// Stalled is the part of Pending, by leaf queue, that cannot start on
	// the room free now (gangs whose last plan failed, nothing changed
	// since). It counts as demand for deserved shares, but a queue waiting
	// only with it does not keep other queues from borrowing idle room.
	Stalled map[string]resources.List
	// Blocked is the part of Pending, by leaf queue, that was refused
	// admission and waits for the next change. A queue that waits only
	// with it goes after the queues before it in order: of two queues whose
	// gangs each exceed their deserved share, the first in order starts
	// rather than neither.
	Blocked map[string]resources.List
	// Recent is each leaf queue's decayed recent usage, nil when decayed
	// fair share is off (Cache.DecayUsage). Deserved shares above
	// guarantees and queue order already count it.
	Recent map[string]resources.List
	// Version is the cache's version the snapshot was taken at.
	Version uint64
	// orderUse is the use queue order compares (orderUse), nil without
	// Recent.
	orderUse map[string]resources.List
}

// Admit says whether a gang (or plain pod) of leaf queue q asking for need may
// start: the queue exists and is valid, is a leaf, its capability chain and
// other queues' guarantees allow it (Tree.Admit), and — work-conserving
// fairness — it goes above its deserved share only while no other queue waits
// below its own with work that could start now. reason explains a refusal.
// Refused work of another queue counts when that queue goes before q in
// queue order alone; AdmitInOrder knows the asking gang's place.
func (s *Snapshot) Admit(q string, need resources.List) (bool, string) {
	return s.AdmitInOrder(q, need, nil)
}

// AdmitInOrder is Admit for a request whose place in the order of gangs is
// known: ahead(other) reports whether work of queue other that was refused
// admission goes before the request (gang.Compare, queue share first, then
// priority and submission time). Of two queues whose gangs each exceed
// their deserved share, the gang first in that order starts. nil ahead
// compares the queues alone (Compare).
func (s *Snapshot) AdmitInOrder(q string, need resources.List, ahead func(other string) bool) (bool, string) {
	if _, ok := s.Tree.Get(q); !ok {
		for _, p := range s.Problems {
			if p.Queue == q {
				return false, fmt.Sprintf("queue %s is invalid: %s", q, p.Reason)
			}
		}
		return false, fmt.Sprintf("queue %s does not exist", q)
	}
	if ok, reason := s.Tree.Admit(q, need, s.Total, s.Allocated); !ok {
		return false, reason
	}
	if r, over := s.Exceeds(q, need); over {
		if ahead == nil {
			ahead = func(other string) bool { return s.Compare(other, q) < 0 }
		}
		if other := s.starvedOther(q, ahead); other != "" {
			return false, fmt.Sprintf("queue %s would go above its deserved share (%s) while queue %s waits below its share", q, r, other)
		}
	}
	return true, ""
}

// Exceeds reports the first resource of need for which queue q's allocation
// plus need would go above its deserved share, rendered for messages.
func (s *Snapshot) Exceeds(q string, need resources.List) (string, bool) {
	return tree.Exceeds(s.Allocated[q], s.Deserved[q], need)
}

// starvedOther returns a leaf queue other than q that has pending demand,
// beyond what is stalled, and is below its deserved share on a resource it
// asks for; a queue whose waiting work was all refused admission counts
// only when that work goes before q's (ahead). Of several, the one first in
// queue order is named (then by name). A queue that admits nothing (closed, or under a closed parent)
// waits for no share; a queue whose waiting gangs all fail to fit the room
// free now would leave it idle (its gangs reserve nodes after a while, and
// reclaim brings it up to its share).
func (s *Snapshot) starvedOther(q string, ahead func(other string) bool) string {
	var names []string
	for other, pending := range s.Pending {
		if other == q || pending.IsZero() || !s.Tree.IsLeaf(other) || !s.open(other) {
			continue
		}
		starved, free := false, false
		for r, v := range pending {
			waiting := v - s.Stalled[other][r]
			if waiting > 0 && s.Allocated[other][r] < s.Deserved[other][r] {
				starved = true
			}
			if waiting-s.Blocked[other][r] > 0 {
				free = true // work not refused yet
			}
		}
		if starved && (free || ahead(other)) {
			names = append(names, other)
		}
	}
	if len(names) == 0 {
		return ""
	}
	sort.Slice(names, func(i, j int) bool {
		if c := s.Compare(names[i], names[j]); c != 0 {
			return c < 0
		}
		return names[i] < names[j]
	})
	return names[0]
}

// open reports whether leaf queue q and all its ancestors are Open.
func (s *Snapshot) open(q string) bool {
	for _, name := range append([]string{q}, s.Tree.Ancestors(q)...) {
		if qq, ok := s.Tree.Get(name); !ok || !qq.Open {
			return false
		}
	}
	return true
}

// Compare orders two queues for scheduling (Tree.Compare on this snapshot;
// with decayed fair share a queue's use is the larger of its allocation and
// its recent usage).
func (s *Snapshot) Compare(a, b string) int {
	use := s.Allocated
	if s.orderUse != nil {
		use = s.orderUse
	}
	return s.Tree.Compare(a, b, use, s.Deserved)
}

// Reclaim picks whole gangs that queue starved may reclaim to get need
// (Tree.PlanReclaim on this snapshot).
func (s *Snapshot) Reclaim(starved string, need resources.List, running []Gang) ([]Gang, string) {
	gangs := make([]tree.Gang, len(running))
	for i, g := range running {
		gangs[i] = tree.Gang(g)
	}
	picked, why := s.Tree.PlanReclaim(starved, need, gangs, s.Allocated, s.Deserved)
	if picked == nil {
		return nil, why
	}
	out := make([]Gang, len(picked))
	for i, g := range picked {
		out[i] = Gang(g)
	}
	return out, why
}

// AdmitsWithout reports whether queue q admits need once the victims' usage
// is given back: a queue refused by an ancestor's capability that a sibling
// above its deserved share fills is admitted after reclaim.
func (s *Snapshot) AdmitsWithout(q string, need resources.List, victims []Gang) bool {
	after := make(map[string]resources.List, len(s.Allocated))
	for name, l := range s.Allocated {
		after[name] = l.Clone()
	}
	for _, v := range victims {
		if after[v.Queue] != nil {
			after[v.Queue].Sub(v.Usage)
		}
	}
	ok, _ := s.Tree.Admit(q, need, s.Total, after)
	return ok
}

// AboveDeserved reports whether leaf queue q, once it gives up use, is still
// at or above its deserved share in every resource of use that it is above in
// now — the condition under which another queue's gang may take from it by
// priority. Queues that are not reclaimable never qualify.
func (s *Snapshot) AboveDeserved(q string, use resources.List) bool {
	qq, ok := s.Tree.Get(q)
	if !ok || !qq.Reclaimable {
		return false
	}
	usage := s.Tree.Usage(s.Allocated)
	over := false
	for r, v := range use {
		if v <= 0 {
			continue
		}
		after := usage[q][r] - v
		if after < qq.Guarantee[r] {
			return false
		}
		if usage[q][r] > s.Deserved[q][r] {
			if after < s.Deserved[q][r] {
				return false
			}
			over = true
		}
	}
	return over
}

// QueueStatus is what Queue.status shows of one queue.
type QueueStatus struct {
	Allocated, Deserved resources.List
	// Recent is the decayed recent usage, summed up the tree (nil when
	// decayed fair share is off).
	Recent resources.List
	// Invalid says why the scheduler ignores the queue ("" when valid).
	Invalid string
}

// Status returns the status of every queue the snapshot knows: allocation
// summed up the tree, deserved shares, and why invalid queues are ignored.
func (s *Snapshot) Status() map[string]QueueStatus {
	usage := s.Tree.Usage(s.Allocated)
	var recent map[string]resources.List
	if s.Recent != nil {
		recent = s.Tree.Usage(s.Recent)
	}
	out := map[string]QueueStatus{}
	for _, n := range s.Tree.Names() {
		out[n] = QueueStatus{Allocated: usage[n], Deserved: s.Deserved[n], Recent: recent[n]}
	}
	for _, p := range s.Problems {
		if st := out[p.Queue]; st.Invalid == "" {
			st.Invalid = p.Reason
			out[p.Queue] = st
		}
	}
	return out
}

// Curable reports whether reclaim could cure a refusal of need in leaf
// queue q: the queue and its ancestors are open, need fits the queue's own
// capability and stays within its deserved share — so only an ancestor's
// capability, which queues above their share fill, can stand in the way.
func (s *Snapshot) Curable(q string, need resources.List) bool {
	if !s.Tree.IsLeaf(q) || !s.open(q) {
		return false
	}
	own, _ := s.Tree.Get(q)
	for r, v := range need {
		if c, capped := own.Capability[r]; capped && v > 0 && s.Allocated[q][r]+v > c {
			return false
		}
	}
	_, over := s.Exceeds(q, need)
	return !over
}
