package gates

import (
	"testing"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	"k8s.io/kubernetes/pkg/features"
)

// set flips gates as a server's --feature-gates would; the test's end puts
// every gate back.
func set(t *testing.T, gates map[featuregate.Feature]bool) {
	t.Helper()
	m := map[string]bool{}
	for f, v := range gates {
		m[string(f)] = v
	}
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(m); err != nil {
		t.Fatal(err)
	}
}

func enabled(f featuregate.Feature) bool { return utilfeature.DefaultFeatureGate.Enabled(f) }

func explicit(f featuregate.Feature) bool {
	return utilfeature.DefaultMutableFeatureGate.ExplicitlySet(f)
}

// cleanUp puts every gate back as it was when the test began.
func cleanUp(t *testing.T) {
	all := Take()
	t.Cleanup(func() {
		if err := all.Restore(); err != nil {
			t.Error(err)
		}
	})
}

const (
	gateA = features.GenericWorkload
	gateB = features.NominatedNodeNameForExpectation
)

// TestRestoreUndoesAServer: what a server changed goes back to its value,
// and a gate that was not set goes back to not set (its default).
func TestRestoreUndoesAServer(t *testing.T) {
	cleanUp(t)
	if explicit(gateA) {
		t.Skipf("%s is set by the environment", gateA)
	}
	was := enabled(gateA)
	before := Take()
	set(t, map[featuregate.Feature]bool{gateA: !was})
	diff := before.ChangedIn(Take())
	if len(diff.enabled) != 1 || diff.enabled[gateA] != was || diff.explicit[gateA] {
		t.Fatalf("ChangedIn = %v (explicit %v), want only %s=%v, not set", diff.enabled, diff.explicit, gateA, was)
	}
	if err := diff.Restore(); err != nil {
		t.Fatal(err)
	}
	if enabled(gateA) != was || explicit(gateA) {
		t.Fatalf("%s = %v (set %v) after Restore, want %v, not set", gateA, enabled(gateA), explicit(gateA), was)
	}
}

// TestRestoreKeepsOthers: a gate changed by someone else after the server
// started stays as they set it.
func TestRestoreKeepsOthers(t *testing.T) {
	cleanUp(t)
	wasA, wasB := enabled(gateA), enabled(gateB)
	before := Take()
	set(t, map[featuregate.Feature]bool{gateA: !wasA})
	diff := before.ChangedIn(Take())
	set(t, map[featuregate.Feature]bool{gateB: !wasB})
	if err := diff.Restore(); err != nil {
		t.Fatal(err)
	}
	if enabled(gateA) != wasA || enabled(gateB) != !wasB {
		t.Fatalf("after Restore %s=%v %s=%v, want %v and %v", gateA, enabled(gateA), gateB, enabled(gateB), wasA, !wasB)
	}
}

// TestRestoreKeepsAnExplicitValue: a gate set before the server started is
// set back to that value, still explicitly.
func TestRestoreKeepsAnExplicitValue(t *testing.T) {
	cleanUp(t)
	want := !enabled(gateA)
	set(t, map[featuregate.Feature]bool{gateA: want})
	before := Take()
	set(t, map[featuregate.Feature]bool{gateA: !want})
	if err := before.ChangedIn(Take()).Restore(); err != nil {
		t.Fatal(err)
	}
	if enabled(gateA) != want || !explicit(gateA) {
		t.Fatalf("%s = %v (set %v), want %v, set", gateA, enabled(gateA), explicit(gateA), want)
	}
}

// TestNothingChanged: a server that changed nothing has nothing to restore.
func TestNothingChanged(t *testing.T) {
	cleanUp(t)
	diff := Take().ChangedIn(Take())
	if len(diff.enabled) != 0 || diff.emulation != nil {
		t.Fatalf("ChangedIn = %v, emulation %v; want nothing", diff.enabled, diff.emulation)
	}
	if err := diff.Restore(); err != nil {
		t.Fatal(err)
	}
	var zero Snapshot
	if err := zero.Restore(); err != nil {
		t.Fatalf("the zero Snapshot: %v", err)
	}
}
