package admission

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/queue"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// TestSnapshotHeld: capacity a gang's plan holds counts as allocated to the
// gang's queue (its oldest member's, where the group names none); a held
// gang the directory no longer knows counts nowhere.
func TestSnapshotHeld(t *testing.T) {
	f := newFixture(t, Options{})
	labelled := f.addGang("ns", "labelled", inQueue("g"), bound(pod("ns", "l0", 1000, 0, nil), "n1"))
	byMember := f.addGang("ns", "by-member",
		nil, pod("ns", "new", 1000, 5, inQueue("newer")), pod("ns", "old", 1000, 1, inQueue("older")))
	f.holds.held[labelled] = resources.List{v1.ResourceCPU: 3000}
	f.holds.held[byMember] = resources.List{v1.ResourceCPU: 500}
	f.holds.held[ident.Ref{Namespace: "ns", Name: "gone"}] = resources.List{v1.ResourceCPU: 7000}

	s := f.q.Snapshot()
	want := map[string]int64{"g": 4000, "older": 500, "newer": 0}
	for q, w := range want {
		if got := cpu(s.Allocated, q); got != w {
			t.Errorf("allocated to %s %dm, want %dm", q, got, w)
		}
	}
	var sum int64
	for q := range s.Allocated {
		sum += cpu(s.Allocated, q)
	}
	if sum != 4500 {
		t.Errorf("allocated %v in all, want 4500m (the unknown gang's hold counts nowhere)", s.Allocated)
	}
}

// TestSnapshotStalledAndBlocked: Stalled sums the pending members of the
// stalled gangs by queue, Blocked those of the refused gangs and the
// refused plain pods; bound members do not count.
func TestSnapshotStalledAndBlocked(t *testing.T) {
	f := newFixture(t, Options{})
	stalled := f.addGang("ns", "stalled", inQueue("s"),
		pod("ns", "s0", 1000, 0, nil), pod("ns", "s1", 2000, 1, nil), bound(pod("ns", "s2", 4000, 2, nil), "n1"))
	refused := f.addGang("ns", "refused", inQueue("r"), pod("ns", "r0", 300, 0, nil))
	done := f.addGang("ns", "done", inQueue("r"), bound(pod("ns", "d0", 5000, 0, nil), "n1"))
	f.holds.stalled = []ident.Ref{stalled, {Namespace: "ns", Name: "unknown"}}
	f.q.Block(refused, nil)
	f.q.Block(done, nil)
	f.q.Block(ident.Ref{}, pod("ns", "plain", 50, 0, inQueue("p")))

	s := f.q.Snapshot()
	for _, tc := range []struct {
		what string
		m    map[string]resources.List
		q    string
		want int64
	}{
		{"stalled", s.Stalled, "s", 3000},
		{"blocked gang", s.Blocked, "r", 300},
		{"blocked plain pod", s.Blocked, "p", 50},
		{"stalled in a refused queue", s.Stalled, "r", 0},
		{"blocked in a stalled queue", s.Blocked, "s", 0},
	} {
		if got := cpu(tc.m, tc.q); got != tc.want {
			t.Errorf("%s: %s %dm, want %dm", tc.what, tc.q, got, tc.want)
		}
	}
	if len(s.Stalled) != 1 || len(s.Blocked) != 2 {
		t.Errorf("stalled %v, blocked %v: want only s, and r and p", s.Stalled, s.Blocked)
	}
}

// TestSnapshotWanting: a request being decided raises its queue's demand
// for deserved shares.
func TestSnapshotWanting(t *testing.T) {
	f := newFixture(t, Options{})
	f.addQueue("a")
	f.addQueue("b")
	f.addNode("n1", 8000)
	f.addPod(pod("ns", "b", 8000, 0, inQueue("b")))
	without := cpu(f.q.Snapshot().Deserved, "a")
	with := cpu(f.q.Snapshot(queue.Want{Queue: "a", Need: resources.List{v1.ResourceCPU: 4000}}).Deserved, "a")
	if without != 0 || with != 4000 {
		t.Fatalf("a deserves %dm without its request, %dm with it; want 0 and 4000m", without, with)
	}
}

// TestOrdering: the sort's snapshot is reused while the cache is unchanged
// or younger than orderingMaxAge, and taken again otherwise; with decayed
// fair share an unchanged cache's is reused for orderingMaxAgeDecaying.
func TestOrdering(t *testing.T) {
	age := func(q *Queues, by time.Duration) {
		q.mu.Lock()
		q.orderingAt = time.Now().Add(-by)
		q.mu.Unlock()
	}
	f := newFixture(t, Options{})
	first := f.q.Ordering()
	if f.q.Ordering() != first {
		t.Fatal("an unchanged cache's ordering was taken again")
	}
	age(f.q, time.Hour)
	if f.q.Ordering() != first {
		t.Fatal("an unchanged cache's ordering was taken again for its age")
	}
	// Dated ahead, so that a slow run does not age it past orderingMaxAge.
	age(f.q, -time.Minute)
	f.addPod(pod("ns", "p", 1000, 0, inQueue("a")))
	if f.q.Ordering() != first {
		t.Fatal("a young ordering was taken again")
	}
	age(f.q, time.Hour)
	next := f.q.Ordering()
	if next == first || cpu(next.Pending, "a") != 1000 {
		t.Fatalf("a changed cache's old ordering was reused (pending %v)", next.Pending)
	}

	f = newFixture(t, Options{UsageHalfLife: time.Hour})
	first = f.q.Ordering()
	age(f.q, 2*orderingMaxAge)
	if f.q.Ordering() != first {
		t.Fatal("decaying: an unchanged cache's ordering was taken again within orderingMaxAgeDecaying")
	}
	age(f.q, orderingMaxAgeDecaying+time.Second)
	if f.q.Ordering() == first {
		t.Fatal("decaying: an unchanged cache's ordering was reused past orderingMaxAgeDecaying")
	}
}
