package plugins

import (
	"testing"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/pkg/features"
)

// TestFeatureDefaults: phalanx starts with NominatedNodeNameForExpectation
// off and SchedulerAsyncAPICalls on (docs/deploy.md says why), and
// --feature-gates, applied after the defaults as kube-scheduler's command
// does, sets them back.
func TestFeatureDefaults(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.NominatedNodeNameForExpectation, true)
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.SchedulerAsyncAPICalls, false)
	if err := SetFeatureDefaults(); err != nil {
		t.Fatal(err)
	}
	if utilfeature.DefaultFeatureGate.Enabled(features.NominatedNodeNameForExpectation) {
		t.Fatal("NominatedNodeNameForExpectation is on after SetFeatureDefaults")
	}
	if !utilfeature.DefaultFeatureGate.Enabled(features.SchedulerAsyncAPICalls) {
		t.Fatal("SchedulerAsyncAPICalls is off after SetFeatureDefaults")
	}
	// What the --feature-gates flag does.
	if err := utilfeature.DefaultMutableFeatureGate.Set("NominatedNodeNameForExpectation=true,SchedulerAsyncAPICalls=false"); err != nil {
		t.Fatal(err)
	}
	if !utilfeature.DefaultFeatureGate.Enabled(features.NominatedNodeNameForExpectation) {
		t.Fatal("--feature-gates=NominatedNodeNameForExpectation=true did not win over phalanx's default")
	}
	if utilfeature.DefaultFeatureGate.Enabled(features.SchedulerAsyncAPICalls) {
		t.Fatal("--feature-gates=SchedulerAsyncAPICalls=false did not win over phalanx's default")
	}
}
