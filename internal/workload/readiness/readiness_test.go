package readiness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/gang"
	"github.com/phalanx-sched/phalanx/internal/gang/gangspec"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/status"
	"github.com/phalanx-sched/phalanx/internal/workload"
)

// directory is a fake gang directory: specs by ref, members by ref, and
// the gang each pod names (by pod name).
type directory struct {
	specs    map[ident.Ref]*gangspec.Spec
	members  map[ident.Ref][]*v1.Pod
	gangOf   map[string]ident.Ref
	errOf    map[string]error
	progress map[ident.Ref][2]int
	watching bool
}

func (d *directory) GangOf(pod *v1.Pod) (ident.Ref, *gangspec.Spec, bool, error) {
	ref, ok := d.gangOf[pod.Name]
	if !ok {
		return ident.Ref{}, nil, false, nil
	}
	if err := d.errOf[pod.Name]; err != nil {
		return ref, nil, true, err
	}
	spec, err := d.Spec(ref)
	return ref, spec, true, err
}

func (d *directory) Spec(ref ident.Ref) (*gangspec.Spec, error) {
	if s, ok := d.specs[ref]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "podgroups"}, ref.Name)
}

func (d *directory) Members(ref ident.Ref) []*v1.Pod { return d.members[ref] }

func (d *directory) DependencyProgress(dep *gangspec.Spec) (int, int) {
	p := d.progress[dep.Ref]
	return p[0], p[1]
}

func (d *directory) WatchesWorkloadAPI() bool { return d.watching }

type lifecycle struct{ touched map[ident.Ref]bool }

func (l lifecycle) Untouched(ref ident.Ref) bool { return !l.touched[ref] }

// conditions records the last condition set per gang.
type conditions struct {
	mu  sync.Mutex
	set map[ident.Ref]status.Condition
}

func (c *conditions) Set(spec *gangspec.Spec, cond status.Condition) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.set[spec.Ref] = cond
	return true
}

func (c *conditions) get(ref ident.Ref) (status.Condition, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cond, ok := c.set[ref]
	return cond, ok
}

// quorum records the calls and answers QuorumMet with met.
type quorum struct {
	offered, short []ident.Ref
	met            bool
}

func (q *quorum) Offered(ref ident.Ref, _ *v1.Pod)    { q.offered = append(q.offered, ref) }
func (q *quorum) QuorumMet(ident.Ref, types.UID) bool { return q.met }
func (q *quorum) QuorumShort(ref ident.Ref)           { q.short = append(q.short, ref) }

// workloadsFunc is a Workloads of a func.
type workloadsFunc func(context.Context, workload.Owner) (workload.OrderedStartup, bool, error)

func (w workloadsFunc) OrderedStartup(ctx context.Context, o workload.Owner) (workload.OrderedStartup, bool, error) {
	return w(ctx, o)
}

type fixture struct {
	dir    *directory
	lc     lifecycle
	conds  *conditions
	q      *quorum
	events []string
	clock  *clocktesting.FakeClock
	gate   *Gate
	// reads counts the workload reads.
	reads int
	mu    sync.Mutex
	// blocker is what the workload read returns.
	blocker *workload.OrderedStartup
}

var (
	t0  = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ref = ident.Ref{Namespace: "ns", Name: "g"}
)

func newFixture(t *testing.T) *fixture {
	f := &fixture{
		dir: &directory{specs: map[ident.Ref]*gangspec.Spec{}, members: map[ident.Ref][]*v1.Pod{}, gangOf: map[string]ident.Ref{},
			errOf: map[string]error{}, progress: map[ident.Ref][2]int{}},
		lc: lifecycle{touched: map[ident.Ref]bool{}}, conds: &conditions{set: map[ident.Ref]status.Condition{}},
		q: &quorum{}, clock: clocktesting.NewFakeClock(t0),
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f.gate = New(Ports{Directory: f.dir, Lifecycle: f.lc, Conditions: f.conds, Quorum: f.q,
		Workloads: workloadsFunc(func(_ context.Context, o workload.Owner) (workload.OrderedStartup, bool, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.reads++
			if f.blocker == nil {
				return workload.OrderedStartup{}, false, nil
			}
			b := *f.blocker
			b.Owner = o
			return b, true, nil
		}),
		PodEvent:           func(pod *v1.Pod, reason, msg string) { f.events = append(f.events, reason+": "+msg) },
		InBackground:       func(_ string, fn func()) { go fn() },
		WorkloadAPIRecheck: func() time.Duration { return 42 * time.Second },
		Clock:              f.clock, Ctx: ctx,
	})
	return f
}

// addGang adds a gang of minMember with n members (named g-0...), each
// with the given scheduling gates.
func (f *fixture) addGang(r ident.Ref, minMember, n int, annotations map[string]string, gates ...string) []*v1.Pod {
	f.dir.specs[r] = &gangspec.Spec{Ref: r, UID: types.UID(r.Name), MinMember: minMember, Annotations: annotations}
	var pods []*v1.Pod
	for i := range n {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: fmt.Sprintf("%s-%d", r.Name, i), UID: types.UID(fmt.Sprintf("%s-%d", r.Name, i))}}
		for _, g := range gates {
			p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, v1.PodSchedulingGate{Name: g})
		}
		f.dir.gangOf[p.Name] = r
		pods = append(pods, p)
	}
	f.dir.members[r] = pods
	return pods
}

