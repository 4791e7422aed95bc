package ident

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/phalanx-sched/phalanx/internal/queue"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

func TestCompare(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// queue "starved" is further below its deserved share than "hot".
	byShare := func(a, b string) int {
		rank := map[string]int{"starved": 0, "hot": 1}
		return rank[a] - rank[b]
	}
	tests := []struct {
		name        string
		first, then Order
		queues      func(a, b string) int
		want        Decider
	}{
		{
			name:   "a partly placed gang goes before a queue further below its share",
			first:  Order{Queue: "hot", Incomplete: true, Created: t0.Add(time.Hour), Name: "planned"},
			then:   Order{Queue: "starved", Priority: 100, Created: t0, Name: "waiting"},
			queues: byShare,
			want:   ByIncomplete,
		},
		{
			name:  "a partly placed gang goes before a higher priority",
			first: Order{Incomplete: true, Created: t0.Add(time.Hour), Name: "planned"},
			then:  Order{Priority: 100, Created: t0, Name: "waiting"},
			want:  ByIncomplete,
		},
		{
			name:   "then the queue further below its share",
			first:  Order{Queue: "starved", Created: t0.Add(time.Hour), Name: "b"},
			then:   Order{Queue: "hot", Priority: 100, Created: t0, Name: "a"},
			queues: byShare,
			want:   ByQueue,
		},
		{
			name:   "queues are ignored without queue ordering",
			first:  Order{Queue: "hot", Priority: 100, Created: t0.Add(time.Hour), Name: "b"},
			then:   Order{Queue: "starved", Created: t0, Name: "a"},
			queues: nil,
			want:   ByPriority,
		},
		{
			name:   "both partly placed: queue share decides",
			first:  Order{Queue: "starved", Incomplete: true, Created: t0.Add(time.Hour), Name: "b"},
			then:   Order{Queue: "hot", Incomplete: true, Created: t0, Name: "a"},
			queues: byShare,
			want:   ByQueue,
		},
		{
			name:  "then the older gang",
			first: Order{Created: t0, Name: "b"},
			then:  Order{Created: t0.Add(time.Second), Name: "a"},
			want:  ByCreated,
		},
		{
			name:  "then the name",
			first: Order{Created: t0, Namespace: "ns", Name: "a"},
			then:  Order{Created: t0, Namespace: "ns", Name: "b"},
			want:  ByName,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, d := Compare(tt.first, tt.then, tt.queues)
			if c >= 0 || d != tt.want {
				t.Errorf("Compare(first, then) = %d by %v, want < 0 by %v", c, d, tt.want)
			}
			if c, d := Compare(tt.then, tt.first, tt.queues); c <= 0 || d != tt.want {
				t.Errorf("Compare(then, first) = %d by %v, want > 0 by %v", c, d, tt.want)
			}
		})
	}
}

// TestCompareAcrossQueuesAtEqualShare: two queues of equal weight, neither
// using anything, one waiting gang each. Their shares tie, so the gangs' own
// order decides, whatever the queues are named: priority, then submission
// time on the clock, then the documented tie-break (namespace, name). A queue
// order that fell back to queue names would put a-hot's gang first in every
// case.
func TestCompareAcrossQueuesAtEqualShare(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC))
	c := queue.NewCache()
	c.DecayUsage(0, clk)
	for _, name := range []string{"a-hot", "b-cold"} {
		c.SetQueue(queue.Queue{Name: name, Weight: 1, Open: true})
	}
	c.SetNode("n", resources.List{v1.ResourceCPU: 64000, "nvidia.com/gpu": 8}, true)
	eight := resources.List{v1.ResourceCPU: 8000, "nvidia.com/gpu": 8}
	c.SetPod("a-hot-0", queue.Charge{Queue: "a-hot", Request: eight})
	c.SetPod("b-cold-0", queue.Charge{Queue: "b-cold", Request: eight})
	snap := c.Snapshot(nil)
	if a, b := snap.Tree.Share("a-hot", snap.Allocated, snap.Deserved), snap.Tree.Share("b-cold", snap.Allocated, snap.Deserved); a != b {
		t.Fatalf("setup: queue shares differ (%v, %v)", a, b)
	}

	submitted := func(queueName, name string, prio int32) Order {
		o := Order{Queue: queueName, Priority: prio, Created: clk.Now(), Namespace: "team", Name: name}
		clk.Step(time.Second)
		return o
	}
	older := submitted("b-cold", "cold", 0)
	younger := submitted("a-hot", "hot", 0)
	lowPrio := submitted("b-cold", "cold-low", 0)
	highPrio := submitted("a-hot", "hot-high", 10)
	sameSecond := clk.Now()
	tieZ := Order{Queue: "a-hot", Created: sameSecond, Namespace: "team", Name: "z"}
	tieA := Order{Queue: "b-cold", Created: sameSecond, Namespace: "team", Name: "a"}

	for _, tc := range []struct {
		name        string
		first, then Order
		want        Decider
	}{
		{"the older gang of b-cold goes before a-hot's", older, younger, ByCreated},
		{"a higher priority in a-hot goes before an older gang of b-cold", highPrio, lowPrio, ByPriority},
		{"at the same second, the names of the gangs decide, not the queues'", tieA, tieZ, ByName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if c, d := Compare(tc.first, tc.then, snap.Compare); c >= 0 || d != tc.want {
				t.Errorf("Compare(first, then) = %d by %v, want < 0 by %v", c, d, tc.want)
			}
			if c, d := Compare(tc.then, tc.first, snap.Compare); c <= 0 || d != tc.want {
				t.Errorf("Compare(then, first) = %d by %v, want > 0 by %v", c, d, tc.want)
			}
		})
	}

	// The share decides first: a-hot once it runs a gang is behind b-cold,
	// whatever priority or age.
	c.SetPod("a-hot-run", queue.Charge{Queue: "a-hot", Request: eight, Placed: true})
	snap = c.Snapshot(nil)
	if cmp, d := Compare(highPrio, lowPrio, snap.Compare); cmp <= 0 || d != ByQueue {
		t.Errorf("a-hot above b-cold's share: Compare = %d by %v, want > 0 by ByQueue", cmp, d)
	}
}

// TestOldestMember: the member that stands for its gang is the
// oldest, then the first by name, in any list order.
func TestOldestMember(t *testing.T) {
	at := func(name string, sec int64) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.Unix(sec, 0)}}
	}
	a, b, c := at("w-2", 10), at("w-1", 10), at("w-0", 20)
	for _, pods := range [][]*v1.Pod{{a, b, c}, {c, b, a}, {b, c, a}} {
		if got := Oldest(pods); got != b {
			t.Fatalf("Oldest = %s, want w-1 (oldest, then by name)", got.Name)
		}
	}
	if Oldest(nil) != nil {
		t.Fatal("no members: no representative")
	}
}
