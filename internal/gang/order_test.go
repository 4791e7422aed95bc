package gang

import (
	"testing"
	"time"
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
