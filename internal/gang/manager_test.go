package gang

import (
	"context"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/lifecycle"
	"github.com/phalanx-sched/phalanx/internal/gang/planner"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// plannedCPU is what the gang's plan holds per node (as other gangs see it).
func plannedCPU(lc *lifecycle.Lifecycle, nodes []string) map[string]int64 {
	out := map[string]int64{}
	for _, n := range nodes {
		if c := heldCPU(lc, n, ident.Ref{Name: "someone-else"}, 0); c > 0 {
			out[n] = c
		}
	}
	return out
}

func TestManagerPlan(t *testing.T) {
	for _, tc := range []struct {
		name    string
		min     int
		pending int   // members waiting (the cycle's pod first)
		cpuM    int64 // per member
		nodes   []fnode
		refused string // the queue refuses the gang with this reason
		check   func(t *testing.T, e *env, spec *gangspec.Spec, c *cluster, node string, err error)
	}{
		{
			name: "a gang that fits is committed and steered", min: 3, pending: 3, cpuM: 1000,
			nodes: []fnode{{name: "a", free: 2000}, {name: "b", free: 1000}, {name: "c", free: 500}},
			check: func(t *testing.T, e *env, spec *gangspec.Spec, c *cluster, node string, err error) {
				if err != nil {
					t.Fatalf("Plan failed: %v", err)
				}
				if got := e.m.Phase(spec.Ref); got != lifecycle.PhasePlanned {
					t.Fatalf("phase %s, want Planned", got)
				}
				if node != "a" {
					t.Fatalf("the cycle's member is steered to %q, want a (first planned node)", node)
				}
				if got := plannedCPU(e.m.Lifecycle, []string{"a", "b", "c"}); !reflect.DeepEqual(got, map[string]int64{"a": 2000, "b": 1000}) {
					t.Fatalf("plan holds %v, want a=2000 b=1000", got)
				}
				if e.fx.woken(spec.Ref) != 1 {
					t.Fatalf("wakes %v, want the gang woken once", e.fx.wakes)
				}
				if !reflect.DeepEqual(e.fx.observed, []string{"planned"}) {
					t.Fatalf("observed %v, want [planned]", e.fx.observed)
				}
				if r := e.m.Route(spec.Ref, spec, planner.ShapeKey(e.dir.pending[spec.Ref][1])); r.Node != "a" {
					t.Fatalf("Route for a sibling = %+v, want steered to a", r)
				}
				if rem := e.m.Remaining(spec.Ref); rem != 30*time.Second {
					t.Fatalf("plan lasts %v, want the manager's 30s timeout", rem)
				}
			},
		},
		{
			name: "a gang that does not fit fails, names the shortfall and caches it", min: 3, pending: 3, cpuM: 2000,
			nodes: []fnode{{name: "a", free: 2000}, {name: "b", free: 2000}, {name: "c", free: 1000}},
			check: func(t *testing.T, e *env, spec *gangspec.Spec, c *cluster, node string, err error) {
				if err == nil {
					t.Fatalf("Plan succeeded on %q", node)
				}
				msg := err.Error()
				for _, want := range []string{"no placement for 3 more members", "minMember 3", "at most 2 fit", "1 of 3 nodes fail filters", "NodeResourcesFit: Insufficient cpu"} {
					if !strings.Contains(msg, want) {
						t.Errorf("message %q does not say %q", msg, want)
					}
				}
				if e.m.Phase(spec.Ref) != lifecycle.PhaseIdle || e.m.HoldsAnywhere() {
					t.Fatalf("a failed plan holds something: phase %s", e.m.Phase(spec.Ref))
				}
				cond, ok := e.fx.cond(spec.Ref)
				if !ok || cond.reason != ReasonUnschedulable || cond.message != msg {
					t.Fatalf("condition %+v, want Unschedulable with the message", cond)
				}
				r := e.m.Route(spec.Ref, spec, planner.ShapeKey(e.dir.pending[spec.Ref][1]))
				if r.Plan || r.Node != "" || r.Refusal != msg {
					t.Fatalf("Route after the failure = %+v, want the cached refusal", r)
				}
				if e.m.Representative(spec.Ref) != "" {
					// Not observed as a member: the representative is unknown.
					t.Fatalf("representative of an unobserved member")
				}
				if !reflect.DeepEqual(e.fx.observed, []string{"unschedulable"}) || e.fx.woken(spec.Ref) != 0 {
					t.Fatalf("observed %v wakes %v, want [unschedulable] and no wake", e.fx.observed, e.fx.wakes)
				}
				// A capacity change voids the cached failure.
				e.m.Changed()
				if r := e.m.Route(spec.Ref, spec, ""); !r.Plan {
					t.Fatalf("Route after a capacity change = %+v, want Plan", r)
				}
			},
		},
		{
			name: "too few pending members: MembersPending, nothing probed", min: 3, pending: 2, cpuM: 1000,
			nodes: []fnode{{name: "a", free: 8000}},
			check: func(t *testing.T, e *env, spec *gangspec.Spec, c *cluster, node string, err error) {
				if err == nil {
					t.Fatalf("Plan succeeded on %q", node)
				}
				if !strings.Contains(err.Error(), "0 members are placed and 2 wait, fewer than minMember 3") {
					t.Fatalf("message %q", err)
				}
				cond, _ := e.fx.cond(spec.Ref)
				if cond.reason != ReasonMembersPending {
					t.Fatalf("condition %+v, want MembersPending", cond)
				}
				if c.probes != 0 {
					t.Fatalf("probed %d times, want 0", c.probes)
				}
				if e.m.Phase(spec.Ref) != lifecycle.PhaseIdle || e.m.HoldsAnywhere() {
					t.Fatal("a gang short of members holds something")
				}
				if _, failed := e.m.Failed(spec.Ref); failed {
					t.Fatal("MembersPending is not a cached plan failure")
				}
			},
		},
		{
			name: "a queue refusal plans nothing", min: 2, pending: 2, cpuM: 1000,
			nodes:   []fnode{{name: "a", free: 8000}},
			refused: "queue q: cpu 10 of capability 8",
			check: func(t *testing.T, e *env, spec *gangspec.Spec, c *cluster, node string, err error) {
				if err == nil || err.Error() != "queue q: cpu 10 of capability 8" {
					t.Fatalf("Plan = %q, %v; want the queue's refusal", node, err)
				}
				if e.m.Phase(spec.Ref) != lifecycle.PhaseIdle || e.m.HoldsAnywhere() {
					t.Fatal("a refused gang holds something")
				}
				if _, failed := e.m.Failed(spec.Ref); failed {
					t.Fatal("a queue refusal is not a cached plan failure")
				}
				if e.fx.calls() != 0 {
					t.Fatalf("effects %+v, want none", e.fx)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv()
			pods := members("m", tc.pending, tc.cpuM, 10)
			spec := e.dir.gang("g", tc.min, 10, pods...)
			e.dir.pending[spec.Ref] = pods
			c := &cluster{nodes: tc.nodes}
			a := e.attempt(spec, c)
			if tc.refused != "" {
				a.Queue = &Admission{Queue: "q", Admitted: false, Refusal: tc.refused}
			}
			node, err := e.m.Plan(context.Background(), a)
			tc.check(t, e, spec, c, node, err)
		})
	}
}

// A required topology level keeps the whole plan inside one domain, even
// where a split plan would fit; without one the planner may split.
func TestManagerPlanRequiredTopology(t *testing.T) {
	nodes := []fnode{
		{name: "a1", free: 3000, rack: "r1"},
		{name: "b1", free: 2000, rack: "r2"}, {name: "b2", free: 2000, rack: "r2"},
	}
	for _, tc := range []struct {
		name     string
		required string
		free     []fnode
		want     map[string]int64 // nil: no plan
		wantMsg  []string
	}{
		{name: "no constraint: split across racks", free: nodes, want: map[string]int64{"a1": 3000, "b1": 1000}},
		{name: "required rack: one rack", required: "rack", free: nodes, want: map[string]int64{"b1": 2000, "b2": 2000}},
		{
			name: "required rack: no rack is big enough", required: "rack",
			free:    []fnode{{name: "a1", free: 3000, rack: "r1"}, {name: "b1", free: 2000, rack: "r2"}},
			wantMsg: []string{"with topology required rack", "at most 3 fit in rack r1", "tried r1 (room for 3), r2 (room for 2)"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv()
			pods := members("m", 4, 1000, 0)
			spec := e.dir.gang("g", 4, 0, pods...)
			e.dir.pending[spec.Ref] = pods
			c := &cluster{nodes: tc.free}
			a := e.attempt(spec, c)
			a.Topology = &Constraint{Tree: c.topology(), Required: tc.required}
			_, err := e.m.Plan(context.Background(), a)
			if tc.want == nil {
				if err == nil {
					t.Fatal("planned across racks")
				}
				for _, w := range tc.wantMsg {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("message %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := plannedCPU(e.m.Lifecycle, []string{"a1", "b1", "b2"}); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("plan %v, want %v", got, tc.want)
			}
		})
	}
}

// A gang that keeps failing reserves, once ReserveAfter has passed on the
// clock, the nodes it would take once pods of equal or lower priority leave:
// held against equal and lower priority, not against higher.
func TestManagerStarvedReservation(t *testing.T) {
	e := newEnv()
	pods := members("m", 2, 2000, 10)
	spec := e.dir.gang("g", 2, 10, pods...)
	e.dir.pending[spec.Ref] = pods
	c := &cluster{nodes: []fnode{
		{name: "a", free: 0, pods: []*v1.Pod{boundAtTime(mpod("lower", 2000, 5), "a", t0.Add(-time.Hour))}},
		{name: "b", free: 2000},
		{name: "c", free: 0, pods: []*v1.Pod{boundAtTime(mpod("higher", 2000, 50), "c", t0.Add(-time.Hour))}},
	}}
	ctx := context.Background()

	if _, err := e.m.Plan(ctx, e.attempt(spec, c)); err == nil {
		t.Fatal("planned")
	}
	if cond, _ := e.fx.cond(spec.Ref); cond.reason != ReasonUnschedulable {
		t.Fatalf("first failure: condition %+v, want Unschedulable", cond)
	}
	if _, ok := e.m.ReservationOf(spec.Ref); ok {
		t.Fatal("reserved before ReserveAfter")
	}

	e.clk.Step(59 * time.Second)
	if _, err := e.m.Plan(ctx, e.attempt(spec, c)); err == nil {
		t.Fatal("planned")
	}
	if _, ok := e.m.ReservationOf(spec.Ref); ok {
		t.Fatal("reserved before ReserveAfter")
	}

	e.clk.Step(time.Second)
	_, err := e.m.Plan(ctx, e.attempt(spec, c))
	if err == nil {
		t.Fatal("planned")
	}
	r, ok := e.m.ReservationOf(spec.Ref)
	if !ok || r.Kind != lifecycle.ReservationStarved || e.m.Phase(spec.Ref) != lifecycle.PhaseReserving {
		t.Fatalf("reservation %+v %v phase %s, want Starved", r, ok, e.m.Phase(spec.Ref))
	}
	if !r.Since.Equal(t0.Add(time.Minute)) {
		t.Fatalf("reserved since %v", r.Since)
	}
	var nodes []string
	for n := range r.Slots {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	if !reflect.DeepEqual(nodes, []string{"a", "b"}) {
		t.Fatalf("reserved nodes %v, want a (lower priority pod leaves) and b (free), not c (higher priority pod)", nodes)
	}
	cond, _ := e.fx.cond(spec.Ref)
	if cond.reason != ReasonReserving || cond.message != err.Error() ||
		!strings.Contains(cond.message, "reserving 2 nodes for 2 members") ||
		!strings.Contains(cond.message, "room for 1 of them is still in use") {
		t.Fatalf("condition %+v, want Reserving with what is held", cond)
	}
	if e.fx.observed[len(e.fx.observed)-1] != "reserved" {
		t.Fatalf("observed %v, want reserved last", e.fx.observed)
	}
	other := ident.Ref{Namespace: "ns", Name: "other"}
	for _, n := range []string{"a", "b"} {
		if got := heldCPU(e.m.Lifecycle, n, other, 10); got != 2000 {
			t.Errorf("%s against equal priority: held %d, want 2000", n, got)
		}
		if got := heldCPU(e.m.Lifecycle, n, other, 0); got != 2000 {
			t.Errorf("%s against lower priority: held %d, want 2000", n, got)
		}
		if got := heldCPU(e.m.Lifecycle, n, other, 11); got != 0 {
			t.Errorf("%s against higher priority: held %d, want 0", n, got)
		}
	}
	if got := heldCPU(e.m.Lifecycle, "c", other, 0); got != 0 {
		t.Errorf("c is not reserved, held %d", got)
	}
	// The gang itself is not kept off its own reservation.
	if got := heldCPU(e.m.Lifecycle, "b", spec.Ref, 10); got != 0 {
		t.Errorf("the gang is held off its own reservation: %d", got)
	}
	// Fits, as Filter asks it: a lower-priority pod does not fit the held
	// room on b, a higher-priority one does.
	if e.m.Fits("b", lifecycle.Claimant{Ref: other, Priority: 5}, cpu(1000), func() (resources.List, int64) { return cpu(2000), 110 }) {
		t.Error("a lower-priority pod fits reserved room")
	}
	if !e.m.Fits("b", lifecycle.Claimant{Ref: other, Priority: 11}, cpu(1000), func() (resources.List, int64) { return cpu(2000), 110 }) {
		t.Error("a higher-priority pod is kept off a reservation")
	}
}

// The queue's one starvation reservation goes to the gang first in its
// order, whichever asks first: a gang ahead takes over the room that a gang
// behind it reserved, rather than being told the room is held for gangs
// ahead of it (the e2e positions flake: b stuck behind c's reservation).
func TestManagerReservationMovesToTheGangAhead(t *testing.T) {
	e := newEnv()
	early, late := members("e", 2, 2000, 10), members("l", 2, 2000, 10)
	earlySpec, lateSpec := e.dir.gang("early", 2, 10, early...), e.dir.gang("late", 2, 10, late...)
	lateSpec.Created = earlySpec.Created.Add(time.Second)
	e.dir.pending[earlySpec.Ref], e.dir.pending[lateSpec.Ref] = early, late
	c := &cluster{nodes: []fnode{
		{name: "a", free: 0, pods: []*v1.Pod{boundAtTime(mpod("run-a", 2000, 5), "a", t0.Add(-time.Hour))}},
		{name: "b", free: 0, pods: []*v1.Pod{boundAtTime(mpod("run-b", 2000, 5), "b", t0.Add(-time.Hour))}},
	}}
	ctx := context.Background()
	for _, spec := range []*gangspec.Spec{lateSpec, earlySpec} {
		if _, err := e.m.Plan(ctx, e.attempt(spec, c)); err == nil {
			t.Fatalf("%s planned", spec.Ref)
		}
	}
	e.clk.Step(time.Minute)
	// The gang behind asks first and gets the room.
	if _, err := e.m.Plan(ctx, e.attempt(lateSpec, c)); err == nil {
		t.Fatal("late planned")
	}
	if _, ok := e.m.ReservationOf(lateSpec.Ref); !ok {
		t.Fatal("late did not reserve")
	}
	_, err := e.m.Plan(ctx, e.attempt(earlySpec, c))
	if err == nil {
		t.Fatal("early planned")
	}
	if _, ok := e.m.ReservationOf(earlySpec.Ref); !ok {
		t.Fatalf("early, ahead in the queue, did not take the reservation: %v", err)
	}
	if _, ok := e.m.ReservationOf(lateSpec.Ref); ok {
		t.Fatal("late kept its reservation beside early's")
	}
	if e.fx.retried(lateSpec.Ref, WakeDisplaced) == 0 || e.fx.woken(lateSpec.Ref) != 0 {
		t.Errorf("the displaced gang was not retried through one member: retries %v, whole wakes %v", e.fx.retries, e.fx.wakes)
	}
	// And the gang behind now waits behind it.
	if _, err := e.m.Plan(ctx, e.attempt(lateSpec, c)); err == nil || !strings.Contains(err.Error(), "held for gangs ahead of it") {
		t.Errorf("late after early reserved: %v", err)
	}
}

// A committed plan that does not reach its quorum in time is released once
// when the fake clock passes its timeout; a gang's own timeout wins.
func TestManagerPlanExpires(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration // the gang's own
		want    time.Duration
	}{
		{name: "manager's default", want: 30 * time.Second},
		{name: "gang's own timeout", timeout: 90 * time.Second, want: 90 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv()
			pods := members("m", 2, 1000, 0)
			spec := e.dir.gang("g", 2, 0, pods...)
			spec.Timeout = tc.timeout
			e.dir.pending[spec.Ref] = pods
			e.m.SetSpec(spec.Ref, 2, tc.timeout)
			c := &cluster{nodes: []fnode{{name: "a", free: 4000}}}
			node, err := e.m.Plan(context.Background(), e.attempt(spec, c))
			if err != nil || node != "a" {
				t.Fatalf("Plan = %q, %v", node, err)
			}
			e.m.MemberReserved(spec.Ref, pods[0].UID, "a", planner.ShapeKey(pods[0]))

			e.clk.Step(tc.want - time.Second)
			time.Sleep(10 * time.Millisecond)
			if e.rec.count() != 0 || e.m.Phase(spec.Ref) != lifecycle.PhasePlanned {
				t.Fatalf("released before the timeout: %+v", e.rec.released)
			}
			e.clk.Step(time.Second)
			if !e.waitReleased(1) {
				t.Fatalf("teardowns %d, want 1", e.rec.count())
			}
			rel := e.rec.released[0]
			if rel.reason != lifecycle.ReasonTimeout || !reflect.DeepEqual(rel.reserved, []types.UID{pods[0].UID}) {
				t.Fatalf("teardown %+v, want ScheduleTimeout rejecting the reserved member", rel)
			}
			if want := "only 1 of 2 members were placed within " + tc.want.String(); !strings.Contains(rel.message, want) {
				t.Fatalf("teardown message %q, want it to say %q", rel.message, want)
			}
			if e.m.Phase(spec.Ref) != lifecycle.PhaseIdle || e.m.HoldsAnywhere() || e.m.Placed(spec.Ref) != 0 {
				t.Fatalf("after expiry phase %s holds %v", e.m.Phase(spec.Ref), e.m.HoldsAnywhere())
			}
			// The member's Permit timing out at the same time, and more
			// time passing, release nothing more.
			e.m.MemberUnreserved(spec.Ref, pods[0].UID, pods[0].Name)
			e.clk.Step(time.Hour)
			time.Sleep(10 * time.Millisecond)
			if e.rec.count() != 1 {
				t.Fatalf("teardowns %d, want 1", e.rec.count())
			}
			if r := e.m.Route(spec.Ref, spec, planner.ShapeKey(pods[1])); !r.Plan {
				t.Fatalf("Route after expiry = %+v, want Plan", r)
			}
		})
	}
}

// A member steered to its planned node that fits it no more breaks the plan,
// once; a gang with its quorum has no plan to break.
func TestManagerMissedSlot(t *testing.T) {
	e := newEnv()
	pods := members("m", 3, 1000, 0)
	spec := e.dir.gang("g", 3, 0, pods...)
	e.dir.pending[spec.Ref] = pods
	c := &cluster{nodes: []fnode{{name: "a", free: 2000}, {name: "b", free: 1000}}}
	if _, err := e.m.Plan(context.Background(), e.attempt(spec, c)); err != nil {
		t.Fatal(err)
	}
	shape := planner.ShapeKey(pods[0])
	e.m.MemberReserved(spec.Ref, pods[0].UID, "a", shape)

	msg, broken := e.m.MissedSlot(spec.Ref, spec, pods[1].Name, shape)
	if !broken || !strings.Contains(msg, "member m-1 does not fit its planned node a") {
		t.Fatalf("MissedSlot = %q %v", msg, broken)
	}
	if e.rec.count() != 1 {
		t.Fatalf("teardowns %d, want 1", e.rec.count())
	}
	rel := e.rec.released[0]
	if rel.reason != lifecycle.ReasonPlanBroken || rel.message != msg || !reflect.DeepEqual(rel.reserved, []types.UID{pods[0].UID}) {
		t.Fatalf("teardown %+v", rel)
	}
	if e.m.Phase(spec.Ref) != lifecycle.PhaseIdle || e.m.HoldsAnywhere() {
		t.Fatal("the broken plan still holds")
	}
	// A second member missing its slot in the same round: no second teardown.
	e.m.MissedSlot(spec.Ref, spec, pods[2].Name, shape)
	e.m.MemberUnreserved(spec.Ref, pods[0].UID, pods[0].Name)
	if e.rec.count() != 1 {
		t.Fatalf("teardowns %d, want 1", e.rec.count())
	}

	// With its quorum the gang has no plan to break.
	for _, p := range pods {
		e.m.ObserveMember(spec.Ref, p.UID, "a")
	}
	if _, broken := e.m.MissedSlot(spec.Ref, spec, pods[2].Name, shape); broken {
		t.Fatal("MissedSlot broke a gang that has its quorum")
	}
	if e.rec.count() != 1 {
		t.Fatalf("teardowns %d, want 1", e.rec.count())
	}
}

// starve fails the gang's plan, then again once it has waited ReserveAfter
// (a minute): the second failure is its reservation's; it returns it.
func starve(t *testing.T, e *env, spec *gangspec.Spec, c *cluster) error {
	t.Helper()
	if _, err := e.m.Plan(context.Background(), e.attempt(spec, c)); err == nil {
		t.Fatal("planned")
	}
	e.clk.Step(time.Minute)
	_, err := e.m.Plan(context.Background(), e.attempt(spec, c))
	if err == nil {
		t.Fatal("planned")
	}
	return err
}

// A starved gang reserves the node whose pods are expected to end first
// (their limits and estimates), not the one with the fewest busy pods, and
// says when it expects to start; once a pod there runs past its estimate
// the start slips, and the condition says so.
func TestManagerReservesWhereRoomFreesFirst(t *testing.T) {
	e := newEnv()
	pods := members("m", 1, 2000, 10)
	spec := e.dir.gang("g", 1, 10, pods...)
	e.dir.pending[spec.Ref] = pods
	started := t0.Add(-time.Hour)
	estimate := func(p *v1.Pod, runtime string) *v1.Pod {
		p.Annotations = map[string]string{phalanxv1alpha1.ExpectedRuntimeAnnotation: runtime}
		return p
	}
	// a: one pod, no estimate (fewest busy); b: two pods, both expected to
	// end within 20 minutes; c: one pod expected to end in 5 h.
	c := &cluster{nodes: []fnode{
		{name: "a", pods: []*v1.Pod{boundAtTime(mpod("a0", 2000, 5), "a", started)}},
		{name: "b", pods: []*v1.Pod{
			boundAtTime(estimate(mpod("b0", 1000, 5), "70m"), "b", started),
			boundAtTime(estimate(mpod("b1", 1000, 5), "80m"), "b", started)}},
		{name: "c", pods: []*v1.Pod{boundAtTime(estimate(mpod("c0", 2000, 5), "6h"), "c", started)}},
	}}
	ctx := context.Background()
	err := starve(t, e, spec, c)
	r, ok := e.m.ReservationOf(spec.Ref)
	if _, onB := r.Slots["b"]; !ok || !onB || len(r.Slots) != 1 {
		t.Fatalf("reservation %+v, want node b, whose pods end first", r.Slots)
	}
	start := started.Add(80 * time.Minute)
	if want := "expected to start by " + start.UTC().Format(time.RFC3339); !strings.Contains(err.Error(), want) {
		t.Fatalf("condition %q, want it to say %q", err, want)
	}
	// Past b1's estimate the start slips; b stays the earliest.
	e.clk.Step(time.Hour)
	_, err = e.m.Plan(ctx, e.attempt(spec, c))
	if r, _ := e.m.ReservationOf(spec.Ref); err == nil || len(r.Slots) != 1 || r.Slots["b"] == nil {
		t.Fatalf("after the estimates passed: reservation %+v, err %v; want b still", r.Slots, err)
	}
	if !strings.Contains(err.Error(), "slipped: 2 pods it waits for run past their expected runtime") {
		t.Fatalf("condition %q, want the slip said", err)
	}
}

// An expected-runtime that does not parse is named on the gang's
// condition; the gang plans as one without an estimate.
func TestManagerNamesAnInvalidEstimate(t *testing.T) {
	e := newEnv()
	pods := members("m", 2, 2000, 0)
	spec := e.dir.gang("g", 2, 0, pods...)
	spec.Annotations = map[string]string{phalanxv1alpha1.ExpectedRuntimeAnnotation: "a few hours"}
	e.dir.pending[spec.Ref] = pods
	c := &cluster{nodes: []fnode{{name: "a", free: 2000}}}
	if _, err := e.m.Plan(context.Background(), e.attempt(spec, c)); err == nil {
		t.Fatal("planned")
	}
	cond, _ := e.fx.cond(spec.Ref)
	if want := `ignored: annotation scheduling.phalanx.dev/expected-runtime="a few hours" is not a duration`; !strings.Contains(cond.message, want) {
		t.Fatalf("condition %q, want it to say %q", cond.message, want)
	}
}

// Conservative backfill: a starvation reservation's room is free at the
// latest when the pods it waits for reach their activeDeadlineSeconds; a
// claimant sure to be gone by then (its own limit) may use the room, one
// without a limit or ending later may not, and a reservation that waits for
// a pod without a limit lets nothing backfill.
func TestManagerBackfillOnRunTimeLimits(t *testing.T) {
	for _, tc := range []struct {
		name          string
		runningLimit  int64 // activeDeadlineSeconds of the pod the gang waits for; 0: none; -2: expected-runtime 2h
		claimantEnds  time.Duration
		wantBackfills bool
	}{
		{"ends before the room frees", 7200, 30 * time.Minute, true},
		{"ends just when it frees", 7200, 59 * time.Minute, true},
		{"ends after it frees", 7200, 2 * time.Hour, false},
		{"no limit of its own", 7200, 0, false},
		{"the reservation waits for a pod without a limit", 0, time.Minute, false},
		{"the pod it waits for has an estimate", -2, 30 * time.Minute, true},
		{"ends after the estimate", -2, 2 * time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv()
			pods := members("m", 2, 2000, 10)
			spec := e.dir.gang("g", 2, 10, pods...)
			e.dir.pending[spec.Ref] = pods
			// Started an hour before t0: with a 2 h limit it is gone by t0+1h.
			running := boundAtTime(mpod("lower", 2000, 5), "a", t0.Add(-time.Hour))
			switch {
			case tc.runningLimit > 0:
				running.Spec.ActiveDeadlineSeconds = &tc.runningLimit
			case tc.runningLimit == -2:
				running.Annotations = map[string]string{phalanxv1alpha1.ExpectedRuntimeAnnotation: "2h"}
			}
			c := &cluster{nodes: []fnode{{name: "a", pods: []*v1.Pod{running}}, {name: "b", free: 2000}}}
			starve(t, e, spec, c)
			if _, ok := e.m.ReservationOf(spec.Ref); !ok {
				t.Fatal("no reservation")
			}
			claimant := lifecycle.Claimant{Ref: ident.Ref{Namespace: "ns", Name: "small"}, Priority: 10}
			if tc.claimantEnds > 0 {
				claimant.Ends = e.clk.Now().Add(tc.claimantEnds)
			}
			fits := e.m.Fits("b", claimant, cpu(1000), func() (resources.List, int64) { return cpu(2000), 110 })
			if fits != tc.wantBackfills {
				t.Errorf("backfills %v, want %v", fits, tc.wantBackfills)
			}
		})
	}
}
