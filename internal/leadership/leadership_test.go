package leadership

import (
	"context"
	"os"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	componentbaseconfigv1alpha1 "k8s.io/component-base/config/v1alpha1"
	"k8s.io/component-base/configz"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"
)

// TestLeading: without kube-scheduler's published config (tests, the
// simulator) or without leader election, the process leads. Under leader
// election it leads only while its hostname holds the Lease, and the
// callbacks run when it starts leading.
func TestLeading(t *testing.T) {
	if !New(t.Context(), nil).Leading() {
		t.Fatal("no published config: not leading")
	}

	cz, err := configz.New("componentconfig")
	if err != nil {
		t.Fatal(err)
	}
	defer configz.Delete("componentconfig")
	cfg := &configv1.KubeSchedulerConfiguration{}
	cfg.SetGroupVersionKind(configv1.SchemeGroupVersion.WithKind("KubeSchedulerConfiguration"))
	cfg.LeaderElection.LeaderElect = ptr.To(false)
	if err := cz.Set(cfg); err != nil {
		t.Fatal(err)
	}
	if !New(t.Context(), nil).Leading() {
		t.Fatal("leader election off: not leading")
	}

	cfg.LeaderElection = componentBaseLE("ns", "phalanx-scheduler")
	if err := cz.Set(cfg); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "phalanx-scheduler"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("other-replica_1234")}}
	client := fake.NewClientset(lease)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := New(ctx, func() kubernetes.Interface { return client })
	led := make(chan struct{}, 1)
	r.OnLead(func() { led <- struct{}{} })
	if r.Leading() {
		t.Fatal("another replica holds the Lease: leading")
	}
	// Once the poller has read the Lease, still the other replica's.
	deadline := time.Now().Add(5 * Poll)
	for !leaseRead(client) {
		if time.Now().After(deadline) {
			t.Fatal("the Lease was never read")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r.Leading() {
		t.Fatal("another replica holds the Lease: leading after a poll")
	}
	lease.Spec.HolderIdentity = ptr.To(host + "_5678")
	if _, err := client.CoordinationV1().Leases("ns").Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-led:
	case <-time.After(5 * Poll):
		t.Fatal("OnLead did not run after this host took the Lease")
	}
	if !r.Leading() {
		t.Fatal("this host holds the Lease: not leading")
	}

	// A scheduling cycle shows it leads before any poll does.
	other := New(ctx, func() kubernetes.Interface { return fake.NewClientset() })
	ran := 0
	other.OnLead(func() { ran++ })
	if other.Leading() {
		t.Fatal("no Lease: leading")
	}
	other.CycleRan()
	other.CycleRan()
	if !other.Leading() || ran != 1 {
		t.Fatalf("after a scheduling cycle: leading %v, OnLead ran %d times, want true and once", other.Leading(), ran)
	}
}

func leaseRead(client *fake.Clientset) bool {
	for _, a := range client.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "leases" {
			return true
		}
	}
	return false
}

func componentBaseLE(namespace, name string) componentbaseconfigv1alpha1.LeaderElectionConfiguration {
	return componentbaseconfigv1alpha1.LeaderElectionConfiguration{LeaderElect: ptr.To(true), ResourceNamespace: namespace, ResourceName: name, ResourceLock: "leases"}
}
