package gang

import (
	"context"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/lifecycle"
	"github.com/phalanx-sched/phalanx/internal/queue"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// running defines a running gang of n pods of cpuM each on node, bound at t.
func (e *env) runningGang(name string, prio int32, n int, cpuM int64, node string, bound time.Time) []*v1.Pod {
	pods := members(name, n, cpuM, prio)
	for _, p := range pods {
		boundAtTime(p, node, bound)
	}
	e.dir.gang(name, n, prio, pods...)
	return pods
}

func reservedNodes(r lifecycle.Reservation) []string {
	var out []string
	for n := range r.Slots {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func TestManagerMakeRoomPriority(t *testing.T) {
	old := t0.Add(-time.Hour)
	for _, tc := range []struct {
		name  string
		never bool
		// cluster builds the nodes (all full) with their running gangs.
		cluster     func(e *env) []fnode
		wantVictims []string // gang names; nil: no room is made
		wantPods    [][]string
		wantNodes   []string // the preemptor's reservation
		wantMsg     string   // when no room is made
	}{
		{
			name: "the lowest-priority gang that suffices",
			cluster: func(e *env) []fnode {
				return []fnode{
					{name: "a", pods: e.runningGang("lo", 1, 2, 2000, "a", old)},
					{name: "b", pods: e.runningGang("mid", 5, 2, 2000, "b", old)},
					{name: "c", pods: e.runningGang("top", 200, 2, 2000, "c", old)},
				}
			},
			wantVictims: []string{"lo"}, wantPods: [][]string{{"lo-0", "lo-1"}}, wantNodes: []string{"a"},
		},
		{
			name: "one whole gang rather than two of the same priority",
			cluster: func(e *env) []fnode {
				return []fnode{
					{name: "a", pods: e.runningGang("t1", 1, 1, 2000, "a", old)},
					{name: "b", pods: e.runningGang("t2", 1, 1, 2000, "b", old)},
					{name: "c", pods: e.runningGang("big", 1, 2, 2000, "c", old)},
				}
			},
			wantVictims: []string{"big"}, wantPods: [][]string{{"big-0", "big-1"}}, wantNodes: []string{"c"},
		},
		{
			name: "two lowest-priority gangs rather than one of higher priority",
			cluster: func(e *env) []fnode {
				return []fnode{
					{name: "a", pods: e.runningGang("t1", 1, 1, 2000, "a", old)},
					{name: "b", pods: e.runningGang("t2", 1, 1, 2000, "b", old)},
					{name: "c", pods: e.runningGang("mid", 5, 2, 2000, "c", old)},
				}
			},
			wantVictims: []string{"t1", "t2"}, wantPods: [][]string{{"t1-0"}, {"t2-0"}}, wantNodes: []string{"a", "b"},
		},
		{
			name:  "preemptionPolicy Never makes no room",
			never: true,
			cluster: func(e *env) []fnode {
				return []fnode{{name: "a", pods: e.runningGang("lo", 1, 2, 2000, "a", old)}}
			},
			wantMsg: "preemptionPolicy Never",
		},
		{
			name: "no lower-priority gang frees enough",
			cluster: func(e *env) []fnode {
				return []fnode{
					{name: "a", pods: e.runningGang("lo", 1, 1, 2000, "a", old)},
					{name: "b", pods: e.runningGang("top", 200, 2, 2000, "b", old)},
				}
			},
			wantMsg: "no lower-priority gang frees room for it",
		},
		{
			name: "a gang of equal priority is no victim",
			cluster: func(e *env) []fnode {
				return []fnode{{name: "a", pods: e.runningGang("peer", 100, 2, 2000, "a", old)}}
			},
			wantMsg: "no lower-priority gang frees room for it",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv()
			c := &cluster{nodes: tc.cluster(e)}
			pods := members("hi", 2, 2000, 100)
			if tc.never {
				never := v1.PreemptNever
				for _, p := range pods {
					p.Spec.PreemptionPolicy = &never
				}
			}
			spec := e.dir.gang("hi", 2, 100, pods...)
			e.dir.pending[spec.Ref] = pods
			a := e.attempt(spec, c)
			ctx := context.Background()
			if _, err := e.m.Plan(ctx, a); err == nil {
				t.Fatal("the preemptor fits without room")
			}
			room, msg := e.m.MakeRoom(ctx, a)

			if tc.wantVictims == nil {
				if room != nil {
					t.Fatalf("room made: %+v", room)
				}
				if !strings.Contains(msg, tc.wantMsg) {
					t.Fatalf("message %q, want %q", msg, tc.wantMsg)
				}
				if len(e.fx.evictions) != 0 || len(e.fx.evicted) != 0 {
					t.Fatalf("evicted %+v", e.fx.evictions)
				}
				if _, ok := e.m.ReservationOf(spec.Ref); ok {
					t.Fatal("a reservation without victims")
				}
				return
			}
			if room == nil || room.Nominate != "" || room.Message != msg {
				t.Fatalf("MakeRoom = %+v, %q; want room for a gang (no nomination)", room, msg)
			}
			var evicted [][]string
			for _, ev := range e.fx.evictions {
				if ev.reason != ReasonPreempted || !strings.Contains(ev.message, "evicted whole for gang ns/hi: priority 100 preempts lower priority") {
					t.Errorf("eviction %+v", ev)
				}
				evicted = append(evicted, ev.pods)
			}
			if !reflect.DeepEqual(evicted, tc.wantPods) {
				t.Fatalf("evicted pods %v, want %v", evicted, tc.wantPods)
			}
			for _, name := range tc.wantVictims {
				if cond, ok := e.fx.cond(ident.Ref{Namespace: "ns", Name: name}); !ok || cond.reason != ReasonPreempted {
					t.Errorf("victim %s: condition %+v, want Preempted", name, cond)
				}
			}
			if want := []string{ReasonPreempted + "//" + strconv.Itoa(len(tc.wantVictims))}; !reflect.DeepEqual(e.fx.evicted, want) {
				t.Errorf("Evicted %v, want %v", e.fx.evicted, want)
			}
			if cond, _ := e.fx.cond(spec.Ref); cond.reason != ReasonPreempting || cond.message != msg {
				t.Errorf("preemptor: condition %+v, want Preempting", cond)
			}
			r, ok := e.m.ReservationOf(spec.Ref)
			if !ok || r.Kind != lifecycle.ReservationPreempting || !reflect.DeepEqual(reservedNodes(r), tc.wantNodes) {
				t.Fatalf("reservation %+v %v, want Preempting on %v", r, ok, tc.wantNodes)
			}
			// The freed room is held against the victims' priority.
			other := ident.Ref{Namespace: "ns", Name: "other"}
			for _, n := range tc.wantNodes {
				if heldCPU(e.m.Lifecycle, n, other, 1) == 0 {
					t.Errorf("%s is not held against lower priority", n)
				}
			}
			if _, failed := e.m.Failed(spec.Ref); failed {
				t.Error("the preemptor's cached failure survives: its next member would not plan")
			}
			// The next cycle waits for the victims instead of evicting more.
			if room, msg := e.m.MakeRoom(ctx, e.attempt(spec, c)); room != nil || !strings.Contains(msg, "waiting for the gangs it preempted") {
				t.Fatalf("second MakeRoom = %+v, %q", room, msg)
			}
			if len(e.fx.evictions) != len(tc.wantPods) {
				t.Fatalf("evictions %d after a second MakeRoom, want %d", len(e.fx.evictions), len(tc.wantPods))
			}
		})
	}
}

// A pod outside gangs gets the node its victim frees as a nomination, and
// holds no reservation.
func TestManagerMakeRoomPlainPod(t *testing.T) {
	e := newEnv()
	old := t0.Add(-time.Hour)
	low := boundAtTime(mpod("low", 2000, 0), "a", old)
	c := &cluster{nodes: []fnode{
		{name: "a", pods: []*v1.Pod{low}},
		{name: "b", pods: e.runningGang("top", 200, 2, 1000, "b", old)},
	}}
	solo := mpod("solo", 2000, 100)
	room, msg := e.m.MakeRoom(context.Background(), &Attempt{Pod: solo, Priority: 100, Prober: c})
	if room == nil || room.Nominate != "a" {
		t.Fatalf("MakeRoom = %+v, %q; want nominated to a", room, msg)
	}
	if len(e.fx.evictions) != 1 || !reflect.DeepEqual(e.fx.evictions[0].pods, []string{"low"}) ||
		!strings.Contains(e.fx.evictions[0].message, "evicted whole for ns/solo") {
		t.Fatalf("evictions %+v, want the plain pod low", e.fx.evictions)
	}
	if len(e.fx.conds) != 0 {
		t.Fatalf("conditions %+v: a plain victim has no group object", e.fx.conds)
	}
	if len(e.m.Reservations()) != 0 || e.m.HoldsAnywhere() {
		t.Fatal("a plain pod holds a reservation")
	}
}

// reclaimEnv: queue "starved" (deserved 4 CPU, using nothing) and queue
// "greedy" (deserved 4 CPU, using 8 CPU in two 2×2-CPU gangs, old on a and
// young on b). The starved gang (2×2 CPU, same priority) fits nowhere.
func reclaimEnv(t *testing.T, oldBound, youngBound time.Time) (*env, *Attempt, *cluster) {
	t.Helper()
	e := newEnv()
	c := &cluster{nodes: []fnode{
		{name: "a", pods: withQueue("greedy", e.runningGang("old", 0, 2, 2000, "a", oldBound)...)},
		{name: "b", pods: withQueue("greedy", e.runningGang("young", 0, 2, 2000, "b", youngBound)...)},
	}}
	tree, problems := queue.Build([]queue.Queue{
		{Name: "starved", Open: true, Reclaimable: true},
		{Name: "greedy", Open: true, Reclaimable: true},
	})
	if len(problems) != 0 {
		t.Fatal(problems)
	}
	snap := &queue.Snapshot{
		Tree:      tree,
		Total:     cpu(8000),
		Allocated: map[string]resources.List{"starved": {}, "greedy": cpu(8000)},
		Pending:   map[string]resources.List{"starved": cpu(4000)},
		Deserved:  map[string]resources.List{"starved": cpu(4000), "greedy": cpu(4000)},
	}
	pods := withQueue("starved", members("s", 2, 2000, 0)...)
	spec := e.dir.gang("s", 2, 0, pods...)
	e.dir.pending[spec.Ref] = pods
	a := e.attempt(spec, c)
	a.Queue = NewAdmission(func() *queue.Snapshot { return snap })
	a.Queue.Queue, a.Queue.QueueOf, a.Queue.Admitted = "starved", queueOf, true
	a.Queue.Need, a.Queue.Reclaim, a.Queue.MinRuntime = cpu(4000), true, 10*time.Minute
	if _, err := e.m.Plan(context.Background(), a); err == nil {
		t.Fatal("the starved gang fits without room")
	}
	return e, a, c
}

// TestFailedPlanCostCountsTheCycle: a failed plan's recorded cost, which
// paces the failed gangs' wakes, counts the scheduling loop's write of the
// member's status beside the plan's own time (0 on the fake clock): a
// failed plan of a millisecond counted alone let failed gangs be retried
// on every pod that finished.
func TestFailedPlanCostCountsTheCycle(t *testing.T) {
	e, _, _ := reclaimEnv(t, t0.Add(-time.Hour), t0.Add(-time.Minute))
	refs, cost := e.m.FailedGangs()
	if len(refs) != 1 || cost != lifecycle.FailedCycleOverhead {
		t.Fatalf("failed gangs %v cost %v; want one costing %v", refs, cost, lifecycle.FailedCycleOverhead)
	}
}

// A queue below its deserved share evicts a whole gang of a queue above its
// own, one that ran at least MinRuntime.
func TestManagerMakeRoomReclaim(t *testing.T) {
	e, a, _ := reclaimEnv(t, t0.Add(-time.Hour), t0.Add(-time.Minute))
	room, msg := e.m.MakeRoom(context.Background(), a)
	if room == nil || room.Nominate != "" {
		t.Fatalf("MakeRoom = %+v, %q; want room", room, msg)
	}
	if len(e.fx.evictions) != 1 || !reflect.DeepEqual(e.fx.evictions[0].pods, []string{"old-0", "old-1"}) ||
		e.fx.evictions[0].reason != ReasonReclaimed {
		t.Fatalf("evictions %+v, want the old gang, Reclaimed (the young one ran less than MinRuntime)", e.fx.evictions)
	}
	if !strings.Contains(msg, "queue starved is below its deserved share") || !strings.Contains(msg, "ns/old (queue greedy)") {
		t.Fatalf("message %q", msg)
	}
	if cond, _ := e.fx.cond(ident.Ref{Namespace: "ns", Name: "old"}); cond.reason != ReasonReclaimed {
		t.Fatalf("victim condition %+v, want Reclaimed", cond)
	}
	if _, ok := e.fx.cond(ident.Ref{Namespace: "ns", Name: "young"}); ok {
		t.Fatal("the young gang was touched")
	}
	if !reflect.DeepEqual(e.fx.evicted, []string{"Reclaimed/starved/1"}) {
		t.Fatalf("Evicted %v, want Reclaimed for queue starved", e.fx.evicted)
	}
	if cond, _ := e.fx.cond(a.Ref); cond.reason != ReasonPreempting {
		t.Fatalf("reclaimer condition %+v, want Preempting", cond)
	}
	if r, ok := e.m.ReservationOf(a.Ref); !ok || r.Kind != lifecycle.ReservationPreempting || !reflect.DeepEqual(reservedNodes(r), []string{"a"}) {
		t.Fatalf("reservation %+v %v, want Preempting on a", r, ok)
	}
}

// A gang whose queue misses nothing (its plan failed on a stale snapshot:
// the accounting already counts the room freed) gets no reclaim note and
// no retry for a young gang's coming of age: it read "nothing to reclaim: "
// with no reason.
func TestManagerMakeRoomReclaimNothingNeeded(t *testing.T) {
	e, a, _ := reclaimEnv(t, t0.Add(-time.Hour), t0.Add(-time.Minute))
	a.Queue.Need = resources.List{}
	retries := e.fx.retried(a.Ref, WakeRetryAfter)
	room, msg := e.m.MakeRoom(context.Background(), a)
	if room != nil || strings.Contains(msg, "reclaim") || len(e.fx.evictions) != 0 {
		t.Fatalf("MakeRoom = %+v, %q, evictions %+v; want no room, no reclaim note, nothing evicted", room, msg, e.fx.evictions)
	}
	e.clk.Step(10 * time.Minute)
	if e.fx.retried(a.Ref, WakeRetryAfter) != retries {
		t.Fatal("retried when the young gang came of age, though reclaim had nothing to free")
	}
}

// Gangs younger than MinRuntime are not reclaimed; the gang is retried when
// the first of them comes of age, on the clock.
func TestManagerMakeRoomReclaimWaitsForMinRuntime(t *testing.T) {
	e, a, _ := reclaimEnv(t, t0.Add(-2*time.Minute), t0.Add(-time.Minute))
	room, msg := e.m.MakeRoom(context.Background(), a)
	if room != nil {
		t.Fatalf("MakeRoom = %+v", room)
	}
	if !strings.Contains(msg, "nothing to reclaim") || !strings.Contains(msg, "retrying in 8m0s") {
		t.Fatalf("message %q, want no reclaim and a retry in 8m", msg)
	}
	if len(e.fx.evictions) != 0 || len(e.fx.evicted) != 0 {
		t.Fatalf("evicted %+v", e.fx.evictions)
	}
	if _, failed := e.m.Failed(a.Ref); !failed {
		t.Fatal("the failure should stay cached until the retry")
	}
	retries := e.fx.retried(a.Ref, WakeRetryAfter)
	e.clk.Step(8*time.Minute - time.Second)
	if e.fx.retried(a.Ref, WakeRetryAfter) != retries {
		t.Fatal("retried before the oldest young gang reached MinRuntime")
	}
	e.clk.Step(time.Second)
	if e.fx.retried(a.Ref, WakeRetryAfter) != retries+1 || e.fx.woken(a.Ref) != 0 {
		t.Fatalf("retries %v, whole wakes %v; want the gang retried once through one member at MinRuntime", e.fx.retries, e.fx.wakes)
	}
	if _, failed := e.m.Failed(a.Ref); failed {
		t.Fatal("the retry left the cached failure: the woken member would be turned away")
	}
	// Now old enough: the next attempt reclaims it.
	e.m.Changed()
	_, err := e.m.Plan(context.Background(), a)
	if err == nil {
		t.Fatal("planned")
	}
	if room, msg := e.m.MakeRoom(context.Background(), a); room == nil {
		t.Fatalf("no reclaim after MinRuntime: %q", msg)
	}
	if len(e.fx.evictions) != 1 || !reflect.DeepEqual(e.fx.evictions[0].pods, []string{"old-0", "old-1"}) {
		t.Fatalf("evictions %+v, want the gang that came of age", e.fx.evictions)
	}
}

// TestManagerMakeRoomDisruptionMode: a victim gang whose disruptionMode is
// single (an upstream PodGroup's default) gives up members above its
// minimum one by one, and is evicted whole only when more is needed; with
// mode all it goes whole. It never runs below its minimum.
func TestManagerMakeRoomDisruptionMode(t *testing.T) {
	old := t0.Add(-time.Hour)
	for _, tc := range []struct {
		name       string
		mode       gangspec.DisruptionMode
		need       int // preemptor members of 2000m
		wantPods   []string
		wantWhole  bool
		wantMember string
	}{
		{name: "single: one member above the minimum", mode: gangspec.DisruptSingle, need: 1, wantPods: []string{"el-2"}, wantMember: "evicted alone"},
		{name: "single: more than the surplus takes the gang whole", mode: gangspec.DisruptSingle, need: 2, wantPods: []string{"el-0", "el-1", "el-2"}, wantWhole: true},
		{name: "all: whole for one member's room", mode: gangspec.DisruptAll, need: 1, wantPods: []string{"el-0", "el-1", "el-2"}, wantWhole: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv()
			// 3 members of 2000m on a full node; the gang needs 2. The
			// newest member is the one evicted alone.
			pods := members("el", 3, 2000, 1)
			for i, p := range pods {
				boundAtTime(p, "a", old.Add(time.Duration(i)*time.Minute))
			}
			victim := e.dir.gang("el", 2, 1, pods...)
			victim.Disruption = tc.mode
			c := &cluster{nodes: []fnode{{name: "a", pods: pods}}}
			hi := members("hi", tc.need, 2000, 100)
			spec := e.dir.gang("hi", tc.need, 100, hi...)
			e.dir.pending[spec.Ref] = hi
			a := e.attempt(spec, c)
			ctx := context.Background()
			if _, err := e.m.Plan(ctx, a); err == nil {
				t.Fatal("the preemptor fits without room")
			}
			if room, msg := e.m.MakeRoom(ctx, a); room == nil {
				t.Fatalf("no room made: %s", msg)
			}
			var evicted []string
			for _, ev := range e.fx.evictions {
				evicted = append(evicted, ev.pods...)
				if tc.wantMember != "" && !strings.Contains(ev.message, tc.wantMember) {
					t.Errorf("eviction message %q, want %q", ev.message, tc.wantMember)
				}
			}
			sort.Strings(evicted)
			if !reflect.DeepEqual(evicted, tc.wantPods) {
				t.Fatalf("evicted %v, want %v", evicted, tc.wantPods)
			}
			cond, ok := e.fx.cond(victim.Ref)
			if whole := ok && cond.reason == ReasonPreempted; whole != tc.wantWhole {
				t.Fatalf("victim condition %+v (set %v), want whole %v", cond, ok, tc.wantWhole)
			}
		})
	}
}

// A gang that would not fit even with every running pod gone gets no
// preemption or reclaim note: its message is the blocking reason alone.
func TestManagerMakeRoomSaysNothingWhenEvictionCannotHelp(t *testing.T) {
	old := t0.Add(-time.Hour)
	e := newEnv()
	c := &cluster{nodes: []fnode{
		{name: "a", pods: e.runningGang("lo", 1, 2, 2000, "a", old)},
		{name: "b", free: 1000},
	}}
	pods := members("huge", 2, 5000, 100) // no node holds 5 CPU, empty or not
	spec := e.dir.gang("huge", 2, 100, pods...)
	e.dir.pending[spec.Ref] = pods
	a := e.attempt(spec, c)
	ctx := context.Background()
	if _, err := e.m.Plan(ctx, a); err == nil {
		t.Fatal("the gang fits")
	}
	room, msg := e.m.MakeRoom(ctx, a)
	if room != nil || msg != "" {
		t.Fatalf("MakeRoom = %+v, %q; want no room and no note", room, msg)
	}
	if len(e.fx.evictions) != 0 {
		t.Fatalf("evicted %+v", e.fx.evictions)
	}
}
