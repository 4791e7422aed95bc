package served

import (
	"context"
	"errors"
	"testing"
)

// fakeServer serves what its fields say; err fails every discovery.
type fakeServer struct {
	podGroups, workloads, composites bool
	err                              error
	asked                            []string
}

func (s *fakeServer) served(gv, resource string) (bool, error) {
	s.asked = append(s.asked, gv+"/"+resource)
	if s.err != nil {
		return false, s.err
	}
	switch gv + "/" + resource {
	case "scheduling.k8s.io/v1beta1/podgroups":
		return s.podGroups, nil
	case "scheduling.k8s.io/v1beta1/workloads":
		return s.workloads, nil
	case "scheduling.k8s.io/v1alpha3/compositepodgroups":
		return s.composites, nil
	}
	return false, nil
}

// TestLookWorkloadAPI: Workloads and CompositePodGroups count only with
// PodGroups (they are not even asked for without them).
func TestLookWorkloadAPI(t *testing.T) {
	s := &fakeServer{workloads: true, composites: true}
	if got, err := LookWorkloadAPI(s.served); err != nil || got != (WorkloadAPI{}) || len(s.asked) != 1 {
		t.Fatalf("without PodGroups: %+v, %v, asked %v; want nothing served after one question", got, err, s.asked)
	}
	s.podGroups = true
	if got, _ := LookWorkloadAPI(s.served); got != (WorkloadAPI{PodGroups: true, Workloads: true, Composites: true}) {
		t.Fatalf("all served: %+v", got)
	}
	s.err = errors.New("discovery down")
	if _, err := LookWorkloadAPI(s.served); err == nil {
		t.Fatal("a discovery failure gave no error")
	}
}

// TestFollower: Apply runs on each change of what is served (never for
// "nothing" at start), with what was applied before; a discovery error
// changes nothing; an Apply that fails is tried again at the next Check.
func TestFollower(t *testing.T) {
	ctx := context.Background()
	s := &fakeServer{}
	type call struct{ prev, want WorkloadAPI }
	var calls []call
	fail := false
	f := &Follower{Served: s.served, Apply: func(_ context.Context, prev, want WorkloadAPI) bool {
		calls = append(calls, call{prev, want})
		return !fail
	}}
	f.Check(ctx)
	if len(calls) != 0 {
		t.Fatalf("nothing served at start: Apply ran %v", calls)
	}
	s.podGroups = true
	f.Check(ctx)
	f.Check(ctx)
	pg := WorkloadAPI{PodGroups: true}
	if len(calls) != 1 || calls[0] != (call{WorkloadAPI{}, pg}) || f.Current() != pg {
		t.Fatalf("PodGroups turned on: calls %v, current %+v", calls, f.Current())
	}
	s.err = errors.New("discovery down")
	f.Check(ctx)
	if len(calls) != 1 || f.Current() != pg {
		t.Fatalf("a discovery error changed something: calls %v, current %+v", calls, f.Current())
	}
	s.err, s.workloads, fail = nil, true, true
	f.Check(ctx)
	if len(calls) != 2 || f.Current() != pg {
		t.Fatalf("a failed Apply was recorded: calls %v, current %+v", calls, f.Current())
	}
	fail = false
	f.Check(ctx)
	both := WorkloadAPI{PodGroups: true, Workloads: true}
	if len(calls) != 3 || calls[2] != (call{pg, both}) || f.Current() != both {
		t.Fatalf("retry after a failed Apply: calls %v, current %+v", calls, f.Current())
	}
	s.podGroups = false
	f.Check(ctx)
	if len(calls) != 4 || calls[3] != (call{both, WorkloadAPI{}}) || f.Current() != (WorkloadAPI{}) {
		t.Fatalf("turned off: calls %v, current %+v", calls, f.Current())
	}
}