func TestReady(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(f *fixture) *v1.Pod
		ready bool
		// msg is a part of the message; reason, of the gang's condition ("": none set).
		msg, reason string
		event       string
	}{
		{name: "a pod of no gang", ready: true, setup: func(*fixture) *v1.Pod {
			return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "plain"}}
		}},
		{name: "group object missing", msg: "PodGroup ns/g does not exist; the pod waits until it is created",
			event: status.ReasonPodGroupMissing, setup: func(f *fixture) *v1.Pod {
				p := f.addGang(ref, 2, 2, nil)[0]
				delete(f.dir.specs, ref)
				return p
			}},
		{name: "Workload API not served", msg: "does not serve the Workload API", event: status.ReasonPodGroupMissing,
			setup: func(f *fixture) *v1.Pod {
				wref := ident.Ref{Source: ident.SourceWorkload, Namespace: "ns", Name: "w"}
				p := f.addGang(wref, 2, 2, nil)[0]
				delete(f.dir.specs, wref)
				return p
			}},
		{name: "invalid gang annotations", msg: "bad min-member; the pod is not scheduled until this is fixed",
			event: status.ReasonPodGroupMissing, setup: func(f *fixture) *v1.Pod {
				p := f.addGang(ref, 2, 2, nil)[0]
				f.dir.errOf[p.Name] = errors.New("bad min-member")
				return p
			}},
		{name: "depends on itself", msg: "PodGroup depends on itself", reason: status.ReasonDependencyMissing,
			setup: func(f *fixture) *v1.Pod {
				return f.addGang(ref, 1, 1, map[string]string{phalanxv1alpha1.DependsOnAnnotation: "g"})[0]
			}},
		{name: "dependency missing", msg: "dependency PodGroup ns/pre does not exist", reason: status.ReasonDependencyMissing,
			setup: func(f *fixture) *v1.Pod {
				return f.addGang(ref, 1, 1, map[string]string{phalanxv1alpha1.DependsOnAnnotation: "pre"})[0]
			}},
		{name: "dependency not yet running", msg: "waiting for gang pre: 1 of 3 members running or succeeded",
			reason: status.ReasonDependencyPending, setup: func(f *fixture) *v1.Pod {
				pre := ident.Ref{Namespace: "ns", Name: "pre"}
				f.addGang(pre, 3, 3, nil)
				f.dir.progress[pre] = [2]int{1, 3}
				return f.addGang(ref, 1, 1, map[string]string{phalanxv1alpha1.DependsOnAnnotation: "pre"})[0]
			}},
		{name: "invalid sub-groups", msg: "invalid sub-groups: size 3 does not divide 4", reason: gang.ReasonInvalidSubGroups,
			setup: func(f *fixture) *v1.Pod {
				p := f.addGang(ref, 4, 4, nil)[0]
				f.dir.specs[ref].SubGroups = &gangspec.SubGroups{Err: "size 3 does not divide 4"}
				return p
			}},
		{name: "members short", msg: "2 of 3 members exist; waiting for the rest", reason: gang.ReasonMembersPending,
			setup: func(f *fixture) *v1.Pod { return f.addGang(ref, 3, 2, nil)[0] }},
		{name: "members short of a started gang leave its condition", msg: "2 of 3 members exist",
			setup: func(f *fixture) *v1.Pod {
				f.lc.touched[ref] = true
				return f.addGang(ref, 3, 2, nil)[0]
			}},
		{name: "quorum met, this pod leads", ready: true, setup: func(f *fixture) *v1.Pod {
			f.q.met = true
			return f.addGang(ref, 2, 2, nil)[0]
		}},
		{name: "quorum met, another member leads", msg: "waiting behind the member that leads the gang's plan",
			setup: func(f *fixture) *v1.Pod { return f.addGang(ref, 2, 2, nil)[1] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			pod := tc.setup(f)
			msg, ready := f.gate.Ready(pod)
			if ready != tc.ready || !strings.Contains(msg, tc.msg) {
				t.Fatalf("Ready = %q, %v; want %v with %q", msg, ready, tc.ready, tc.msg)
			}
			r := f.dir.gangOf[pod.Name]
			cond, set := f.conds.get(r)
			if tc.reason == "" && set {
				t.Fatalf("condition %+v set, want none", cond)
			}
			if tc.reason != "" && (!set || cond.Reason != tc.reason || cond.Message != msg || cond.Status != metav1.ConditionFalse) {
				t.Fatalf("condition = %+v (set %v), want False %s with the message", cond, set, tc.reason)
			}
			if tc.event == "" && len(f.events) > 0 || tc.event != "" && (len(f.events) != 1 || f.events[0] != tc.event+": "+msg) {
				t.Fatalf("events = %q, want %q", f.events, tc.event)
			}
		})
	}
}

