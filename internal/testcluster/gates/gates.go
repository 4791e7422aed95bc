// Package gates records and restores the process's feature gates
// (k8s.io/apiserver's DefaultMutableFeatureGate), so that each in-process
// kube-apiserver of a restartable test cluster sees its own flags only.
package gates

import (
	"k8s.io/apimachinery/pkg/util/version"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
)

// Snapshot records feature gates of the process.
//
// Feature gates are process-global: the in-process kube-apiserver applies its
// --feature-gates (and --emulated-version) to
// k8s.io/apiserver/pkg/util/feature.DefaultMutableFeatureGate, which every
// server, scheduler and controller of this process reads, and
// kubeapiservertesting.StartTestServer only undoes that when the test ends
// (tb.Cleanup). It also starts each server from the gates as they are, so a
// server restarted without --feature-gates=X=true would still see X from the
// previous one. A Restartable cluster therefore records the gates before each
// server starts and, when that server stops (at a restart or at Stop), puts
// back those the server changed; gates changed by others (e.g. an in-process
// scheduler's plugins.SetFeatureDefaults) stay. So each server sees exactly
// its own flags, and after Stop the gates are as before Start. An in-process
// scheduler sharing the process does see the server's gates change with
// each restart. --emulated-version differing between restarts is not
// supported: StartTestServer's own test cleanup then fails the test.
type Snapshot struct {
	enabled   map[featuregate.Feature]bool
	explicit  map[featuregate.Feature]bool
	emulation *version.Version
	minCompat *version.Version
}

// Take records every feature gate of the process as it is now.
func Take() Snapshot {
	g := utilfeature.DefaultMutableFeatureGate
	s := Snapshot{
		enabled:   map[featuregate.Feature]bool{},
		explicit:  map[featuregate.Feature]bool{},
		emulation: g.EmulationVersion(),
		minCompat: g.MinCompatibilityVersion(),
	}
	for f := range g.GetAll() {
		s.enabled[f] = g.Enabled(f)
		s.explicit[f] = g.ExplicitlySet(f)
	}
	return s
}

// ChangedIn returns the part of s that differs in after.
func (s Snapshot) ChangedIn(after Snapshot) Snapshot {
	d := Snapshot{enabled: map[featuregate.Feature]bool{}, explicit: map[featuregate.Feature]bool{}}
	if !after.emulation.EqualTo(s.emulation) || !after.minCompat.EqualTo(s.minCompat) {
		d.emulation, d.minCompat = s.emulation, s.minCompat
	}
	for f, v := range s.enabled {
		if a, ok := after.enabled[f]; !ok || a != v {
			d.enabled[f], d.explicit[f] = v, s.explicit[f]
		}
	}
	return d
}

// Restore sets every gate of s that changed back to its recorded value, and
// back to "not set" (its default) when it was not set.
func (s Snapshot) Restore() error {
	g := utilfeature.DefaultMutableFeatureGate
	if s.emulation != nil && (!g.EmulationVersion().EqualTo(s.emulation) || !g.MinCompatibilityVersion().EqualTo(s.minCompat)) {
		if err := g.SetEmulationVersionAndMinCompatibilityVersion(s.emulation, s.minCompat); err != nil {
			return err
		}
	}
	changed := map[string]bool{}
	var unset []featuregate.Feature
	for f, v := range s.enabled {
		if g.Enabled(f) == v {
			continue
		}
		changed[string(f)] = v
		if !s.explicit[f] {
			unset = append(unset, f)
		}
	}
	if len(changed) == 0 {
		return nil
	}
	// All at once, so that dependent gates never disagree.
	if err := g.SetFromMap(changed); err != nil {
		return err
	}
	for _, f := range unset {
		if err := g.ResetFeatureValueToDefault(f); err != nil {
			return err
		}
	}
	return nil
}
