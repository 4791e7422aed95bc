package estimatorbench

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/phalanx-sched/phalanx/internal/estimator/karmadapb"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

func TestWithDefaults(t *testing.T) {
	d := Options{}.withDefaults()
	if d.Nodes != 5000 || d.GangSize != 1024 || d.Runs != 20 || d.Timeout != 3*time.Second || d.ProfileSeconds != 6 || d.Log != io.Discard || d.Progress != io.Discard {
		t.Errorf("defaults = %+v", d)
	}
	set := Options{Nodes: 10, GangSize: 2, Runs: 3, Timeout: time.Second, ProfileSeconds: 1, Log: &strings.Builder{}}.withDefaults()
	if set.Nodes != 10 || set.GangSize != 2 || set.Runs != 3 || set.Timeout != time.Second || set.ProfileSeconds != 1 || set.Log == io.Discard {
		t.Errorf("options set = %+v, want them kept", set)
	}
	// A gang of one is no gang: the default size.
	if got := (Options{GangSize: 1}).withDefaults().GangSize; got != 1024 {
		t.Errorf("GangSize 1 → %d, want 1024", got)
	}
}

func TestFillFigures(t *testing.T) {
	// fillGPUs over nine nodes: 0 5 1 6 2 7 3 8 4, a cycle of 36 GPUs in 8
	// pods (the node taking none has no pod).
	for _, tc := range []struct{ nodes, gpus, pods int }{{0, 0, 0}, {1, 0, 0}, {2, 5, 1}, {9, 36, 8}, {18, 72, 16}} {
		if gpus, pods := fillFigures(tc.nodes); gpus != tc.gpus || pods != tc.pods {
			t.Errorf("fillFigures(%d) = %d GPUs, %d pods; want %d, %d", tc.nodes, gpus, pods, tc.gpus, tc.pods)
		}
	}
}

func TestCheck(t *testing.T) {
	o := Options{Runs: 5, Timeout: 3 * time.Second}
	sane := func(n int32) bool { return n == 2 }
	for _, tc := range []struct {
		name string
		c    Case
		want string
	}{
		{"sane", Case{Answer: 2, Answers: []int32{2}}, ""},
		// An insane answer is the first thing said, timeouts or not.
		{"insane", Case{Answer: 3, Want: "2", Timeouts: 1}, "answer 3, want 2"},
		{"timeouts", Case{Answer: 2, Timeouts: 1}, "1 of 5 calls timed out (3s); answer 2"},
		{"changed", Case{Answer: 2, Answers: []int32{2, 3}}, "answers changed from call to call on an idle member: [2 3]"},
	} {
		err := check(tc.c, sane, o)
		if got := ""; err != nil {
			got = err.Error()
			if got != tc.want {
				t.Errorf("%s: check = %q, want %q", tc.name, got, tc.want)
			}
		} else if tc.want != "" {
			t.Errorf("%s: check = nil, want %q", tc.name, tc.want)
		}
	}
}

