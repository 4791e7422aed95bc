package tree

import (
	"math"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

func TestExceeds(t *testing.T) {
	mem := func(b int64) resources.List { return resources.List{v1.ResourceMemory: b} }
	for _, tc := range []struct {
		name                 string
		used, deserved, need resources.List
		want                 string
		wantOver             bool
	}{
		{"within", cpu(2000), cpu(6000), cpu(3000), "", false},
		{"exactly at deserved", cpu(2000), cpu(6000), cpu(4000), "", false},
		{"above in millicores", cpu(2000), cpu(6000), cpu(5000), "cpu 7000m of 6000m", true},
		{"nothing used yet", nil, cpu(1000), cpu(1500), "cpu 1500m of 1000m", true},
		{"memory as a quantity", mem(1 << 30), mem(1 << 30), mem(1 << 30), "memory 2Gi of 1Gi", true},
		{"a zero need is not checked", cpu(9000), cpu(1000), cpu(0), "", false},
		{"first resource by name", cpuGPU(0, 4), cpuGPU(0, 2), cpuGPU(1000, 1), "cpu 1000m of 0m", true},
		{"only the resource over is named", cpuGPU(0, 4), cpuGPU(8000, 2), cpuGPU(1000, 1), "nvidia.com/gpu 5 of 2", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, over := Exceeds(tc.used, tc.deserved, tc.need)
			if got != tc.want || over != tc.wantOver {
				t.Errorf("Exceeds = %q, %v; want %q, %v", got, over, tc.want, tc.wantOver)
			}
		})
	}
}

func TestSatAdd(t *testing.T) {
	for _, tc := range []struct {
		name       string
		a, b, want int64
	}{
		{"plain", 2, 3, 5},
		{"negative", -2, -3, -5},
		{"saturates up", math.MaxInt64 - 1, 2, math.MaxInt64},
		{"saturates down", math.MinInt64 + 1, -2, math.MinInt64},
		{"no overflow at the edge", math.MaxInt64, -1, math.MaxInt64 - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := satAdd(tc.a, tc.b); got != tc.want {
				t.Errorf("satAdd(%d, %d) = %d, want %d", tc.a, tc.b, got, tc.want)
			}
		})
	}
}

func TestCompareUnknownQueuesGoLast(t *testing.T) {
	tr := mustBuild(t, q("a", "", 1), q("b", "", 1))
	alloc := map[string]resources.List{"a": cpu(1000)}
	des := tr.Deserved(cpu(4000), map[string]resources.List{"a": cpu(4000), "b": cpu(4000)})
	for _, tc := range []struct {
		name string
		a, b string
		want int
	}{
		{"same queue", "a", "a", 0},
		{"both unknown", "x", "y", 0},
		{"unknown first", "x", "a", 1},
		{"unknown second", "a", "x", -1},
		{"lower share first", "b", "a", -1},
		{"higher share last", "a", "b", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tr.Compare(tc.a, tc.b, alloc, des); got != tc.want {
				t.Errorf("Compare(%s, %s) = %d, want %d", tc.a, tc.b, got, tc.want)
			}
		})
	}
}

func TestQueueErrorMessage(t *testing.T) {
	for _, tc := range []struct {
		err  QueueError
		want string
	}{
		{QueueError{Reason: "a queue needs a name"}, "queue with empty name: a queue needs a name"},
		{QueueError{Queue: "team-a", Reason: "weight -1 is invalid"}, `queue "team-a": weight -1 is invalid`},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

func TestUnknownQueueAccessors(t *testing.T) {
	tr := mustBuild(t, q("r", "", 1), q("a", "r", 1))
	if _, ok := tr.Get("nope"); ok {
		t.Error("Get found an unknown queue")
	}
	if tr.IsLeaf("nope") || tr.IsLeaf("r") || !tr.IsLeaf("a") {
		t.Error("IsLeaf: want only a to be a leaf")
	}
	if got := tr.Children("nope"); got != nil {
		t.Errorf("Children(nope) = %v, want nil", got)
	}
	if got := tr.Ancestors("nope"); got != nil {
		t.Errorf("Ancestors(nope) = %v, want nil", got)
	}
	if got := tr.Share("nope", nil, nil); !math.IsInf(got, 1) {
		t.Errorf("Share(nope) = %v, want +Inf", got)
	}
}

func TestDeservedRecentWithoutRecentIsDeserved(t *testing.T) {
	tr := mustBuild(t, q("a", "", 1), q("b", "", 3))
	total := cpuGPU(8000, 8)
	demand := map[string]resources.List{"a": cpuGPU(8000, 8), "b": cpuGPU(8000, 8)}
	plain := tr.Deserved(total, demand)
	if got := tr.DeservedRecent(total, demand, nil); !reflect.DeepEqual(got, plain) {
		t.Errorf("DeservedRecent(nil) = %v, want Deserved %v", got, plain)
	}
	hot := tr.DeservedRecent(total, demand, map[string]resources.List{"b": cpuGPU(0, 8)})
	if hot["b"][gpu] >= plain["b"][gpu] || hot["b"][v1.ResourceCPU] != plain["b"][v1.ResourceCPU] {
		t.Errorf("recent GPU use of b: deserved %v, want fewer GPUs than %v and the same CPU", hot["b"], plain["b"])
	}
}