func TestReadyOffersMembersToTheQuorum(t *testing.T) {
	f := newFixture(t)
	short := f.addGang(ref, 3, 2, nil)
	f.gate.Ready(short[0])
	if len(f.q.offered) != 1 || len(f.q.short) != 1 {
		t.Fatalf("a short gang's member: offered %v, short %v; want both once", f.q.offered, f.q.short)
	}
	f = newFixture(t)
	whole := f.addGang(ref, 2, 2, nil)
	f.gate.Ready(whole[0])
	if len(f.q.offered) != 1 || len(f.q.short) != 0 {
		t.Fatalf("a whole gang's member: offered %v, short %v; want offered only", f.q.offered, f.q.short)
	}
}

func TestMissingNamesTheWorkloadAPIInterval(t *testing.T) {
	f := newFixture(t)
	wref := ident.Ref{Source: ident.SourceWorkload, Namespace: "ns", Name: "w"}
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "podgroups"}, "w")
	if msg := f.gate.Missing(wref, notFound); !strings.Contains(msg, "looks for it again every 42s") {
		t.Fatalf("Missing = %q, want the recheck interval", msg)
	}
	f.dir.watching = true
	if msg := f.gate.Missing(wref, notFound); msg != "PodGroup ns/w (scheduling.k8s.io) does not exist; the pod waits until it is created" {
		t.Fatalf("Missing while the API is read = %q", msg)
	}
}

func TestCountMembers(t *testing.T) {
	gated := func(name string, gates ...string) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}
		for _, g := range gates {
			p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, v1.PodSchedulingGate{Name: g})
		}
		return p
	}
	deleting := gated("gone")
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	boundGated := gated("bound", "x")
	boundGated.Spec.NodeName = "n1"
	got := countMembers(2, []*v1.Pod{gated("a"), gated("b", "z.io/hold", "a.io/wait"), gated("c", "z.io/hold"), deleting, boundGated})
	want := MemberCount{Ready: 2 + 1 + 1, Gated: 2, Gates: []string{"a.io/wait", "z.io/hold"}}
	if got.Ready != want.Ready || got.Gated != want.Gated || strings.Join(got.Gates, ",") != strings.Join(want.Gates, ",") {
		t.Fatalf("countMembers = %+v, want %+v (finished, ungated and bound count; deleting does not; gates once, sorted)", got, want)
	}
}

func TestMembersShortNamesTheGates(t *testing.T) {
	f := newFixture(t)
	f.addGang(ref, 3, 3, nil, "example.com/hold")
	spec := f.dir.specs[ref]
	cond := f.gate.MembersShort(spec, f.gate.CountMembers(spec), 3)
	if cond.Reason != gang.ReasonMembersPending || !strings.Contains(cond.Message, "0 of 3 members can be scheduled; 3 more wait on scheduling gates (example.com/hold)") {
		t.Fatalf("MembersShort = %+v", cond)
	}
}