// TestCases: the three cases, their bounds from Bounds, and the sets-ib
// call naming the template as karmada-scheduler does.
func TestCases(t *testing.T) {
	o := Options{Nodes: 600, GangSize: 4}
	boundSets, boundIB, replicas := Bounds(o.Nodes, o.GangSize)
	var objects []string
	calls := queries{
		sets: func(ctx context.Context) (int32, error) {
			md, _ := metadata.FromOutgoingContext(ctx)
			objects = append(objects, strings.Join(md.Get("object"), ";"))
			return 1, nil
		},
		replicas: func(context.Context) (int32, error) { return 2, nil },
	}
	cs := cases(o, calls)
	if len(cs) != 3 || cs[0].c.Name != "sets" || cs[1].c.Name != "sets-ib" || cs[2].c.Name != "replicas" {
		t.Fatalf("cases = %+v", cs)
	}
	for i, bound := range []int{boundSets, boundIB} {
		k := cs[i]
		if !k.c.Gang() || k.c.Want != "1.."+itoa(bound) {
			t.Errorf("%s: gang %v, want %q; bound %d", k.c.Name, k.c.Gang(), k.c.Want, bound)
		}
		for n, want := range map[int32]bool{0: false, 1: true, int32(bound): true, int32(bound) + 1: false} {
			if k.sane(n) != want {
				t.Errorf("%s: sane(%d) = %v, want %v", k.c.Name, n, !want, want)
			}
		}
		if _, err := k.call(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"", "kind=Job, name=bench/train"}; strings.Join(objects, "|") != strings.Join(want, "|") {
		t.Errorf("objects named = %q, want %q", objects, want)
	}
	r := cs[2]
	if r.c.Gang() || r.c.Want != itoa(replicas) || !r.sane(int32(replicas)) || r.sane(int32(replicas-1)) {
		t.Errorf("replicas case %+v: want exactly %d", r.c, replicas)
	}
	if n, _ := r.call(context.Background()); n != 2 {
		t.Errorf("replicas call = %d, want the query's 2", n)
	}
	if !strings.Contains(cs[0].c.What, "+ 3 workers") {
		t.Errorf("sets: %q, want 3 workers for a gang of 4", cs[0].c.What)
	}
}

// fakeEstimator answers the two calls the bench makes and keeps the
// requests.
type fakeEstimator struct {
	karmadapb.EstimatorClient
	sets     *karmadapb.MaxAvailableComponentSetsRequest
	replicas *karmadapb.MaxAvailableReplicasRequest
	err      error
}

func (f *fakeEstimator) MaxAvailableComponentSets(_ context.Context, in *karmadapb.MaxAvailableComponentSetsRequest, _ ...grpc.CallOption) (*karmadapb.MaxAvailableComponentSetsResponse, error) {
	f.sets = in
	if f.err != nil {
		return nil, f.err
	}
	return &karmadapb.MaxAvailableComponentSetsResponse{MaxSets: 3}, nil
}

func (f *fakeEstimator) MaxAvailableReplicas(_ context.Context, in *karmadapb.MaxAvailableReplicasRequest, _ ...grpc.CallOption) (*karmadapb.MaxAvailableReplicasResponse, error) {
	f.replicas = in
	if f.err != nil {
		return nil, f.err
	}
	return &karmadapb.MaxAvailableReplicasResponse{MaxReplicas: 9}, nil
}

func TestNewQueries(t *testing.T) {
	ctx := context.Background()
	f := &fakeEstimator{}
	q := newQueries(f, 8)
	if n, err := q.sets(ctx); n != 3 || err != nil {
		t.Errorf("sets = %d, %v; want 3", n, err)
	}
	comps := f.sets.GetComponents()
	if f.sets.GetCluster() != "member" || f.sets.GetNamespace() != estimatorNS || len(comps) != 2 ||
		comps[0].GetName() != "master" || comps[0].GetReplicas() != 1 || comps[1].GetName() != "worker" || comps[1].GetReplicas() != 7 {
		t.Errorf("sets request = %v", f.sets)
	}
	if n, err := q.replicas(ctx); n != 9 || err != nil {
		t.Errorf("replicas = %d, %v; want 9", n, err)
	}
	if f.replicas.GetCluster() != "member" || f.replicas.GetReplicaRequirements().GetNamespace() != estimatorNS {
		t.Errorf("replicas request = %v", f.replicas)
	}
	f.err = errors.New("unavailable")
	if n, err := q.sets(ctx); n != 0 || !errors.Is(err, f.err) {
		t.Errorf("sets on error = %d, %v", n, err)
	}
	if n, err := q.replicas(ctx); n != 0 || !errors.Is(err, f.err) {
		t.Errorf("replicas on error = %d, %v", n, err)
	}
}

func TestResources(t *testing.T) {
	l := resources(2, 4, 0)
	if len(l) != 2 || l.Cpu().Value() != 2 || l.Memory().Value() != 4<<30 {
		t.Errorf("resources(2, 4, 0) = %v", l)
	}
	if g := resources(1, 1, 3); len(g) != 3 || g.Name(testcluster.GPU, resource.DecimalSI).Value() != 3 {
		t.Errorf("resources with GPUs = %v", g)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
