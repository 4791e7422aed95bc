package controller

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
)

func pending(ns, name, q string, prio int32, created time.Time) Pending {
	return Pending{Order: ident.Order{Queue: q, Priority: prio, Created: created, Namespace: ns, Name: name}, Kind: "PodGroup"}
}

func TestPositions(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	// Queue a goes before queue b (as if further below its share).
	byQueue := func(a, b string) int { return strings.Compare(a, b) }
	got := Positions([]Pending{
		pending("team-b", "late", "b", 0, t0.Add(time.Minute)),
		pending("team-a", "low", "a", 0, t0),
		pending("team-a", "high", "a", 100, t0.Add(time.Hour)),
		pending("team-b", "early", "b", 0, t0),
		pending("team-c", "other", "a", 0, t0.Add(time.Second)),
	}, byQueue)

	type row struct {
		name         string
		inQueue, len int32
		inCluster    int32
		aheadName    string
		aheadReason  string
	}
	want := map[string][]row{
		"team-a": {
			{"high", 1, 3, 1, "", ""},
			{"low", 2, 3, 2, "high", "higher priority (100 > 0)"},
		},
		"team-c": {
			// The gang ahead is in another namespace: not named.
			{"other", 3, 3, 3, "", "submitted earlier (2026-11-26T10:00:00Z, 1s before)"},
		},
		"team-b": {
			{"early", 1, 2, 4, "", ""},
			{"late", 2, 2, 5, "early", "submitted earlier (2026-11-26T10:00:00Z, 1m0s before)"},
		},
	}
	if len(got) != len(want) {
		t.Fatalf("namespaces %d, want %d", len(got), len(want))
	}
	for ns, rows := range want {
		qp := got[ns]
		if qp == nil || qp.Name != phalanxv1alpha1.QueuePositionsName || qp.Namespace != ns {
			t.Fatalf("%s: object %+v", ns, qp)
		}
		if qp.PendingGangs != int32(len(rows)) || qp.ClusterPendingGangs != 5 || len(qp.Gangs) != len(rows) {
			t.Fatalf("%s: pending %d cluster %d gangs %d", ns, qp.PendingGangs, qp.ClusterPendingGangs, len(qp.Gangs))
		}
		for i, r := range rows {
			g := qp.Gangs[i]
			if g.Name != r.name || g.PositionInQueue != r.inQueue || g.QueueLength != r.len || g.PositionInCluster != r.inCluster {
				t.Errorf("%s[%d] = %s %d/%d cluster %d, want %+v", ns, i, g.Name, g.PositionInQueue, g.QueueLength, g.PositionInCluster, r)
			}
			switch {
			case r.aheadReason == "" && g.Ahead != nil:
				t.Errorf("%s: %s has a gang ahead: %+v", ns, g.Name, g.Ahead)
			case r.aheadReason != "" && (g.Ahead == nil || g.Ahead.Name != r.aheadName || g.Ahead.Reason != r.aheadReason):
				t.Errorf("%s: %s ahead = %+v, want %q %q", ns, g.Name, g.Ahead, r.aheadName, r.aheadReason)
			}
		}
	}
}

// TestPositionsBounded: 10,000 pending gangs in 100 namespaces (and 10,000
// in one) give one object per namespace, each under the API server's
// 1.5 MiB object limit, and a gang that starts changes only the objects of
// namespaces whose gangs moved — at most one write per namespace per
// interval, however many gangs wait.
func TestPositionsBounded(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	byQueue := func(a, b string) int { return strings.Compare(a, b) }
	var spread, one []Pending
	for i := range 10000 {
		created := t0.Add(time.Duration(i) * time.Second)
		spread = append(spread, pending(fmt.Sprintf("ns-%02d", i%100), fmt.Sprintf("gang-%05d", i), fmt.Sprintf("q%d", i%100), 0, created))
		one = append(one, pending("big", fmt.Sprintf("gang-%05d", i), "q", 0, created))
	}
	before := Positions(spread, byQueue)
	if len(before) != 100 {
		t.Fatalf("%d objects, want one per namespace (100)", len(before))
	}
	big := Positions(one, byQueue)["big"]
	if big.PendingGangs != 10000 || len(big.Gangs) != phalanxv1alpha1.MaxGangPositions {
		t.Fatalf("one namespace: pending %d, listed %d (want 10000, %d)", big.PendingGangs, len(big.Gangs), phalanxv1alpha1.MaxGangPositions)
	}
	raw, err := json.Marshal(big)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 1<<20 {
		t.Errorf("one object is %d bytes, above 1 MiB", len(raw))
	}
	t.Logf("10,000 gangs in one namespace: one object of %d KiB listing the first %d", len(raw)/1024, len(big.Gangs))

	// The first gang of queue q0 (namespace ns-00) starts: only ns-00's
	// positions in their queue change; cluster positions shift everywhere,
	// which still is one write per namespace.
	after := Positions(spread[1:], byQueue)
	changed := 0
	for ns, b := range before {
		a := after[ns]
		if a == nil || !samePositions(a.Gangs, b.Gangs) || a.PendingGangs != b.PendingGangs || a.ClusterPendingGangs != b.ClusterPendingGangs {
			changed++
		}
	}
	// Every namespace's cluster positions moved: one write each, 100 per
	// interval at most however many gangs wait.
	if changed != len(before) {
		t.Fatalf("%d objects changed, want %d (cluster positions moved in each)", changed, len(before))
	}
	if a := after["ns-00"].Gangs[0]; a.Name != "gang-00100" || a.PositionInQueue != 1 || a.Ahead != nil {
		t.Errorf("ns-00 after its first gang started: %+v", a)
	}
	// Unchanged input gives equal objects: a resync writes nothing.
	again := Positions(spread, byQueue)
	for ns, b := range before {
		if !samePositions(again[ns].Gangs, b.Gangs) {
			t.Fatalf("%s differs on the same input", ns)
		}
	}
}

// The scheduler's expected start, read from the group object's annotation,
// is carried into the gang's position; absent or unreadable, none.
func TestPositionsExpectedStart(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for raw, want := range map[string]*time.Time{"2026-12-01T10:00:00Z": &at, "soon": nil, "": nil} {
		annotations := map[string]string{}
		if raw != "" {
			annotations[phalanxv1alpha1.ExpectedStartAnnotation] = raw
		}
		p := pending("ns", "g", "a", 0, at)
		p.ExpectedStart = expectedStart(annotations)
		got := Positions([]Pending{p}, strings.Compare)["ns"].Gangs[0].ExpectedStart
		switch {
		case want == nil && got != nil:
			t.Errorf("%q: expected start %v, want none", raw, got)
		case want != nil && (got == nil || !got.Time.Equal(*want)):
			t.Errorf("%q: expected start %v, want %v", raw, got, *want)
		}
	}
}
