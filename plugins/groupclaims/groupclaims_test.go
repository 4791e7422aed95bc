package groupclaims

import (
	"testing"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPodGroups: the plugin's PodGroup lister answers from phalanx's
// informer, and an unknown group is no error (its members' claims are then
// bound to the pods, as without the gate).
func TestPodGroups(t *testing.T) {
	known := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job"}}
	var lister lister
	lister.podGroups = func(ns, name string) *schedulingv1beta1.PodGroup {
		if ns == known.Namespace && name == known.Name {
			return known
		}
		return nil
	}
	for _, tc := range []struct {
		name string
		want *schedulingv1beta1.PodGroup
	}{{"job", known}, {"other", nil}} {
		got, err := lister.PodGroups().Get("ns", tc.name)
		if err != nil || got != tc.want {
			t.Fatalf("Get(ns, %s) = (%v, %v), want (%v, nil)", tc.name, got, err, tc.want)
		}
	}
	if got := (&Plugin{}).Name(); got != Name {
		t.Fatalf("Name() = %q, want %q: the framework keys weights and hints by the profile's name", got, Name)
	}
}
